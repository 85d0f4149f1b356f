"""Calibration measures beyond the binned ECE: the clinicians' slope, intercept and z-test, and
the debiased L2 calibration error.

- Calibration slope and intercept (Cox 1958; Van Calster et al. 2019, "Calibration: the
  Achilles heel of predictive analytics"): the slope b of the logistic regression
  logit P(y = 1) = a + b logit(p), 1 for calibrated probabilities, below 1 for predictions
  too extreme; the intercept ("calibration-in-the-large") alpha of
  logit P(y = 1) = alpha + logit(p), logit(p) an offset: 0 when the mean prediction is right.
- Spiegelhalter's z (1986): z = sum (y - p)(1 - 2p) / sqrt(sum (1 - 2p)^2 p (1 - p)), standard
  normal for calibrated p; its two-sided p-value.
- The debiased L2 calibration error (Kumar, Liang & Ma, *Verified Uncertainty Calibration*,
  NeurIPS 2019, section 5): on bins of equal mass, sum_b (n_b / n) [(mean p - mean y)^2 -
  mean y (1 - mean y) / (n_b - 1)], whose plug-in square is biased up by the labels' variance;
  its square root, 0 when the corrected sum is negative.

Weights are frequency weights where a measure takes them (an integer weight counts as that
many copies of its row). Probabilities are clipped to [1e-15, 1 - 1e-15] first, as for the
log loss, so that their logits are finite (Spiegelhalter's closed form needs no clip). Nothing
here loops over samples.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import expit, logit, ndtr

from app.calibration.base import FloatArray
from app.calibration.kernels.newton import fit_logistic
from app.calibration.kernels.weights import relative_blocks, row_blocks

EPS = 1e-15
"""Probabilities are clipped to [EPS, 1 - EPS] before their logits are taken."""
MAX_ITER = 100


class Line(NamedTuple):
    """The calibration line logit P(y = 1) = intercept + slope logit(p)."""

    slope: float
    intercept: float


class SpiegelhalterTest(NamedTuple):
    z: float
    p_value: float


def calibration_slope(p: FloatArray, y: FloatArray, w: FloatArray | None = None) -> float | None:
    """b of logit P(y = 1) = a + b logit(p), by weighted maximum likelihood (Newton's method,
    :mod:`app.calibration.kernels.newton`); None where no finite maximum exists: one class, one
    logit, or classes that the logits separate (Newton then runs out of steps)."""
    line = calibration_line(p, y, w)
    return None if line is None else line.slope


def calibration_line(p: FloatArray, y: FloatArray, w: FloatArray | None = None) -> Line | None:
    """The fitted line logit P(y = 1) = a + b logit(p) of :func:`calibration_slope` (b, a)."""
    z, y, w = _logits(p, y, w)
    if not _two_classes(y, w) or _separated(z, y, w):
        return None
    fit = fit_logistic([z], w, w * y, np.array([1.0, 0.0]), max_iter=MAX_ITER)
    if fit.n_iter >= MAX_ITER:
        return None
    return Line(float(fit.theta[0]), float(fit.theta[1]))


def calibration_intercept(
    p: FloatArray, y: FloatArray, w: FloatArray | None = None
) -> float | None:
    """alpha of logit P(y = 1) = alpha + logit(p) with logit(p) an offset: the root of the
    score sum w (expit(alpha + logit p) - y), increasing in alpha; None for one class.

    Newton's method from 0, each step one pass over the rows for the score and its
    derivative sum w mu (1 - mu) together, a step that would leave the bracket the signs of
    the scores so far give becoming a bisection of it (or a doubling while it is open): 4-6
    passes where Brent's method without the derivative took ~10."""
    z, y, w = _logits(p, y, w)
    if not _two_classes(y, w):
        return None
    observed = float(np.dot(w, y))

    def score(alpha: float) -> tuple[float, float]:
        value = slope = 0.0
        for rows in row_blocks(z.size):  # a loop over blocks of rows
            mu = expit(alpha + z[rows])
            value += float(np.dot(w[rows], mu))
            mu *= 1.0 - mu
            slope += float(np.dot(w[rows], mu))
        return value - observed, slope

    alpha, low, high = 0.0, -math.inf, math.inf
    for _ in range(MAX_ITER):  # a loop over Newton steps, not samples
        value, slope = score(alpha)
        if value == 0.0:
            return alpha
        if value > 0.0:
            high = alpha
        else:
            low = alpha
        step = alpha - value / slope if slope > 0.0 else math.nan
        if not low < step < high:  # outside the bracket, or no slope: bisect, or widen
            if math.isinf(low) or math.isinf(high):
                step = alpha + math.copysign(max(1.0, 2.0 * abs(alpha)), -value)
            else:
                step = 0.5 * (low + high)
        if abs(step - alpha) <= 1e-14 * max(1.0, abs(alpha)):  # brentq's xtol before
            return step
        alpha = step
    return alpha


