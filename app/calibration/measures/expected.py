"""Expected performance of unlabelled predictions: what calibrated probabilities say about the
labels that have not come yet.

If the probabilities p_i are calibrated (and the relation between scores and labels has not
changed), each label is a Bernoulli(p_i) draw, so every measure of a confusion matrix or of
the probabilities has an expectation computed from the p_i alone. This is NannyML's
confidence-based performance estimation (CBPE, ``nannyml/performance_estimation/
confidence_based/metrics.py``), with the formulas of METHODS.md ("Using calibrated
probabilities before the labels come"):

- predicted positive where p_i > t; expected TP = sum of p_i there, FP = sum of 1 - p_i
  there, FN = sum of p_i elsewhere, TN = the rest;
- ``positive_rate`` (mean p), ``accuracy`` ((TP + TN) / n), ``log_loss`` (mean binary
  entropy) and ``brier`` (mean p (1 - p)) are exact expectations;
- ``precision``, ``recall`` and ``f1`` are ratios of expected counts, as CBPE computes them
  (the expectation of a ratio differs from it by O(1/n));
- ``roc_auc`` is the area under the expected ROC curve: expected concordant pairs, ties
  counted half, over expected pairs (NannyML draws the same curve; it adds a phantom point
  at threshold 1 instead of starting at (0, 0), which moves its value by O(1/n)).

The bands are sampling bands under the same assumption: where the realized value of a window
whose labels are Bernoulli(p_i) falls 95% of the time. Linear measures (the rate, accuracy,
log loss, Brier, precision, whose denominator is fixed by p and t) have their exact variance,
a sum of independent terms, and a normal band; recall and F1 (ratios of two independent sums)
the delta method's; ROC AUC a normal band whose spread is the standard deviation of the AUCs
of :data:`AUC_DRAWS` simulated label vectors (above :data:`AUC_ROWS` rows, drawn on a sample
of that many and scaled by the square root of the rows: the AUC's spread shrinks as
1/sqrt(n)).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray

EPS = 1e-15
"""Probabilities are clipped to [EPS, 1 - EPS] for log losses, as everywhere."""
Z = 1.959963984540054
"""The standard normal's 97.5% quantile: two-sided 95% bands."""
AUC_DRAWS = 1000
AUC_ROWS = 5_000
AUC_SEED = 20_021_127
BINARY_KEYS = (
    "positive_rate",
    "accuracy",
    "precision",
    "recall",
    "f1",
    "roc_auc",
    "log_loss",
    "brier",
)
MULTICLASS_KEYS = ("accuracy", "log_loss", "brier")

Band = tuple[float, float]


def expected_binary(p: FloatArray, threshold: float = 0.5) -> dict[str, Any]:
    """Every expected measure of ``p`` at ``threshold`` and its 95% sampling band
    (``intervals``); a measure with no expectation (no predicted positives for precision)
    is None."""
    p = np.asarray(p, dtype=np.float64)
    n = p.size
    if n == 0:
        return {**dict.fromkeys(BINARY_KEYS), "intervals": {}}
    q = 1.0 - p
    variance = p * q  # Var(y_i)
    positive = p > threshold
    tp, fp = float(p[positive].sum()), float(q[positive].sum())
    fn, tn = float(p[~positive].sum()), float(q[~positive].sum())
    m = int(positive.sum())
    values: dict[str, float | None] = {
        "positive_rate": (tp + fn) / n,
        "accuracy": (tp + tn) / n,
        "precision": tp / m if m else None,
        "recall": tp / (tp + fn) if tp + fn > 0 else None,
        "f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn > 0 else None,
        "roc_auc": expected_roc_auc(p),
        "log_loss": float(np.mean(_entropy(p))),
        "brier": float(np.mean(variance)),
    }
    clipped = np.clip(p, EPS, 1 - EPS)
    log_odds = np.log(clipped) - np.log1p(-clipped)
    spread = {
        "positive_rate": float(variance.sum()) / n**2,
        "accuracy": float(variance.sum()) / n**2,
        "precision": float(variance[positive].sum()) / m**2 if m else None,
        "log_loss": float((variance * log_odds**2).sum()) / n**2,
        "brier": float((variance * (1 - 2 * p) ** 2).sum()) / n**2,
        "recall": _recall_variance(tp, fn, variance, positive),
        "f1": _f1_variance(tp, fn, m, variance, positive),
    }
    intervals: dict[str, Band] = {}
    for key, var in spread.items():
        value = values[key]
        if value is not None and var is not None:
            intervals[key] = _normal(value, var, key)
    auc = values["roc_auc"]
    if auc is not None:
        intervals["roc_auc"] = _auc_band(p, auc)
    return {**values, "intervals": intervals}


