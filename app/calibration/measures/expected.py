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
the delta method's, and so does ROC AUC (:func:`grouped_auc_band`): its first-order
variance as a function of the independent labels, which matches the spread of simulated
label vectors within about 10% from 50 rows up, in time linear in the rows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray
from app.calibration.measures.reliability import WILSON_Z

DEFAULT_THRESHOLD = 0.5
"""Where expected and realized measures decide 1 unless told: a probability above it."""
EPS = 1e-15
"""Probabilities are clipped to [EPS, 1 - EPS] for log losses, as everywhere."""
Z = WILSON_Z
"""The standard normal's 97.5% quantile: two-sided 95% bands."""
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


class BinarySums:
    """The sums over probabilities that make every expected measure at ``threshold`` but the
    AUC, and their variances; added to a chunk of probabilities at a time, so a window of
    traffic never has to be held whole."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.n = 0
        self.m = 0  # predicted positive: p > threshold
        self.tp = self.fp = self.fn = self.tn = 0.0  # expected counts
        self.var_positive = self.var_negative = 0.0  # sum of p (1 - p) on each side
        self.entropy = 0.0  # sum of the expected log losses
        self.var_loss = 0.0  # sum of p (1 - p) logit(p)^2: each row's loss variance
        self.var_brier = 0.0  # sum of p (1 - p) (1 - 2p)^2: each row's Brier variance

    def add(self, p: FloatArray) -> FloatArray:
        """Probabilities; answers their log odds (clipped to [EPS, 1 - EPS]), which the
        caller may reuse."""
        q = 1.0 - p
        variance = p * q
        positive = p > self.threshold
        clipped = np.clip(p, EPS, 1 - EPS)
        log_p, log_q = np.log(clipped), np.log1p(-clipped)
        log_odds: FloatArray = log_p - log_q
        self.n += p.size
        self.m += int(positive.sum())
        self.tp += float(p[positive].sum())
        self.fp += float(q[positive].sum())
        self.fn += float(p[~positive].sum())
        self.tn += float(q[~positive].sum())
        self.var_positive += float(variance[positive].sum())
        self.var_negative += float(variance[~positive].sum())
        # products summed, not ``@``: a BLAS dot of long vectors can stall on busy cores
        self.entropy -= float((p * log_p + q * log_q).sum())
        self.var_loss += float((variance * log_odds**2).sum())
        self.var_brier += float((variance * (1 - 2 * p) ** 2).sum())
        return log_odds

    def estimate(self, auc: float | None, auc_band: Band | None) -> dict[str, Any]:
        """Every expected measure and its band, given the expected AUC and its band; a
        measure with no expectation (no predicted positives for precision) is None."""
        n, m, tp, fp, fn, tn = self.n, self.m, self.tp, self.fp, self.fn, self.tn
        if n == 0:
            return {**dict.fromkeys(BINARY_KEYS), "intervals": {}}
        variance = self.var_positive + self.var_negative
        values: dict[str, float | None] = {
            "positive_rate": (tp + fn) / n,
            "accuracy": (tp + tn) / n,
            "precision": tp / m if m else None,
            "recall": tp / (tp + fn) if tp + fn > 0 else None,
            "f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn > 0 else None,
            "roc_auc": auc,
            "log_loss": self.entropy / n,
            "brier": variance / n,
        }
        spread = {
            "positive_rate": variance / n**2,
            "accuracy": variance / n**2,
            "precision": self.var_positive / m**2 if m else None,
            "log_loss": self.var_loss / n**2,
            "brier": self.var_brier / n**2,
            "recall": self._recall_variance(),
            "f1": self._f1_variance(),
        }
        intervals: dict[str, Band] = {}
        for key, var in spread.items():
            value = values[key]
            if value is not None and var is not None:
                intervals[key] = _normal(value, var, key)
        if auc is not None and auc_band is not None:
            intervals["roc_auc"] = auc_band
        return {**values, "intervals": intervals}

    def _recall_variance(self) -> float | None:
        """Recall A / (A + C), A = positives among predicted positives, C = among the rest,
        independent: the delta method's variance."""
        total = self.tp + self.fn
        if total <= 0:
            return None
        return (self.fn**2 * self.var_positive + self.tp**2 * self.var_negative) / total**4

    def _f1_variance(self) -> float | None:
        """F1 = 2A / (m + A + C) (m predicted positives): the delta method's variance."""
        denominator = self.m + self.tp + self.fn
        if denominator <= 0:
            return None
        d_a = 2 * (self.m + self.fn) / denominator**2
        d_c = -2 * self.tp / denominator**2
        return d_a**2 * self.var_positive + d_c**2 * self.var_negative


