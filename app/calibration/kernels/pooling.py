"""Tied scores pooled: (distinct score, summed weight, summed weight of positives).

Every method that fits on sorted distinct scores (isotonic regression, Platt's and beta's
Newton, histogram binning, Venn-ABERS) starts here, and sorting dominates their cost:
scikit-learn's lexsort alone is a third to two thirds of its isotonic fit. So the sort is as
cheap as the input allows: none for scores already sorted (a cross-validation sorts its batch
once for every fold and candidate), one per class for equal weights, one argsort otherwise.

The AUC (:mod:`~app.calibration.measures.auc`) does not call :func:`pool_ties`: a measured batch can
hold 10^7 rows, so it treats ties without n-sized copies in score order. With equal weights it
counts the negatives below and tied with each positive by binary search in each class's sorted
scores; with other weights it takes :func:`pool_ties`' sums a block of its argsort at a time.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray

SMALLEST_GAP = float(np.nextafter(0.0, 1.0))
"""The smallest positive float: as ``min_gap`` of :func:`pool_ties`, only equal scores pool."""


def pool_ties(
    scores: FloatArray,
    labels: FloatArray,
    sample_weight: FloatArray,
    *,
    min_gap: float = SMALLEST_GAP,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Pool tied scores: (sorted distinct score, summed weight, summed weight of positives).

    Points of zero weight are dropped first (they add nothing to a weighted fit). In score
    order, a point starts a new pool when it exceeds the previous score by at least
    ``min_gap`` (by default: when it differs at all); a pool takes its first score. Labels
    are 0/1.

    Sorting dominates, so it is done as cheaply as the weights allow. With equal weights (every
    unweighted batch) only the scores of each class are sorted, which is several times faster
    than an argsort: heavily tied batches are then counted per pool by binary search, others
    get their labels back from a stable merge of the two sorted runs. Other weights take one
    unstable argsort. Either way there is no ``np.unique`` (a slower stable sort).
    """
    # np.compress, not a boolean index: the same selection, several times faster
    keep = sample_weight > 0
    if not keep.all():
        scores, labels, sample_weight = (
            np.compress(keep, a) for a in (scores, labels, sample_weight)
        )
    if is_sorted(scores):
        # Already in score order (the cross-validation sorts a batch once for all its folds
        # and candidates): one linear pass.
        return _pool_sorted(scores, labels, sample_weight, min_gap)
    if scores.size and bool(np.all(sample_weight == sample_weight[0])):
        return _pool_equal_weights(scores, labels != 0.0, float(sample_weight[0]), min_gap)
    order = np.argsort(scores)
    f = scores[order]
    starts = _pool_starts(f, min_gap)
    w = sample_weight[order]
    w_positive = w * labels[order]
    if starts.all():  # no ties: nothing to sum
        return f, w, w_positive
    pool = np.cumsum(starts) - 1
    weight = np.bincount(pool, weights=w).astype(np.float64, copy=False)
    w_positive = np.bincount(pool, weights=w_positive).astype(np.float64, copy=False)
    return np.compress(starts, f), weight, w_positive


SPREAD = float(np.finfo(np.float64).resolution)
"""Scores at least this far apart are pooled by no method: isotonic regression pools those
closer (its ``_TIE_RESOLUTION``), summing their weights in the order it meets them."""


def score_order(scores: FloatArray) -> tuple[NDArray[np.intp] | None, bool]:
    """The permutation that sorts a binary batch (None when it is sorted already), and
    whether its scores are spread (sorted, each at least :data:`SPREAD` above the last).

    Introsort is five times faster than a stable sort on distinct scores; with ties the stable
    order is taken, so that tied points keep their input order: methods that pick among tied
    points by position (trimming's cut, internal folds) then see them as a direct fit would.
    """
    if is_sorted(scores):
        return None, spread(scores)
    order: NDArray[np.intp] = np.argsort(scores)
    ordered = scores[order]
    if np.any(ordered[1:] == ordered[:-1]):
        return np.argsort(scores, kind="stable"), False
    return order, spread(ordered)


