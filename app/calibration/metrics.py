"""How good are the probabilities: Brier score, log loss, AUC, reliability bins, ECE, Murphy.

The yardsticks of Niculescu-Mizil & Caruana, *Predicting Good Probabilities With Supervised
Learning* (squared error, log loss, 10-bin reliability diagrams). Every measure takes optional
sample weights (``w=None`` means all ones) and uses them as weights throughout, as relative
weights (:func:`~app.calibration.base.relative_weights`): a measure is the same for weights
times any constant, and subnormal or huge weights neither lose digits nor overflow.

A stored batch can hold 10^7 rows, so the measures work through it :data:`BLOCK` rows at a time
and make few n-sized arrays: the AUC's sorted scores (or its argsort), quantile bins' sorted copy
of p and a byte per row for the bins. The bins' sums are added point by point in row order, as
``np.bincount`` adds them, so they are the same bit for bit. A weighted mean is a sum of blocks,
each summed pairwise (no BLAS dot: its threads cost more than a block's work), which rounds
differently from one dot product over all rows, by a few 1e-16 relative, nearer the exact sum.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import (
    CalibrationError,
    FloatArray,
    JSONValue,
    check_batch,
    relative_weights,
)

STRATEGIES = ("uniform", "quantile")
WILSON_Z = 1.959963984540054  # the 0.975 quantile of the standard normal: a 95% interval
BLOCK = 1 << 16
"""Rows per block: enough to amortise numpy's cost per call, few enough to stay in cache."""
GRID = 1 << 12
"""Cells of [0, 1] in the bin lookup table; a power of two, so p * GRID is exact."""


@dataclass(frozen=True)
class ReliabilityBin:
    """One bin of a reliability diagram; the statistics are ``None`` when it has no weight.

    ``count`` is the number of points, ``weight`` their summed sample weight (= count when
    unweighted) in the caller's units (float64's largest number should the sum exceed it);
    the mean, the fraction of positives and its 95% Wilson interval are weighted.
    """

    lower: float
    upper: float
    count: int
    weight: float
    mean_predicted: float | None
    fraction_positive: float | None
    ci_low: float | None
    ci_high: float | None

    def as_dict(self) -> dict[str, JSONValue]:
        """The bin as a JSON object."""
        return asdict(self)


def brier_score(p: FloatArray, y: FloatArray, w: FloatArray | None = None) -> float:
    """The weighted mean of (p - y)^2."""
    return _brier_score(*_probabilities(p, y, w))


def log_loss(
    p: FloatArray, y: FloatArray, w: FloatArray | None = None, eps: float = 1e-15
) -> float:
    """-weighted mean of y log p + (1 - y) log(1 - p), with p clipped to [eps, 1 - eps].

    The clipping keeps the loss finite (*Obtaining Calibrated Probabilities from Boosting*).
    """
    return _log_loss(*_probabilities(p, y, w), eps)


def weighted_mean(values: FloatArray, w: FloatArray) -> float:
    """sum w_i values_i / sum w_i, on relative weights: the same for w times any constant."""
    return blockwise_mean(lambda block: values[block], w)


def blockwise_mean(values: Callable[[slice], FloatArray], w: FloatArray) -> float:
    """:func:`weighted_mean` of values computed a block of rows at a time, ``values(block)``.

    Neither the values nor the relative weights exist as n-sized arrays.
    """
    total = weight = 0.0
    for block, relative in _relative_blocks(w):
        total += float(np.sum(relative * values(block)))
        weight += float(relative.sum())
    return total / weight


def roc_auc(scores: FloatArray, y: FloatArray, w: FloatArray | None = None) -> float | None:
    """Weighted area under the ROC curve, ties counted half; ``None`` with a single class.

    Equals the probability that a random positive outscores a random negative (the
    Mann-Whitney statistic): each positive's weight times the negative weight below its score
    plus half the negative weight tied with it. O(n log n); see :func:`_roc_auc`.
    """
    f, labels, weights = check_batch(scores, y, w)
    return _roc_auc(f, labels != 0.0, weights)


