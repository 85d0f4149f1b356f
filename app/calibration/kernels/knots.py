"""Where scores fall among sorted knots, in constant time per score: a bucket index.

Isotonic maps, histogram bins and Venn-ABERS tables all answer a score by the number of their
knots <= it (``np.searchsorted(knots, f, side="right")``). numpy's binary search costs ~40 ns
a score on scores in random order, a mispredicted branch per level, and holds the GIL; for 10^6
scores it was three quarters of a binary infer. :class:`Knots` cuts [knots[0], knots[-1]] into
B equal buckets (the power of two from 8 to 16 per knot, at most 2^16), records how many knots
lie in earlier buckets, and answers a score from its bucket plus a binary search over the few
knots that share it: numpy passes only, 2-3x faster at 10^6, and the same integers as
``searchsorted``. The index costs 4 bytes a bucket (256 KB at most per map, per class of a
one-vs-rest version) and is built by the first predict of at least :data:`MIN_SCORES` scores.

Why it is exact: the bucket of a float64 value, floor((f - knots[0]) * B / width) clipped to
[0, B - 1], is computed by the same float64 operations for scores and knots and never
decreases as f grows (each rounding is monotone). So a knot in an earlier bucket than f is
< f, one in a later bucket is > f, and only the knots of f's own bucket need comparing, at
most ``max_shared`` of them. Scores are taken as float64 first: float32 ones would round
differently from the knots. When knots crowd into one bucket (more than :data:`MAX_SHARED`)
or their range is not a finite positive width, the index is not built and searchsorted
answers.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray

IntArray = NDArray[np.intp]

MIN_SCORES = 4096
"""Below this many scores searchsorted is faster than the index's dozen numpy calls (a
one-score predict must stay a microsecond)."""

MAX_BUCKETS = 1 << 16
MAX_SHARED = 63
"""The most knots one bucket may hold: a binary search over them costs log2 passes."""


class Knots:
    """Strictly increasing knots and, built at the first large lookup, their bucket index."""

    def __init__(self, knots: FloatArray) -> None:
        self.knots = knots
        self._index: _BucketIndex | _Unbuilt | None = _UNBUILT

    def count_at_most(self, f: FloatArray) -> IntArray:
        """How many knots are <= each score: ``np.searchsorted(knots, f, side="right")``."""
        index = self.index(np.size(f))
        if index is None:
            found: IntArray = np.searchsorted(self.knots, f, side="right")
            return found
        return index.count_at_most(np.asarray(f, dtype=np.float64))

    def index(self, scores: int) -> _BucketIndex | None:
        """The bucket index for a lookup of ``scores`` scores, None where searchsorted is
        better (few scores, crowded or unbounded knots). Built once (one store: a race
        builds it twice, harmlessly)."""
        if scores < MIN_SCORES:
            return None
        index = self._index
        if isinstance(index, _Unbuilt):
            index = self._index = _BucketIndex.of(self.knots)
        return index


class _Unbuilt:
    """The index not built yet (None means: built, and searchsorted is better)."""


_UNBUILT = _Unbuilt()


class _BucketIndex:
    """Equal buckets over [knots[0], knots[-1]], each with the number of knots before it."""

    def __init__(self, knots: FloatArray, start: float, scale: float, buckets: int) -> None:
        self.knots = knots
        self.start, self.scale, self.buckets = start, scale, buckets
        of_knots = self.bucket(knots)
        self.max_shared = int(np.bincount(of_knots, minlength=buckets).max())
        before = np.searchsorted(of_knots, np.arange(buckets), side="left")
        self.before = before.astype(np.int32)
        # a binary search over the bucket's knots: steps W/2, ..., 1 with W > max_shared
        self.steps = [1 << k for k in reversed(range(self.max_shared.bit_length()))]
        window = 2 * self.steps[0] if self.steps else 1
        self.padded = np.append(knots, np.full(window, np.nan))  # past m: never <= f

    @classmethod
    def of(cls, knots: FloatArray) -> _BucketIndex | None:
        """The index of ``knots`` (B ~ 4 per knot, at most 2^16), or None when their range is
        not a finite positive width or more than :data:`MAX_SHARED` share a bucket."""
        if knots.size < 2:
            return None
        with np.errstate(over="ignore"):
            width = knots[-1] - knots[0]
        buckets = min(MAX_BUCKETS, 1 << (8 * knots.size).bit_length())  # 8-16 per knot
        with np.errstate(divide="ignore", over="ignore"):
            scale = buckets / width
        if not (np.isfinite(width) and np.isfinite(scale)):
            return None
        index = cls(knots, float(knots[0]), float(scale), buckets)
        return index if index.max_shared <= MAX_SHARED else None

    def count_at_most(self, f: FloatArray) -> IntArray:
        """``np.searchsorted(knots, f, side="right")``, from the buckets."""
        count = self.before[self.bucket(f)].astype(np.intp)
        padded = self.padded
        for step in self.steps:  # knots past the bucket are > f: no bound check needed
            np.add(count, step, out=count, where=padded[count + (step - 1)] <= f)
        nan = np.isnan(f)
        if nan.any():  # searchsorted sorts NaN after every knot
            count[nan] = self.knots.size
        return count

    def bucket(self, values: FloatArray) -> IntArray:
        """floor((values - start) * scale) within [0, B - 1] (NaN: bucket 0, fixed after)."""
        with np.errstate(over="ignore", invalid="ignore"):
            t = np.subtract(values, self.start)
            t *= self.scale
        np.fmax(t, 0.0, out=t)  # fmax/fmin, not clip: they send NaN to a bound, not to int
        np.fmin(t, self.buckets - 1, out=t)
        return t.astype(np.intp)


def interp_slopes(x: FloatArray, v: FloatArray) -> FloatArray:
    """np.interp's slopes, (v[j+1] - v[j]) / (x[j+1] - x[j]), as numpy computes them (inf
    on a subnormal gap: used only at f == x[j], where :func:`interp` answers v[j])."""
    with np.errstate(over="ignore"):
        slopes: FloatArray = (v[1:] - v[:-1]) / (x[1:] - x[:-1])
    return slopes


def interp(knots: Knots, values: FloatArray, slopes: FloatArray, f: FloatArray) -> FloatArray:
    """``np.interp(f, knots, values)`` to the bit, for m >= 2 knots whose np.interp is exact
    (no NaN from an infinite slope inside a segment): numpy's ``arr_interp`` formula
    slopes[j] * (f - x[j]) + values[j] on segment j, values[j] at a knot, the end values at
    and past the ends, NaN for NaN. ``slopes`` are numpy's, (v[j+1] - v[j]) / (x[j+1] - x[j])."""
    index = knots.index(np.size(f))
    if index is None:  # few scores (a one-score predict): numpy's own, nothing more
        found: FloatArray = np.interp(f, knots.knots, values)
        return found
    f = np.asarray(f, dtype=np.float64)
    m = knots.knots.size
    count = index.count_at_most(f)
    j = np.clip(count - 1, 0, m - 2)
    left = knots.knots[j]
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 at a knot: replaced below
        p = slopes[j] * (f - left)
    p += values[j]
    np.copyto(p, values[j], where=f == left)
    p[count == 0] = values[0]
    p[count == m] = values[-1]  # NaN included: put back below
    nan = np.isnan(f)
    if nan.any():
        p[nan] = np.nan
    return p
