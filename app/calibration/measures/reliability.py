"""The reliability diagram: a batch's probabilities in bins, with each bin's weighted statistics.

Niculescu-Mizil & Caruana, *Predicting Good Probabilities With Supervised Learning*: 10 bins of
width 0.1 by default; the edges follow scikit-learn's ``calibration_curve``. The bins are made
:data:`~app.calibration.kernels.weights.BLOCK` rows at a time, with few n-sized arrays: quantile
bins' sorted copy of p and a byte per row for the bins. The bins' sums are added point by point in
row order, as ``np.bincount`` adds them, so they are the same bit for bit. The measures read
from the bins (ECE, MCE, Murphy's decomposition) are :mod:`~app.calibration.measures.metrics`'s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import CalibrationError, FloatArray, JSONValue
from app.calibration.kernels.checks import check_probabilities
from app.calibration.kernels.weights import relative_blocks, relative_weights

STRATEGIES = ("uniform", "quantile")
MIN_BINS, MAX_BINS = 2, 100
WILSON_Z = 1.959963984540054  # the 0.975 quantile of the standard normal: a 95% interval
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


@dataclass(frozen=True)
class Bins:
    """A reliability diagram's bins as arrays, one entry per bin (:class:`ReliabilityBin`'s
    fields); the statistics of an empty bin are NaN."""

    lower: FloatArray
    upper: FloatArray
    count: NDArray[np.int64]
    weight: FloatArray
    mean_predicted: FloatArray
    fraction_positive: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    share: FloatArray
    """Each bin's share of the batch's weight, taken on relative weights: ``weight`` is in the
    caller's units, capped at the largest float where its sum overflows (weights of 1e308),
    so the measures read the shares, not ``weight``."""

    @property
    def filled(self) -> NDArray[np.bool_]:
        """The bins that hold weight."""
        filled: NDArray[np.bool_] = ~np.isnan(self.mean_predicted)
        return filled

    def rows(self) -> list[ReliabilityBin]:
        """One :class:`ReliabilityBin` per bin (n_bins <= 100), ``None`` for NaN."""
        columns = (
            self.lower,
            self.upper,
            self.count,
            self.weight,
            self.mean_predicted,
            self.fraction_positive,
            self.ci_low,
            self.ci_high,
        )
        return [
            ReliabilityBin(
                float(lo),
                float(up),
                int(c),
                float(wt),
                *(None if v != v else float(v) for v in stats),
            )
            for lo, up, c, wt, *stats in zip(*columns, strict=True)
        ]


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
    return reliability_table(p, y, n_bins, strategy, w).rows()


def reliability_table(
    p: FloatArray,
    y: FloatArray,
    n_bins: int = 10,
    strategy: str = "uniform",
    w: FloatArray | None = None,
) -> Bins:
    """:func:`reliability_bins` as arrays (:class:`Bins`)."""
    check_bin_settings(n_bins, strategy)
    p, y, w = check_probabilities(p, y, w)
    return bin_table(p, y, w, n_bins, strategy)


def check_bin_settings(n_bins: int, strategy: str) -> None:
    """A :class:`CalibrationError` unless ``n_bins`` is in 2..100 and ``strategy`` known."""
    if (
        isinstance(n_bins, bool)
        or not isinstance(n_bins, int)
        or not MIN_BINS <= n_bins <= MAX_BINS
    ):
        raise CalibrationError(
            f"must be an integer in {MIN_BINS}..{MAX_BINS}, not {n_bins!r}", loc=("n_bins",)
        )
    if strategy not in STRATEGIES:
        raise CalibrationError(
            f"must be one of {', '.join(STRATEGIES)}, not {strategy!r}", loc=("strategy",)
        )


def bin_table(p: FloatArray, y: FloatArray, w: FloatArray, n_bins: int, strategy: str) -> Bins:
    """The bins of :func:`reliability_bins` as arrays, for a batch and settings checked."""
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
    empty = np.where(filled, 1.0, np.nan)  # an empty bin's statistics are NaN
    return Bins(
        edges[:-1],
        edges[1:],
        count,
        reported,
        mean * empty,
        frac * empty,
        low * empty,
        high * empty,
        weight / weight.sum(),
    )


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
    for block, relative in relative_blocks(w):
        bins = _bin_index(p[block], inner, lookup)
        index[block] = bins
        count += np.bincount(bins, minlength=n_bins)
        np.add.at(weight, bins, relative)
        np.maximum.at(largest, bins, relative)
    scale = np.where(weight > 0, largest, 1.0)
    sums = np.zeros((4, n_bins))
    for block, relative in relative_blocks(w):
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