def reliability_bins(
    p: FloatArray,
    y: FloatArray,
    n_bins: int = 10,
    strategy: str = "uniform",
    w: FloatArray | None = None,
) -> list[ReliabilityBin]:
    """The reliability diagram: always ``n_bins`` bins, edges as scikit-learn's calibration_curve.

    ``"uniform"``: edges linspace(0, 1, n_bins + 1) (the paper's 10 bins of width 0.1);
    ``"quantile"``: percentiles of p. A point goes to bin searchsorted(inner edges, p), so the
    non-empty bins equal ``calibration_curve``'s. The interval is Wilson's with the Kish
    effective size (sum w)^2 / sum w^2, which is the count when unweighted.
    """
    _check_bin_settings(n_bins, strategy)
    p, y, w = _probabilities(p, y, w)
    return _reliability_bins(p, y, w, n_bins, strategy)


def _check_bin_settings(n_bins: int, strategy: str) -> None:
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or not 2 <= n_bins <= 100:
        raise CalibrationError(f"n_bins: must be an integer in 2..100, not {n_bins!r}")
    if strategy not in STRATEGIES:
        raise CalibrationError(
            f"strategy: must be one of {', '.join(STRATEGIES)}, not {strategy!r}"
        )


def _reliability_bins(
    p: FloatArray, y: FloatArray, w: FloatArray, n_bins: int, strategy: str
) -> list[ReliabilityBin]:
    """:func:`reliability_bins` of a checked batch."""
    if strategy == "uniform":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    else:
        # scikit-learn's calibration_curve: linspace(0, 1) * 100, not linspace(0, 100), whose
        # rounding differs at some n_bins and moves an edge that falls on a data point. The
        # percentiles are order statistics, the same for any order of p, and np.percentile
        # partitions a sorted copy several times faster than a copy of p (np.sort is SIMD).
        q = np.linspace(0.0, 1.0, n_bins + 1) * 100
        edges = np.percentile(np.sort(p), q, overwrite_input=True)
    count, weight, r_sum, r_p, r_y, r_sq = _bin_sums(p, y, w, edges[1:-1], n_bins)
    filled = weight > 0
    # A bin's statistics are weighted means within the bin, so they are taken on weights
    # divided by the bin's largest (r): a bin whose weights are all subnormal next to another
    # bin's (weights 1 and 1e-320) keeps its digits in r p, and squares cannot underflow.
    r_sum = np.where(filled, r_sum, 1.0)
    mean = r_p / r_sum
    frac = r_y / r_sum
    # Kish's effective size (sum w)^2 / sum w^2 (the count for equal weights); a filled bin's
    # sum of squares is at least 1, its largest r being 1
    n_eff = r_sum**2 / np.where(filled, r_sq, 1.0)
    low, high = wilson_interval(frac, np.where(filled, n_eff, 1.0))
    _, exponent = relative_weights(w.max(keepdims=True))
    with np.errstate(over="ignore"):  # reported in the caller's units, which may overflow
        reported = np.minimum(np.ldexp(weight, exponent), np.finfo(np.float64).max)
    rows = zip(edges[:-1], edges[1:], count, reported, filled, mean, frac, low, high, strict=True)
    # one row per bin (n_bins <= 100), not per sample
    return [
        ReliabilityBin(
            float(lo),
            float(up),
            int(c),
            float(wt),
            *((float(m), float(fr), float(a), float(b)) if ok else (None, None, None, None)),
        )
        for lo, up, c, wt, ok, m, fr, a, b in rows
    ]


