"""Independent references for the validation of a window's ``estimated``, ``realized`` and
``prior`` (:mod:`bench.estimates_quality`): nothing here imports the service.

- :func:`realized`: accuracy, ROC AUC and log loss of labelled probabilities by scikit-learn;
- :func:`spiegelhalter_p` and :func:`hosmer_lemeshow_p`: two tests of calibration, which
  decide whether a version is calibrated on a test split;
- :func:`likeliest_prior`: the prior that maximises the likelihood of unlabelled
  probabilities (Saerens, Latinne & Decaestecker 2002), found by scipy's bounded scalar
  search instead of EM;
- :func:`bbse_prior`: black-box shift estimation (Lipton, Wang & Smola, ICML 2018), the
  alternative to EM that the issue compares it with.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy import stats
from scipy.optimize import minimize_scalar
from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

FloatArray = NDArray[np.float64]
EPS = 1e-15
"""Probabilities are clipped to [EPS, 1 - EPS] before a log loss, as the service does."""
MEASURES = ("accuracy", "roc_auc", "log_loss")
"""The measures whose bands the validation checks."""


def realized(labels: FloatArray, p: FloatArray, threshold: float = 0.5) -> dict[str, float | None]:
    """Accuracy (1 where p > ``threshold``), ROC AUC (None with one class only) and log loss
    of probabilities ``p`` against 0/1 ``labels``, by scikit-learn."""
    both = 0 < labels.sum() < labels.size
    return {
        "accuracy": float(accuracy_score(labels, p > threshold)),
        "roc_auc": float(roc_auc_score(labels, p)) if both else None,
        "log_loss": float(log_loss(labels, np.clip(p, EPS, 1 - EPS), labels=[0, 1])),
    }


def spiegelhalter_p(p: FloatArray, labels: FloatArray) -> float:
    """The two-sided p-value of Spiegelhalter's z test of calibration (Statistics in Medicine
    1986): z = sum (y - p)(1 - 2p) / sqrt(sum (1 - 2p)^2 p (1 - p)), standard normal when
    the labels are Bernoulli(p)."""
    z = float(((labels - p) * (1 - 2 * p)).sum()) / math.sqrt(
        float(((1 - 2 * p) ** 2 * p * (1 - p)).sum())
    )
    return float(2 * stats.norm.sf(abs(z)))


def hosmer_lemeshow_p(p: FloatArray, labels: FloatArray, groups: int = 10) -> float:
    """The p-value of the Hosmer-Lemeshow test on ``groups`` groups of equal size by p:
    sum over groups of (O - E)^2 / (E (1 - E / n)), chi-squared with ``groups`` degrees of
    freedom on data the probabilities were not fitted on (Hosmer & Lemeshow, *Applied
    Logistic Regression*, 3rd ed., section 5.2.2)."""
    order = np.argsort(p, kind="stable")
    bounds = np.linspace(0, p.size, groups + 1).round().astype(np.intp)
    group = np.empty(p.size, dtype=np.intp)
    group[order] = np.searchsorted(bounds, np.arange(p.size), side="right") - 1
    n = np.bincount(group, minlength=groups).astype(np.float64)
    observed = np.bincount(group, labels, minlength=groups)
    expected = np.bincount(group, p, minlength=groups)
    spread = expected * (1 - expected / n)
    statistic = float(((observed - expected) ** 2 / spread)[spread > 0].sum())
    return float(stats.chi2.sf(statistic, groups))


def likeliest_prior(p: FloatArray, training: float, weights: FloatArray | None = None) -> float:
    """The P(y = 1) that maximises sum w log(q / training p + (1 - q) / (1 - training)
    (1 - p)), the likelihood of probabilities computed under the ``training`` prior when
    the traffic's is q (each row counting ``weights`` times, 1 by default)."""
    w = np.ones_like(p) if weights is None else weights

    def minus_log_likelihood(q: float) -> float:
        return -float(w @ np.log(q / training * p + (1 - q) / (1 - training) * (1 - p)))

    found = minimize_scalar(
        minus_log_likelihood, bounds=(1e-9, 1 - 1e-9), method="bounded", options={"xatol": 1e-9}
    )
    return float(found.x)


def bbse_prior(
    p_source: FloatArray, labels_source: FloatArray, p_target: FloatArray, threshold: float = 0.5
) -> float | None:
    """Black-box shift estimation (Lipton, Wang & Smola 2018, section 4): with C the joint
    distribution of (hard prediction, label) on labelled source data and mu the hard
    predictions' shares on the target, the weights w = C^-1 mu are q_y / p_y, so the target's
    P(y = 1) is w_1 times the source's; clipped to [0, 1]. Hard predictions are p > ``threshold``
    (the argmax at 0.5). None when C is singular (no predicted positive, say)."""
    decided, positive = p_source > threshold, labels_source == 1
    joint = np.array(
        [
            [np.mean(~decided & ~positive), np.mean(~decided & positive)],
            [np.mean(decided & ~positive), np.mean(decided & positive)],
        ]
    )
    shares = np.array([np.mean(p_target <= threshold), np.mean(p_target > threshold)])
    if abs(float(np.linalg.det(joint))) < 1e-12:
        return None
    weights = np.linalg.solve(joint, shares)
    return float(np.clip(weights[1] * positive.mean(), 0.0, 1.0))
