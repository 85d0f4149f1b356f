"""The weighted area under the ROC curve, ties counted half: the Mann-Whitney statistic.

A stored batch can hold 10^7 rows, so the AUC makes few n-sized arrays: the scores of each
class, sorted, for equal weights, or else the argsort of the scores, whose pooled weights then
come :data:`~app.calibration.kernels.weights.BLOCK` rows at a time (:func:`_score_pools`). Each
block starts at a :func:`~app.calibration.kernels.budget.checkpoint`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray
from app.calibration.kernels.budget import checkpoint
from app.calibration.kernels.checks import check_batch
from app.calibration.kernels.weights import BLOCK, relative_blocks


def roc_auc(scores: FloatArray, y: FloatArray, w: FloatArray | None = None) -> float | None:
    """Weighted area under the ROC curve, ties counted half; ``None`` with a single class.

    Equals the probability that a random positive outscores a random negative (the
    Mann-Whitney statistic): each positive's weight times the negative weight below its score
    plus half the negative weight tied with it. O(n log n); see :func:`roc_auc_checked`.
    """
    f, labels, weights = check_batch(scores, y, w)
    return roc_auc_checked(f, labels != 0.0, weights)


def roc_auc_checked(
    scores: FloatArray,
    positive: NDArray[np.bool_],
    w: FloatArray,
    runs: NDArray[np.intp] | None = None,
) -> float | None:
    """:func:`roc_auc` of a batch already checked, ``positive`` being its labels != 0;
    ``runs``, a permutation of the rows in which the scores come in a few sorted runs (a
    monotone calibrator's out-of-fold predictions, :func:`~app.calibration.kernels.crossval.
    fold_runs`), makes its sorts merges (timsort's), which any other permutation only slows.

    The sum over positives of w (W-(below) + W-(tied) / 2), divided by W+ W-, with W- the
    negatives' weight and W+ the positives'.

    Equal weights cancel, and counts are enough: each class is sorted by value (several times
    faster than an argsort) and binary search counts the negatives below and tied with each
    positive, exactly, in integers. Other weights need one argsort; the pooled weights of the
    distinct scores then come a block at a time (:func:`_score_pools`).
    """
    kind: Literal["quicksort", "stable"] = "quicksort" if runs is None else "stable"
    if w.min() == w.max():
        if runs is not None:
            scores, positive = scores[runs], positive[runs]
        negatives, positives = np.compress(~positive, scores), np.compress(positive, scores)
        if not negatives.size or not positives.size:
            return None
        negatives.sort(kind=kind)  # in place: no second copy
        positives.sort(kind=kind)
        pairs = 0  # twice the sum over positives of (negatives below + half the tied)
        for start in range(0, positives.size, BLOCK):
            checkpoint()
            query = positives[start : start + BLOCK]  # sorted: the searches stay in cache
            n_below = np.searchsorted(negatives, query)
            # a second search, for the negatives tied, only where a negative has the score
            shared = np.flatnonzero(negatives.take(n_below, mode="clip") == query)
            n_tied = np.searchsorted(negatives, query[shared], "right") - n_below[shared]
            pairs += 2 * int(n_below.sum()) + int(n_tied.sum())
        # one rounding of the exact ratio, as the pooled sums of equal weights give it
        return pairs / (2 * positives.size * negatives.size)
    numerator = below = weight_positive = 0.0
    order = np.argsort(scores) if runs is None else runs[np.argsort(scores[runs], kind=kind)]
    for pool_positive, pool_negative in _score_pools(scores, positive, w, order):
        before = below + np.cumsum(pool_negative) - pool_negative
        numerator += float(np.sum(pool_positive * (before + 0.5 * pool_negative)))
        below += float(pool_negative.sum())
        weight_positive += float(pool_positive.sum())
    total = weight_positive * below
    return numerator / total if total > 0.0 else None


def _score_pools(
    scores: FloatArray, positive: NDArray[np.bool_], w: FloatArray, order: NDArray[np.intp]
) -> Iterator[tuple[FloatArray, FloatArray]]:
    """The positive and the negative relative weight of each distinct score, in score order,
    a block of the argsort ``order`` at a time: :func:`~app.calibration.kernels.pooling.
    pool_ties`' sums without its n-sized copies in score order. A block's last score may go
    on in the next block, so its sums are held back until another score is read."""
    held: tuple[float, float, float] | None = None  # a score, its positive and negative weight
    for block, relative in relative_blocks(w, order):
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
