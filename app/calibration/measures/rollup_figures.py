"""What a :class:`~app.calibration.measures.rollups.BinaryRollup` says: the expected measures
of its predictions at a threshold, the confusion counts and AUC of its labelled ones, and its
cells as EM's bins.

A threshold at a cell's edge (every multiple of 1/20 among them) splits the cells as the
rows would be split. One inside a cell splits that cell's sums in proportion to where it falls
between the cell's edges, as if its probabilities were spread evenly there: the counts of
that one cell are then estimates, off by at most the cell's rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.calibration.base import FloatArray
from app.calibration.measures.expected import BinarySums, grouped_auc, grouped_auc_band
from app.calibration.measures.rollups import CELL_LOWER, CELL_UPPER, FINE_EDGES, BinaryRollup


def above(threshold: float) -> FloatArray:
    """The share of each cell's rows taken to lie above ``threshold``: 1 above it, 0 below,
    and the straddling cell's share of its width."""
    share: FloatArray = np.clip((CELL_UPPER - threshold) / (CELL_UPPER - CELL_LOWER), 0.0, 1.0)
    return share


def expected_of(rollup: BinaryRollup, threshold: float) -> dict[str, Any]:
    """Every expected measure of the rollup's predictions at ``threshold`` and its band, as
    :meth:`~app.calibration.measures.expected.BinarySums.estimate` gives them for the rows,
    with the AUC from the cells (pairs within a cell counted half). At a multiple of 1/20
    the expected counts come from the fine bins' float64 sums, the rows' own to rounding."""
    share = above(threshold)
    counts = rollup.counts.astype(np.float64)
    negatives = counts - rollup.sums
    total = float(rollup.fine_sums.sum())  # every prediction's p, float64
    edge = int(np.searchsorted(FINE_EDGES, threshold))
    positive = float(share @ rollup.sums)
    if edge < FINE_EDGES.size and FINE_EDGES[edge] == threshold:  # the fine bins above it
        positive = float(rollup.fine_sums[edge + 1 :].sum())
    decided = float(share @ counts)  # a count, but for the one cell a threshold splits
    sums = BinarySums(threshold)
    sums.n = rollup.n
    sums.m = decided  # type: ignore[assignment]
    sums.tp, sums.fp = positive, decided - positive
    sums.fn = total - positive
    sums.tn = (rollup.n - decided) - sums.fn
    sums.var_positive = float(share @ rollup.spreads)
    sums.var_negative = rollup.spread - sums.var_positive  # their sum exact: the Brier score
    sums.entropy, sums.var_loss, sums.var_brier = (
        rollup.entropy,
        rollup.var_loss,
        rollup.var_brier,
    )
    auc = grouped_auc(rollup.sums, negatives) if rollup.n >= 2 else None  # one row: no pair
    band = None if auc is None else grouped_auc_band(rollup.sums, negatives, rollup.spreads, auc)
    return sums.estimate(auc, band)


def confusion_of(rollup: BinaryRollup, threshold: float) -> dict[str, Any]:
    """The realized measures of the labelled predictions that confusion counts and the
    cells give (the positive rate, log loss and Brier score come from the calibration sums):
    accuracy, precision, recall and F1 at ``threshold``, and the ROC AUC, pairs within a
    cell counted half."""
    share = above(threshold)
    positives = rollup.positives.astype(np.float64)
    negatives = rollup.negatives.astype(np.float64)
    tp, fp = float(share @ positives), float(share @ negatives)
    fn, tn = float((1 - share) @ positives), float((1 - share) @ negatives)
    n = tp + fp + fn + tn
    return {
        "positive_rate": None,
        "accuracy": (tp + tn) / n if n else None,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
        "f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None,
        "roc_auc": grouped_auc(positives, negatives),
    }


def cell_means(rollup: BinaryRollup) -> tuple[FloatArray, FloatArray]:
    """The filled cells' mean probabilities and their counts (EM's bins and weights)."""
    filled = rollup.counts > 0
    counts = rollup.counts[filled].astype(np.float64)
    return rollup.sums[filled] / counts, counts
