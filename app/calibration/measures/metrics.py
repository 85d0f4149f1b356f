"""How good are the probabilities: the headline measures of a batch, and the diagnostics.

The yardsticks of Niculescu-Mizil & Caruana, *Predicting Good Probabilities With Supervised
Learning* (squared error, log loss, 10-bin reliability diagrams). Every measure takes optional
sample weights (``w=None`` means all ones) and uses them as weights throughout, as relative
weights (:func:`~app.calibration.kernels.weights.relative_weights`): a measure is the same for
weights times any constant, and subnormal or huge weights neither lose digits nor overflow.

This module holds the Brier score and log loss, the measures read from a reliability diagram
(ECE, MCE, Murphy's decomposition) and the two entry points, :func:`summarize` and
:func:`headline_metrics`; the AUC is :mod:`~app.calibration.measures.auc`'s, the diagram
:mod:`~app.calibration.measures.reliability`'s. A stored batch can hold 10^7 rows, so every measure
works through it :data:`~app.calibration.kernels.weights.BLOCK` rows at a time. A weighted mean is a
sum of blocks, each summed pairwise (no BLAS dot: its threads cost more than a block's work), which
rounds differently from one dot product over all rows, by a few 1e-16 relative, nearer the
exact sum.
"""

from __future__ import annotations

import math

import numpy as np

from app.calibration.base import CalibrationError, FloatArray, JSONValue
from app.calibration.kernels.checks import check_probabilities
from app.calibration.kernels.weights import blockwise_mean, weighted_mean
from app.calibration.measures.auc import roc_auc_checked
from app.calibration.measures.reliability import (
    Bins,
    bin_table,
    check_bin_settings,
)
from app.calibration.measures.report import Report


def brier_score(p: FloatArray, y: FloatArray, w: FloatArray | None = None) -> float:
    """The weighted mean of (p - y)^2."""
    return _brier_score(*check_probabilities(p, y, w))


def log_loss(
    p: FloatArray, y: FloatArray, w: FloatArray | None = None, eps: float = 1e-15
) -> float:
    """-weighted mean of y log p + (1 - y) log(1 - p), with p clipped to [eps, 1 - eps].

    The clipping keeps the loss finite (*Obtaining Calibrated Probabilities from Boosting*).
    """
    return _log_loss(*check_probabilities(p, y, w), eps)


def expected_calibration_error(bins: Bins) -> float:
    """ECE = sum over bins of (bin weight / total weight) |fraction_positive - mean_predicted|."""
    share, gap, _, _ = _bin_arrays(bins)
    return float(share @ gap)


def maximum_calibration_error(bins: Bins) -> float:
    """MCE = the largest |fraction_positive - mean_predicted| over the bins with weight."""
    _, gap, _, _ = _bin_arrays(bins)
    return float(gap.max())


def murphy_decomposition(bins: Bins, base_rate: float) -> tuple[float, float, float]:
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
    with_bin_free: bool = True,
) -> Report:
    """The reliability bins and binned measures of a batch (no intervals: see
    :func:`app.calibration.measures.diagnostics.reliability_reports`), and ``with_bin_free``
    the measures the bins do not change: the Brier score, log loss and AUC."""
    p, y, w = check_probabilities(p, y, w)
    check_bin_settings(n_bins, strategy)
    bins = bin_table(p, y, w, n_bins, strategy)
    reliability, resolution, uncertainty = murphy_decomposition(bins, weighted_mean(y, w))
    metrics: dict[str, float | None] = {}
    if with_bin_free:
        metrics["brier"] = _brier_score(p, y, w)
        metrics["log_loss"] = _log_loss(p, y, w)
    metrics["ece"] = expected_calibration_error(bins)
    metrics["mce"] = maximum_calibration_error(bins)
    if with_bin_free:
        metrics["auc"] = roc_auc_checked(p, y != 0.0, w)
    metrics.update(reliability=reliability, resolution=resolution, uncertainty=uncertainty)
    return Report(bins, metrics)


def headline_metrics(
    p: FloatArray, y: FloatArray, w: FloatArray | None = None
) -> dict[str, JSONValue]:
    """``{"brier", "log_loss", "ece", "auc"}`` (ECE over 10 uniform bins), stored with a version."""
    p, y, w = check_probabilities(p, y, w)
    return {
        "brier": _brier_score(p, y, w),
        "log_loss": _log_loss(p, y, w),
        "ece": expected_calibration_error(bin_table(p, y, w, 10, "uniform")),
        "auc": roc_auc_checked(p, y != 0.0, w),
    }


def _brier_score(p: FloatArray, y: FloatArray, w: FloatArray) -> float:
    return blockwise_mean(lambda block: squared_errors(p[block], y[block]), w)


def squared_errors(p: FloatArray, y: FloatArray) -> FloatArray:
    """Each row's (p - y)^2: the terms :func:`brier_score` averages."""
    errors: FloatArray = (p - y) ** 2
    return errors


def _log_loss(p: FloatArray, y: FloatArray, w: FloatArray, eps: float = 1e-15) -> float:
    return blockwise_mean(lambda block: log_losses(p[block], y[block], eps), w)


def log_losses(p: FloatArray, y: FloatArray, eps: float = 1e-15) -> FloatArray:
    """Each row's -(y log q + (1 - y) log(1 - q)), q = p clipped to [eps, 1 - eps]: the terms
    :func:`log_loss` averages (and a sum over chunks of rows adds up)."""
    q = np.clip(p, eps, 1.0 - eps)
    terms: FloatArray = y * np.log(q) + (1.0 - y) * np.log1p(-q)
    return np.negative(terms, out=terms)


def _bin_arrays(bins: Bins) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(weight share, |frac - mean|, mean, frac) of the bins that hold weight."""
    filled = bins.filled
    if not filled.any():
        raise CalibrationError("no bin holds any weight")
    share = bins.share[filled]
    mean, frac = bins.mean_predicted[filled], bins.fraction_positive[filled]
    return share / share.sum(), np.abs(frac - mean), mean, frac