def spread(ordered: FloatArray) -> bool:
    """Whether sorted scores are each at least :data:`SPREAD` above the last."""
    with np.errstate(over="ignore"):  # a gap beyond 1.8e308 is inf: spread
        return not bool(np.any(ordered[1:] - ordered[:-1] < SPREAD))


def is_sorted(values: FloatArray) -> bool:
    """Whether ``values`` is non-decreasing (a linear check, far cheaper than a sort)."""
    return not bool(np.any(values[1:] < values[:-1]))


def _pool_sorted(
    f: FloatArray, labels: FloatArray, weight: FloatArray, min_gap: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """:func:`pool_ties` for scores already sorted: pools are runs, summed by reduceat."""
    positive = weight * labels
    starts = _pool_starts(f, min_gap)
    if starts.all():
        return f, weight, positive
    firsts = np.flatnonzero(starts)
    return (
        np.compress(starts, f),
        np.add.reduceat(weight, firsts),
        np.add.reduceat(positive, firsts),
    )


def _pool_starts(f: FloatArray, min_gap: float) -> NDArray[np.bool_]:
    """For sorted ``f``: True where a point starts a new pool (see :func:`pool_ties`)."""
    starts = np.empty(f.size, dtype=bool)
    starts[:1] = True
    with np.errstate(over="ignore"):  # a gap beyond 1.8e308 is inf: still >= min_gap
        np.greater_equal(f[1:] - f[:-1], min_gap, out=starts[1:])
    return starts


def _pool_equal_weights(
    scores: FloatArray, positive: NDArray[np.bool_], weight: float, min_gap: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """:func:`pool_ties` when every point has the same ``weight`` > 0: pools are counts."""
    negatives = np.sort(np.compress(np.logical_not(positive), scores))
    positives = np.sort(np.compress(positive, scores))
    if 4 * (count_distinct(negatives) + count_distinct(positives)) <= scores.size:
        # Heavy ties (rounded scores): count each class per pool by binary search on its
        # sorted scores, k searches instead of a pass over the pooled points.
        values = np.sort(np.concatenate([_distinct(negatives), _distinct(positives)]))
        firsts = np.compress(_pool_starts(values, min_gap), values)
        n_neg = np.diff(np.searchsorted(negatives, firsts), append=negatives.size)
        n_pos = np.diff(np.searchsorted(positives, firsts), append=positives.size)
        return firsts, weight * (n_neg + n_pos), weight * n_pos
    # Few ties: the two sorted runs merged, each point's class kept
    f, from_positives = merge_classes(negatives, positives)
    y = from_positives.astype(np.float64)
    starts = _pool_starts(f, min_gap)
    if starts.all():
        return f, np.full(f.size, weight), weight * y
    firsts = np.flatnonzero(starts)
    counts = np.diff(firsts, append=f.size)
    return np.compress(starts, f), weight * counts, weight * np.add.reduceat(y, firsts)


def merge_classes(
    negatives: FloatArray, positives: FloatArray
) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Each class's sorted scores merged into one sorted array, and whether each came from the
    positives: a stable argsort of the two runs, which timsort finds and merges in one pass
    (several times faster than an argsort of the scores; tied scores keep the negatives
    first). The arguments are not kept past the merge, so a caller that passes them inline
    holds only the merged arrays at the end."""
    n_negatives = negatives.size
    merged = np.concatenate((negatives, positives))
    del negatives, positives
    order = np.argsort(merged, kind="stable")
    values = merged[order]
    del merged
    return values, order >= n_negatives


def count_distinct(sorted_values: FloatArray) -> int:
    """The number of distinct values of a sorted array."""
    return min(1, sorted_values.size) + int(
        np.count_nonzero(sorted_values[1:] != sorted_values[:-1])
    )


def _distinct(sorted_values: FloatArray) -> FloatArray:
    """The distinct values of a sorted array."""
    if sorted_values.size < 2:
        return sorted_values
    new = np.empty(sorted_values.size, dtype=bool)
    new[0] = True
    np.not_equal(sorted_values[1:], sorted_values[:-1], out=new[1:])
    return np.compress(new, sorted_values)