class ClassSums:
    """The sums over (n, k) probability matrices that make the expected multiclass accuracy
    (of the argmax), log loss and Brier (the sum over classes, as the service's multiclass
    Brier), and their variances when each row's label is drawn from the row."""

    def __init__(self) -> None:
        self.n = 0
        self.top = self.var_top = 0.0
        self.loss = self.var_loss = 0.0
        self.brier = self.var_brier = 0.0

    def add(self, p: FloatArray) -> None:
        """Rows of probabilities, (n, k)."""
        top = p.max(axis=1)
        losses = -np.log(np.clip(p, EPS, 1.0))  # the loss of each label
        brier_rows = 1.0 - 2.0 * p + (p**2).sum(axis=1, keepdims=True)  # the Brier of each
        self.n += p.shape[0]
        self.top += float(top.sum())
        self.var_top += float((top * (1 - top)).sum())
        loss, var_loss = _label_moments(p, losses)
        brier, var_brier = _label_moments(p, brier_rows)
        self.loss += loss
        self.var_loss += var_loss
        self.brier += brier
        self.var_brier += var_brier

    def merge(self, other: ClassSums) -> None:
        """Add ``other``'s rows' sums to these."""
        self.n += other.n
        self.top += other.top
        self.var_top += other.var_top
        self.loss += other.loss
        self.var_loss += other.var_loss
        self.brier += other.brier
        self.var_brier += other.var_brier

    def estimate(self) -> dict[str, Any]:
        """The expected accuracy, log loss and Brier score, and their 95% bands."""
        n = self.n
        if n == 0:
            return {**dict.fromkeys(MULTICLASS_KEYS), "intervals": {}}
        values = {"accuracy": self.top / n, "log_loss": self.loss / n, "brier": self.brier / n}
        variances = {"accuracy": self.var_top, "log_loss": self.var_loss, "brier": self.var_brier}
        intervals = {key: _normal(values[key], variances[key] / n**2, key) for key in values}
        return {**values, "intervals": intervals}


def expected_binary(p: FloatArray, threshold: float = DEFAULT_THRESHOLD) -> dict[str, Any]:
    """Every expected measure of ``p`` at ``threshold`` and its 95% sampling band
    (``intervals``); a measure with no expectation (no predicted positives for precision)
    is None."""
    p = np.asarray(p, dtype=np.float64)
    sums = BinarySums(threshold)
    sums.add(p)
    positives, negatives, spreads = _groups(p)
    auc = grouped_auc(positives, negatives) if p.size >= 2 else None  # one row has no pair
    band = None if auc is None else grouped_auc_band(positives, negatives, spreads, auc)
    return sums.estimate(auc, band)


def expected_multiclass(p: FloatArray) -> dict[str, Any]:
    """Accuracy (of the argmax), log loss and Brier expected of an (n, k) probability
    matrix, with their sampling bands (labels drawn from each row)."""
    sums = ClassSums()
    sums.add(np.asarray(p, dtype=np.float64))
    return sums.estimate()


def expected_roc_auc(p: FloatArray) -> float | None:
    """The area under the expected ROC curve of ``p``: with P = sum p and N = sum (1 - p),
    sum over i, j of p_i (1 - p_j) [s_i > s_j] (half where s_i = s_j) / (P N). None when
    P or N is 0 (every probability 0, or every one 1)."""
    positives, negatives, _ = _groups(np.asarray(p, dtype=np.float64))
    return grouped_auc(positives, negatives)


def _groups(p: FloatArray) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    """Per distinct probability, in increasing order: the expected positives (sum p), the
    expected negatives (sum 1 - p) and the labels' variances (sum p (1 - p))."""
    values, inverse = np.unique(p, return_inverse=True)
    size = values.size
    return (
        np.bincount(inverse, weights=p, minlength=size),
        np.bincount(inverse, weights=1.0 - p, minlength=size),
        np.bincount(inverse, weights=p * (1.0 - p), minlength=size),
    )


def grouped_auc(positives: NDArray[Any], negatives: NDArray[Any]) -> float | None:
    """The ROC AUC of groups in increasing order of score, ``positives[g]`` and
    ``negatives[g]`` (counts, or expected counts) in group g: pairs across groups ordered,
    pairs within one counted half. None without positives or negatives."""
    total_p, total_n = float(positives.sum()), float(negatives.sum())
    if total_p <= 0 or total_n <= 0:
        return None
    below = np.cumsum(negatives) - negatives  # negatives in lower groups
    concordant = float((positives * (below + 0.5 * negatives)).sum())
    return concordant / (total_p * total_n)


def grouped_auc_band(
    positives: NDArray[Any], negatives: NDArray[Any], spreads: NDArray[Any], auc: float
) -> Band:
    """The 95% band of the realized AUC of groups (as :func:`grouped_auc`'s) whose rows'
    labels are independent Bernoulli draws: ``spreads[g]`` the sum of p (1 - p) over group
    g's rows.

    The delta method: with C the concordant pairs, P and N the positives and negatives,
    a row of group g turned positive moves C by L_g - H_g (L_g the negatives below it and
    half those beside it, H_g the positives above it and half those beside) and P N by
    N - P, so the AUC C / (P N) by d_g = ((L_g - H_g) - AUC (N - P)) / (P N); its variance
    is sum over groups of spreads[g] d_g^2, at the expected counts."""
    total_p, total_n = float(positives.sum()), float(negatives.sum())
    below = np.cumsum(negatives) - negatives + 0.5 * negatives
    above = total_p - np.cumsum(positives) + 0.5 * positives
    slope = ((below - above) - auc * (total_n - total_p)) / (total_p * total_n)
    half = Z * math.sqrt(max(float((spreads * slope**2).sum()), 0.0))
    return (max(0.0, auc - half), min(1.0, auc + half))


def _label_moments(p: FloatArray, per_label: FloatArray) -> tuple[float, float]:
    """The sums over rows of a measure's mean and variance when each row's label is drawn
    from the row (``per_label[i, c]``: the measure of row i if its label is c)."""
    mean = (p * per_label).sum(axis=1)
    variance = ((p * per_label**2).sum(axis=1) - mean**2).clip(min=0)
    return float(mean.sum()), float(variance.sum())


def _normal(value: float, variance: float, key: str) -> Band:
    """The 95% normal band of ``value``, within [0, 1] for a fraction (every measure here
    but the log loss, which is only >= 0)."""
    half = Z * math.sqrt(max(variance, 0.0))
    high = value + half if key == "log_loss" else min(value + half, 1.0)
    return (max(value - half, 0.0), high)
