"""Bootstrap resamples, drawn once per batch and shared by every measure, report and version.

Efron's bootstrap resamples the rows of a batch with replacement; a measure's value on each
resample gives its sampling distribution, whose 2.5% and 97.5% quantiles are the percentile
95% interval (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, chapter 13).
Here the resamples are Poisson ones: row i appears W_bi times in resample b, the W_bi
independent Poisson(1) counts (Hanley & MacGibbon, "Creating non-parametric bootstrap samples
using Poisson frequencies", 2006), which for n of a few dozen rows or more are the multinomial
bootstrap's counts but independent across rows. That independence is what lets the counts be
drawn without an index per row, a chunk of resamples at a time, as one (resamples x rows)
matrix that every measure reads through matrix products and sums over rows (no Python loop
over rows or resamples), and that a paired comparison reuses for every version.

The counts come from 16 random bits per row and resample through a table: Poisson(1)'s
probabilities rounded to multiples of 2^-16, so counts above 8 (probability 1e-6) never occur.
A chunk's bits come from its own stream, ``SeedSequence(seed, spawn_key=(stream, chunk))``, so
the same seed and batch size give the same resamples, whatever order the chunks are used in.

Calibration errors are biased upwards, most where the true error is 0 (a perfectly
calibrated model's binned ECE on a finite batch is positive), and the bootstrap cannot see that
bias: a percentile interval of the ECE of a calibrated model misses 0 nearly always (measured:
0 of 200 batches of 500-10^4 rows), and the basic interval 2 x - q, which both reference packages
use (``uncertainty-calibration``'s ``bootstrap_uncertainty``, ``relplot``'s ``ce_ci_width``),
still in a third. :func:`calibration_error_interval` therefore starts from the basic interval
and reaches 0 whenever a test of perfect calibration does not reject at 5%: the measure's value
against its distribution on *consistency resamples*, labels redrawn from the predicted
probabilities themselves (Bröcker & Smith, "Increasing the reliability of reliability
diagrams", 2007; they also resample the probabilities, here the test is conditional on the
batch's p). So the interval covers 0 for a calibrated model in 95% of batches, the test's
level, and is the basic interval elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import pdtr

from app.calibration.base import CalibrationError, FloatArray

Float32Array = NDArray[np.float32]

RESAMPLES = 1000
"""Resamples per interval by default."""
MAX_RESAMPLES = 10_000
LEVEL = 0.95
MIN_VALUES = 20
"""Resampled values an interval needs at least: fewer cannot place its 2.5% and 97.5% ends."""
SEED = 1993
"""The seed of every interval, so the same request gives the same interval."""
CHUNK_ENTRIES = 1 << 22
"""Counts drawn at a time (rows x resamples): 16 MB of float32. Twice the 8 MB it was: at
10^5 rows the per-chunk work of the smooth ECE's search then spreads over 41 resamples, not
20 (both reports, 1000 resamples: 1.07 s -> 0.95-1.0 s, measured)."""
MIN_CHUNK_ROWS = 1 << 15
"""Rows a chunk counts as at least: a small batch's chunk still holds at most 128 resamples,
whose smooth ECE grids (up to 10^4 points each) stay small too."""
_BITS = 16
_COUNTS_STREAM, _LABELS_STREAM = 0, 1


def _poisson_table() -> Float32Array:
    """Count per 16-bit value: Poisson(1) by inversion of its CDF rounded to 2^-16 (``pdtr``
    is that CDF, scipy.stats' ``poisson.cdf`` without importing scipy.stats at start-up)."""
    thresholds = np.round(pdtr(np.arange(32), 1.0) * (1 << _BITS))
    table: Float32Array = np.searchsorted(thresholds, np.arange(1 << _BITS), side="right").astype(
        np.float32
    )
    return table


_POISSON = _poisson_table()


def check_resamples(resamples: int) -> None:
    """A :class:`CalibrationError` at ``bootstrap`` unless 0 <= resamples <= 10000."""
    if isinstance(resamples, bool) or not isinstance(resamples, int):
        raise CalibrationError(f"must be an integer, not {resamples!r}", loc=("bootstrap",))
    if not 0 <= resamples <= MAX_RESAMPLES:
        raise CalibrationError(
            f"must be in 0..{MAX_RESAMPLES}, not {resamples}", loc=("bootstrap",)
        )


@dataclass(frozen=True)
class Resamples:
    """``count`` Poisson bootstrap resamples of ``n`` rows, drawn chunk by chunk from ``seed``."""

    n: int
    count: int
    seed: int = SEED

    @property
    def chunk(self) -> int:
        """Resamples per chunk: a function of ``n`` and ``count``, so the same request draws
        the same chunks (a different ``count`` draws different resamples)."""
        return max(1, min(self.count, CHUNK_ENTRIES // max(self.n, MIN_CHUNK_ROWS)))

    def spans(self) -> Iterator[tuple[int, int]]:
        """(first, stop) resample of each chunk."""
        for start in range(0, self.count, self.chunk):
            yield start, min(start + self.chunk, self.count)

    def counts(self, start: int, stop: int) -> Float32Array:
        """The n x (stop - start) matrix of counts of the chunk beginning at ``start``."""
        bits = self._bits(_COUNTS_STREAM, start, stop)
        counts: Float32Array = _POISSON[bits]
        return counts

    def uniforms(self, start: int, stop: int) -> NDArray[np.uint16]:
        """The n x (stop - start) uniform 16-bit integers behind the consistency resamples of
        the chunk beginning at ``start`` (:func:`consistent_labels`)."""
        return self._bits(_LABELS_STREAM, start, stop)

    def _bits(self, stream: int, start: int, stop: int) -> NDArray[np.uint16]:
        if start % self.chunk:
            raise ValueError(f"start: {start} is not the first resample of a chunk")
        sequence = np.random.SeedSequence(self.seed, spawn_key=(stream, start // self.chunk))
        rng = np.random.Generator(np.random.PCG64(sequence))
        raw = rng.bytes(2 * (stop - start) * self.n)
        return np.frombuffer(raw, dtype="<u2").reshape(self.n, stop - start)


def consistent_labels(uniforms: NDArray[np.uint16], p: FloatArray) -> NDArray[np.bool_]:
    """Labels drawn as Bernoulli(p) from :meth:`Resamples.uniforms` (p rounded to 2^-16): the
    same uniforms for every view, so views of one batch see the same draws."""
    threshold = np.round(np.asarray(p, dtype=np.float64) * (1 << _BITS)).astype(np.uint32)
    labels: NDArray[np.bool_] = uniforms < threshold[:, None]
    return labels


Interval = tuple[float, float]


def percentile_interval(values: FloatArray, level: float = LEVEL) -> Interval | None:
    """The (1 - level)/2 and (1 + level)/2 quantiles of the finite resampled values; None when
    the measure is undefined on half the resamples or more (e.g. one class), or on all but
    fewer than :data:`MIN_VALUES`.

    A quantile q of B values is read at the (B + 1) q-th smallest, interpolated (the ordered
    value Davison & Hinkley read, *Bootstrap Methods and their Application*, 1997): the
    expected share of the distribution below the k-th smallest of B draws is k / (B + 1), so
    this end holds q of it on average for any B, where numpy's default, the (B - 1) q + 1-th,
    holds ((B - 1) q + 1) / (B + 1) (a 95% interval from 100 resamples would then hold 93% of
    the distribution on average, from 1000 still 94.8%; measured here, the coverage test at
    50 resamples needs the former)."""
    finite = values[np.isfinite(values)]
    if finite.size < MIN_VALUES or finite.size * 2 <= values.size:
        return None
    low, high = _quantiles(finite, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(low), float(high)


def _quantiles(values: FloatArray, levels: list[float]) -> FloatArray:
    """:func:`percentile_interval`'s quantiles of finite ``values``: the (B + 1) q rule,
    clipped to the smallest and largest value, which is numpy's ``weibull`` method, and
    computed as numpy's ``quantile`` does (its interpolation included, so to the bit) from
    a partition around the ordered values it needs: numpy's own call costs ten times as
    much, and monitoring asks for four pairs per window."""
    n, q = values.size, np.asarray(levels, dtype=np.float64)
    at = n * q + q - 1.0  # the (B + 1) q-th smallest, 0-based, rounded as numpy rounds it
    floor = np.floor(at)
    below = np.clip(floor, 0, n - 1).astype(np.intp)  # past an end both are the end value
    above = np.clip(floor + 1, 0, n - 1).astype(np.intp)
    ordered = np.partition(values, np.union1d(below, above))
    low, high, t = ordered[below], ordered[above], at - floor
    # numpy's lerp: from the nearer end, so that t = 0 and t = 1 give the values themselves
    found: FloatArray = np.where(t >= 0.5, high - (high - low) * (1.0 - t), low + (high - low) * t)
    return found


def calibration_error_interval(
    value: float | None,
    resampled: FloatArray,
    consistent: FloatArray,
    level: float = LEVEL,
) -> Interval | None:
    """The interval of a calibration error (see the module's docstring): the basic bootstrap
    interval [2 x - q_high, 2 x - q_low] clipped at 0, whose lower end is 0 unless ``value``
    exceeds the ``level`` quantile of its values on the ``consistent`` resamples."""
    if value is None or not math.isfinite(value):
        return None
    quantiles = percentile_interval(resampled, level)
    if quantiles is None:
        return None
    # a calibration error lies in [0, 1]: so does its interval
    low = min(max(2.0 * value - quantiles[1], 0.0), 1.0)
    high = min(max(2.0 * value - quantiles[0], 0.0), 1.0)
    finite = consistent[np.isfinite(consistent)]
    if finite.size == 0 or value <= float(_quantiles(finite, [level])[0]):
        low = 0.0
    return low, max(high, low)