def _bin_sums(
    p: FloatArray, y: FloatArray, w: FloatArray, inner: FloatArray, n_bins: int
) -> tuple[NDArray[np.int64], FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Per bin: the count, the relative weight, and the sums of r, r p, r y and r^2, where r
    is a point's relative weight divided by the largest in its bin (1 for equal weights).

    Two passes over blocks: the bins and their largest weight, then the sums of r. np.add.at
    adds point by point in row order as np.bincount does, so the sums are bincount's over all
    rows, bit for bit, without an n-sized index (a byte per row is kept for the second pass).
    """
    lookup = _bin_lookup(inner)
    index = np.empty(p.size, dtype=np.uint8)  # n_bins <= 100
    count = np.zeros(n_bins, dtype=np.int64)
    weight, largest = np.zeros(n_bins), np.zeros(n_bins)
    for block, relative in _relative_blocks(w):
        bins = _bin_index(p[block], inner, lookup)
        index[block] = bins
        count += np.bincount(bins, minlength=n_bins)
        np.add.at(weight, bins, relative)
        np.maximum.at(largest, bins, relative)
    scale = np.where(weight > 0, largest, 1.0)
    sums = np.zeros((4, n_bins))
    for block, relative in _relative_blocks(w):
        bins = index[block].astype(np.intp)
        r = relative / scale[bins]
        for total, values in zip(sums, (r, r * p[block], r * y[block], r * r), strict=True):
            np.add.at(total, bins, values)
    return count, weight, sums[0], sums[1], sums[2], sums[3]


def wilson_interval(fraction: FloatArray, n: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Wilson's score interval at 95% for a proportion ``fraction`` of ``n`` trials."""
    z2 = WILSON_Z**2
    denominator = 1.0 + z2 / n
    centre = (fraction + z2 / (2.0 * n)) / denominator
    half = WILSON_Z / denominator * np.sqrt(fraction * (1.0 - fraction) / n + z2 / (4.0 * n * n))
    # The interval always contains the observed fraction; rounding must not say otherwise.
    low = np.clip(np.minimum(centre - half, fraction), 0.0, 1.0)
    high = np.clip(np.maximum(centre + half, fraction), 0.0, 1.0)
    return low, high


def expected_calibration_error(bins: list[ReliabilityBin]) -> float:
    """ECE = sum over bins of (bin weight / total weight) |fraction_positive - mean_predicted|."""
    share, gap, _, _ = _bin_arrays(bins)
    return float(share @ gap)


def maximum_calibration_error(bins: list[ReliabilityBin]) -> float:
    """MCE = the largest |fraction_positive - mean_predicted| over the bins with weight."""
    _, gap, _, _ = _bin_arrays(bins)
    return float(gap.max())


def murphy_decomposition(
    bins: list[ReliabilityBin], base_rate: float
) -> tuple[float, float, float]:
    """(reliability, resolution, uncertainty) of the Brier score over the bins (Murphy 1973).

    reliability = sum_k s_k (mean_k - frac_k)^2, resolution = sum_k s_k (frac_k - base)^2,
    uncertainty = base (1 - base), with s_k the bin's weight share. Brier = reliability -
    resolution + uncertainty holds exactly when the predictions are constant within each bin.
    """
    share, _, mean, frac = _bin_arrays(bins)
    reliability = float(share @ (mean - frac) ** 2)
    resolution = float(share @ (frac - base_rate) ** 2)
    return reliability, resolution, base_rate * (1.0 - base_rate)


def scale_raw_scores(scores: FloatArray) -> FloatArray:
    """Scores for a "before" diagram: unchanged when all in [0, 1], else min-max scaled.

    *Predicting Good Probabilities* scales SVM margins this way. Constant scores give 0.5.
    Scores are first divided by a power of two (exact) so |scores| near 1e308 cannot overflow.
    """
    f = np.asarray(scores, dtype=np.float64)
    if f.size == 0:
        return f
    smallest, largest = float(f.min()), float(f.max())
    if smallest >= 0.0 and largest <= 1.0:
        return f
    # one new array, scaled in place: (u - low) / (high - low) clipped, without temporaries
    scaled: FloatArray = np.ldexp(f, -math.frexp(max(-smallest, largest))[1])
    low, high = float(scaled.min()), float(scaled.max())
    if high == low:
        scaled.fill(0.5)
        return scaled
    scaled -= low
    scaled /= high - low
    return np.clip(scaled, 0.0, 1.0, out=scaled)


def summarize(
    p: FloatArray,
    y: FloatArray,
    w: FloatArray | None = None,
    *,
    n_bins: int = 10,
    strategy: str = "uniform",
) -> dict[str, JSONValue]:
    """``{"bins": [...], "metrics": {...}}``: the diagnostics the API returns for a batch."""
    p, y, w = _probabilities(p, y, w)
    _check_bin_settings(n_bins, strategy)
    bins = _reliability_bins(p, y, w, n_bins, strategy)
    reliability, resolution, uncertainty = murphy_decomposition(bins, weighted_mean(y, w))
    return {
        "bins": [row.as_dict() for row in bins],
        "metrics": {
            "brier": _brier_score(p, y, w),
            "log_loss": _log_loss(p, y, w),
            "ece": expected_calibration_error(bins),
            "mce": maximum_calibration_error(bins),
            "auc": _roc_auc(p, y != 0.0, w),
            "reliability": reliability,
            "resolution": resolution,
            "uncertainty": uncertainty,
        },
    }


def headline_metrics(
    p: FloatArray, y: FloatArray, w: FloatArray | None = None
) -> dict[str, JSONValue]:
    """``{"brier", "log_loss", "ece", "auc"}`` (ECE over 10 uniform bins), stored with a version."""
    p, y, w = _probabilities(p, y, w)
    return {
        "brier": _brier_score(p, y, w),
        "log_loss": _log_loss(p, y, w),
        "ece": expected_calibration_error(_reliability_bins(p, y, w, 10, "uniform")),
        "auc": _roc_auc(p, y != 0.0, w),
    }


def _probabilities(
    p: FloatArray, y: FloatArray, w: FloatArray | None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    p, y, w = check_batch(p, y, w, scores_field="probabilities")
    if p.min() < 0.0 or p.max() > 1.0:
        raise CalibrationError("probabilities: must lie in [0, 1]")
    return p, y, w


def _brier_score(p: FloatArray, y: FloatArray, w: FloatArray) -> float:
    return blockwise_mean(lambda block: (p[block] - y[block]) ** 2, w)


def _log_loss(p: FloatArray, y: FloatArray, w: FloatArray, eps: float = 1e-15) -> float:
    def loss(block: slice) -> FloatArray:
        q, t = np.clip(p[block], eps, 1.0 - eps), y[block]
        terms: FloatArray = t * np.log(q) + (1.0 - t) * np.log1p(-q)
        return terms

    return -blockwise_mean(loss, w)


def _bin_arrays(
    bins: list[ReliabilityBin],
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(weight share, |frac - mean|, mean, frac) of the bins that hold weight."""
    filled = [b for b in bins if b.mean_predicted is not None and b.fraction_positive is not None]
    if not filled:
        raise CalibrationError("bins: no bin holds any weight")
    weight, _ = relative_weights(np.array([b.weight for b in filled]))
    mean = np.array([b.mean_predicted for b in filled], dtype=np.float64)
    frac = np.array([b.fraction_positive for b in filled], dtype=np.float64)
    return weight / weight.sum(), np.abs(frac - mean), mean, frac


def _bin_lookup(inner: FloatArray) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
    """Per cell c of [0, 1] (the points with floor(p * GRID) = c): the bin of its lower end
    c / GRID, and whether an inner edge lies inside the cell.

    A point's bin, searchsorted(inner, p), lies between the bins of its cell's two ends, so it
    is the table's unless an edge lies inside. p * GRID and c / GRID are exact (GRID is a power
    of two); p = 1 is the lower end of the last cell, GRID.
    """
    ends = np.searchsorted(inner, np.arange(GRID + 2) / GRID)
    edge_inside = ends[:-1] != ends[1:]
    edge_inside[GRID] = False
    return ends[:-1], edge_inside


def _bin_index(
    p: FloatArray, inner: FloatArray, lookup: tuple[NDArray[np.intp], NDArray[np.bool_]]
) -> NDArray[np.intp]:
    """searchsorted(inner, p) for p in [0, 1], from :func:`_bin_lookup`'s table: only points
    in a cell with an edge inside are searched (~5 times faster than searching every point)."""
    lower, edge_inside = lookup
    cell = (p * GRID).astype(np.intp)
    bins = lower[cell]
    search = np.flatnonzero(edge_inside[cell])
    if search.size:
        bins[search] = np.searchsorted(inner, p[search])
    return bins


def _roc_auc(scores: FloatArray, positive: NDArray[np.bool_], w: FloatArray) -> float | None:
    """:func:`roc_auc` of a checked batch: sum over positives of w (W-(below) + W-(tied) / 2),
    divided by W+ W-, with W- the negatives' weight and W+ the positives'.

    Equal weights cancel, and counts are enough: each class is sorted by value (several times
    faster than an argsort) and binary search counts the negatives below and tied with each
    positive, exactly, in integers. Other weights need one argsort; the pooled weights of the
    distinct scores then come a block at a time (:func:`_score_pools`).
    """
    if w.min() == w.max():
        negatives, positives = np.compress(~positive, scores), np.compress(positive, scores)
        if not negatives.size or not positives.size:
            return None
        negatives.sort()  # in place: no second copy
        positives.sort()
        pairs = 0  # twice the sum over positives of (negatives below + half the tied)
        for start in range(0, positives.size, BLOCK):
            query = positives[start : start + BLOCK]  # sorted: the searches stay in cache
            n_below = np.searchsorted(negatives, query)
            # a second search, for the negatives tied, only where a negative has the score
            shared = np.flatnonzero(negatives.take(n_below, mode="clip") == query)
            n_tied = np.searchsorted(negatives, query[shared], "right") - n_below[shared]
            pairs += 2 * int(n_below.sum()) + int(n_tied.sum())
        # one rounding of the exact ratio, as the pooled sums of equal weights give it
        return pairs / (2 * positives.size * negatives.size)
    numerator = below = weight_positive = 0.0
    for pool_positive, pool_negative in _score_pools(scores, positive, w):
        before = below + np.cumsum(pool_negative) - pool_negative
        numerator += float(np.sum(pool_positive * (before + 0.5 * pool_negative)))
        below += float(pool_negative.sum())
        weight_positive += float(pool_positive.sum())
    total = weight_positive * below
    return numerator / total if total > 0.0 else None


def _score_pools(
    scores: FloatArray, positive: NDArray[np.bool_], w: FloatArray
) -> Iterator[tuple[FloatArray, FloatArray]]:
    """The positive and the negative relative weight of each distinct score, in score order,
    a block of the argsort at a time: :func:`~app.calibration.pooling.pool_ties`' sums without
    its n-sized copies in score order. A block's last score may go on in the next block, so
    its sums are held back until another score is read."""
    order = np.argsort(scores)
    held: tuple[float, float, float] | None = None  # a score, its positive and negative weight
    for block, relative in _relative_blocks(w, order):
        rows = order[block]
        f, is_positive = scores[rows], positive[rows]
        firsts = np.flatnonzero(np.concatenate(([True], f[1:] != f[:-1])))
        pool_positive = np.add.reduceat(np.where(is_positive, relative, 0.0), firsts)
        pool_negative = np.add.reduceat(np.where(is_positive, 0.0, relative), firsts)
        if held is not None and held[0] == f[0]:
            pool_positive[0] += held[1]
            pool_negative[0] += held[2]
        elif held is not None:
            yield np.array([held[1]]), np.array([held[2]])
        held = (float(f[-1]), float(pool_positive[-1]), float(pool_negative[-1]))
        yield pool_positive[:-1], pool_negative[:-1]
    if held is not None:
        yield np.array([held[1]]), np.array([held[2]])


def _relative_blocks(
    w: FloatArray, order: NDArray[np.intp] | None = None
) -> Iterator[tuple[slice, FloatArray]]:
    """(block, relative weights of the rows w[block], or of w[order[block]]): the values of
    :func:`relative_weights` a block at a time."""
    _, exponent = relative_weights(w.max(keepdims=True))
    for start in range(0, w.size, BLOCK):
        block = slice(start, start + BLOCK)
        with np.errstate(under="ignore"):
            relative = np.ldexp(w[block] if order is None else w[order[block]], -exponent)
        yield block, relative