def spiegelhalter(
    p: FloatArray, y: FloatArray, w: FloatArray | None = None
) -> SpiegelhalterTest | None:
    """Spiegelhalter's z and its two-sided p-value; None when its variance is 0 (every p is
    0, 1/2 or 1). Weighted, z = sum w (y - p)(1 - 2p) / sqrt(sum w^2 (1 - 2p)^2 p (1 - p)),
    the variance of the weighted sum: the textbook z for equal weights, and unchanged by the
    weights' unit, as every measure of a report is (sample weights are relative)."""
    q = np.asarray(p, dtype=np.float64)  # no clip: the closed form is finite at 0 and 1
    labels = np.asarray(y, dtype=np.float64)
    weights = np.broadcast_to(1.0, q.shape) if w is None else np.asarray(w, dtype=np.float64)
    variance = score = 0.0
    for rows, wb in relative_blocks(weights):  # z is the same for the weights' powers of two
        qb = q[rows]
        spread = 1.0 - 2.0 * qb
        variance += float(np.dot(wb * wb, spread * spread * qb * (1.0 - qb)))
        score += float(np.dot(wb, (labels[rows] - qb) * spread))
    if not variance > 0.0:
        return None
    z = score / math.sqrt(variance)
    return SpiegelhalterTest(z, float(2.0 * ndtr(-abs(z))))  # norm.sf(|z|) = ndtr(-|z|)


def ece_debiased(p: FloatArray, y: FloatArray, n_bins: int = 15) -> float:
    """Kumar et al.'s debiased L2 calibration error on ``n_bins`` bins of equal mass (fewer
    when scores tie): the bins' edges are the midpoints between the last score of one
    ``np.array_split`` part of the sorted scores and the first of the next, a score going to
    the first bin whose edge is >= it; a bin of one score contributes 0."""
    q = np.asarray(p, dtype=np.float64)
    labels = np.asarray(y, dtype=np.float64)
    # the parts' ends and starts are order statistics: a partition at them, not a sort
    # (0.15 s against 0.45 s on 6 x 10^6 rows); the parts are np.array_split's
    k = min(n_bins, q.size)
    sizes = np.full(k, q.size // k)
    sizes[: q.size % k] += 1
    firsts = np.cumsum(sizes)[:-1]  # the first score of every part but the first
    ranked = np.partition(q, np.concatenate((firsts - 1, firsts))) if firsts.size else q
    ends, starts = ranked[firsts - 1], ranked[firsts]
    edges = np.unique(np.append((ends + starts) / 2.0, 1.0))
    index = np.searchsorted(edges, q, side="left")
    count = np.bincount(index, minlength=edges.size).astype(np.float64)
    mean_p = np.bincount(index, q, minlength=edges.size) / np.maximum(count, 1.0)
    mean_y = np.bincount(index, labels, minlength=edges.size) / np.maximum(count, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        corrected = (mean_p - mean_y) ** 2 - mean_y * (1.0 - mean_y) / (count - 1.0)
    corrected[count < 2] = 0.0
    return math.sqrt(max(float(np.dot(count / q.size, corrected)), 0.0))


def _logits(
    p: FloatArray, y: FloatArray, w: FloatArray | None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    z = np.clip(np.asarray(p, dtype=np.float64), EPS, 1.0 - EPS)
    logit(z, out=z)  # in place: one batch-sized array
    labels = np.asarray(y, dtype=np.float64)
    weights = np.broadcast_to(1.0, z.shape) if w is None else np.asarray(w, dtype=np.float64)
    return z, labels, weights


def _separated(z: FloatArray, y: FloatArray, w: FloatArray) -> bool:
    """Whether the logits (of rows with weight) put every positive above every negative or
    below, ties included: then the likelihood grows without bound as the slope does. One
    distinct logit separates nothing but has no slope either."""
    counted = w > 0
    positive, negative = z[counted & (y > 0)], z[counted & (y == 0)]
    if np.ptp(z[counted]) == 0.0:
        return True
    return bool(positive.min() >= negative.max() or positive.max() <= negative.min())


def _two_classes(y: FloatArray, w: FloatArray) -> bool:
    """Whether rows of positive weight hold both labels: read from the rows, not from
    comparing sums (the positives' dot product with the weights can round below the weights'
    sum when every negative weighs 0, and the slope then failed on no negatives at all)."""
    counted = w > 0
    return bool(np.any(counted & (y > 0)) and np.any(counted & (y == 0)))