def expected_multiclass(p: FloatArray) -> dict[str, Any]:
    """Accuracy (of the argmax), log loss and Brier (the sum over classes, as the service's
    multiclass Brier) expected of an (n, k) probability matrix, with their sampling bands
    (labels drawn from each row)."""
    p = np.asarray(p, dtype=np.float64)
    n = p.shape[0]
    if n == 0:
        return {**dict.fromkeys(MULTICLASS_KEYS), "intervals": {}}
    top = p.max(axis=1)
    clipped = np.clip(p, EPS, 1.0)
    losses = -np.log(clipped)  # the loss of each label
    brier_rows = 1.0 - 2.0 * p + (p**2).sum(axis=1, keepdims=True)  # the Brier of each label
    values = {
        "accuracy": float(top.mean()),
        "log_loss": float((p * losses).sum(axis=1).mean()),
        "brier": float((p * brier_rows).sum(axis=1).mean()),
    }
    intervals = {
        "accuracy": _normal(values["accuracy"], float((top * (1 - top)).sum()) / n**2, "accuracy"),
        "log_loss": _normal(values["log_loss"], _row_variance(p, losses) / n**2, "log_loss"),
        "brier": _normal(values["brier"], _row_variance(p, brier_rows) / n**2, "brier"),
    }
    return {**values, "intervals": intervals}


def expected_roc_auc(p: FloatArray) -> float | None:
    """The area under the expected ROC curve of ``p``: with P = sum p and N = sum (1 - p),
    sum over i, j of p_i (1 - p_j) [s_i > s_j] (half where s_i = s_j) / (P N). None when
    P or N is 0 (every probability 0, or every one 1)."""
    p = np.asarray(p, dtype=np.float64)
    total_p, total_n = float(p.sum()), float((1.0 - p).sum())
    if total_p <= 0 or total_n <= 0:
        return None
    values, inverse = np.unique(p, return_inverse=True)
    positives = np.bincount(inverse, weights=p, minlength=values.size)
    negatives = np.bincount(inverse, weights=1.0 - p, minlength=values.size)
    below = np.cumsum(negatives) - negatives  # expected negatives scored strictly lower
    concordant = float(positives @ (below + 0.5 * negatives))
    return concordant / (total_p * total_n)


def realized_auc_draws(p: FloatArray, draws: int, rng: np.random.Generator) -> FloatArray:
    """The ROC AUC of ``draws`` label vectors drawn from ``p`` (Mann-Whitney on mid-ranks;
    NaN for a draw of one class)."""
    ranks = midranks(p)
    found = np.empty(draws)
    for start in range(0, draws, 25):
        chunk = min(25, draws - start)
        labels = rng.random((chunk, p.size)) < p
        ones = labels.sum(axis=1).astype(np.float64)
        zeros = p.size - ones
        sums = labels.astype(np.float64) @ ranks
        with np.errstate(divide="ignore", invalid="ignore"):
            found[start : start + chunk] = (sums - ones * (ones + 1) / 2) / (ones * zeros)
    return found


def midranks(values: FloatArray) -> FloatArray:
    """The ranks of ``values`` from 1, ties given their mean rank (scipy's ``rankdata``,
    without importing ``scipy.stats``: the app starts without it)."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts).astype(np.float64)
    ranks: FloatArray = (ends - (counts - 1) / 2.0)[inverse]
    return ranks


def _auc_band(p: FloatArray, auc: float) -> Band:
    rng = np.random.default_rng(AUC_SEED)
    rows = p if p.size <= AUC_ROWS else rng.choice(p, AUC_ROWS, replace=False)
    found = realized_auc_draws(rows, AUC_DRAWS, rng)
    found = found[np.isfinite(found)]
    if found.size < AUC_DRAWS // 2:
        return (0.0, 1.0)  # labels of one class most of the time: nothing to say
    # the spread of the draws is steadier than their 2.5% tails
    half = Z * float(np.std(found, ddof=1)) * math.sqrt(rows.size / p.size)
    return (max(0.0, auc - half), min(1.0, auc + half))


def _entropy(p: FloatArray) -> FloatArray:
    clipped = np.clip(p, EPS, 1 - EPS)
    return -(p * np.log(clipped) + (1 - p) * np.log1p(-clipped))


def _row_variance(p: FloatArray, per_label: FloatArray) -> float:
    """The sum over rows of the variance of a row's measure when its label is drawn from
    the row's probabilities (``per_label[i, c]``: the measure if the label is c)."""
    mean = (p * per_label).sum(axis=1)
    return float(((p * per_label**2).sum(axis=1) - mean**2).clip(min=0).sum())


def _recall_variance(
    tp: float, fn: float, variance: FloatArray, positive: NDArray[np.bool_]
) -> float | None:
    """Recall A / (A + C), A = positives among predicted positives, C = among the rest,
    independent: the delta method's variance."""
    total = tp + fn
    if total <= 0:
        return None
    var_a, var_c = float(variance[positive].sum()), float(variance[~positive].sum())
    return (fn**2 * var_a + tp**2 * var_c) / total**4


def _f1_variance(
    tp: float, fn: float, m: int, variance: FloatArray, positive: NDArray[np.bool_]
) -> float | None:
    """F1 = 2A / (m + A + C) (m predicted positives): the delta method's variance."""
    denominator = m + tp + fn
    if denominator <= 0:
        return None
    d_a = 2 * (m + fn) / denominator**2
    d_c = -2 * tp / denominator**2
    return d_a**2 * float(variance[positive].sum()) + d_c**2 * float(variance[~positive].sum())


def _normal(value: float, variance: float, key: str) -> Band:
    half = Z * math.sqrt(max(variance, 0.0))
    low, high = value - half, value + half
    if key != "log_loss":  # the others are fractions
        low, high = max(low, 0.0), min(high, 1.0)
    return (max(low, 0.0), high)
