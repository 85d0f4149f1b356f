"""How good are the probabilities: Brier score, log loss, AUC, reliability bins, ECE, Murphy.

The yardsticks of Niculescu-Mizil & Caruana, *Predicting Good Probabilities With Supervised
Learning* (squared error, log loss, 10-bin reliability diagrams). Every measure takes optional
sample weights (``w=None`` means all ones) and uses them as weights throughout.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from app.calibration.base import CalibrationError, FloatArray, JSONValue, check_batch
from app.calibration.pooling import pool_ties

STRATEGIES = ("uniform", "quantile")
WILSON_Z = 1.959963984540054  # the 0.975 quantile of the standard normal: a 95% interval


@dataclass(frozen=True)
class ReliabilityBin:
    """One bin of a reliability diagram; the statistics are ``None`` when it has no weight.

    ``count`` is the number of points, ``weight`` their summed sample weight (= count when
    unweighted); the mean, the fraction of positives and its 95% Wilson interval are weighted.
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
    p, y, w = _probabilities(p, y, w)
    return float(w @ (p - y) ** 2 / w.sum())


def log_loss(
    p: FloatArray, y: FloatArray, w: FloatArray | None = None, eps: float = 1e-15
) -> float:
    """-weighted mean of y log p + (1 - y) log(1 - p), with p clipped to [eps, 1 - eps].

    The clipping keeps the loss finite (*Obtaining Calibrated Probabilities from Boosting*).
    """
    p, y, w = _probabilities(p, y, w)
    p = np.clip(p, eps, 1.0 - eps)
    return float(-(w @ (y * np.log(p) + (1.0 - y) * np.log1p(-p))) / w.sum())


def roc_auc(scores: FloatArray, y: FloatArray, w: FloatArray | None = None) -> float | None:
    """Weighted area under the ROC curve, ties counted half; ``None`` with a single class.

    Equals the probability that a random positive outscores a random negative (the
    Mann-Whitney statistic): each distinct score's positive weight times the negative weight
    below it plus half the negative weight tied with it. O(n log n), one sort.
    """
    # the distinct scores with their weight and positive weight: pool_ties's sort (per class
    # for equal weights, a linear pass for sorted scores) is cheaper than np.unique's
    _, weight, pos = pool_ties(*check_batch(scores, y, w))
    neg = weight - pos
    total = float(pos.sum()) * float(neg.sum())
    if total == 0.0:
        return None
    neg_below = np.cumsum(neg) - neg
    return float(pos @ (neg_below + 0.5 * neg) / total)


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
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or not 2 <= n_bins <= 100:
        raise CalibrationError(f"n_bins: must be an integer in 2..100, not {n_bins!r}")
    if strategy not in STRATEGIES:
        raise CalibrationError(
            f"strategy: must be one of {', '.join(STRATEGIES)}, not {strategy!r}"
        )
    p, y, w = _probabilities(p, y, w)
    if strategy == "uniform":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    else:
        # scikit-learn's calibration_curve: linspace(0, 1) * 100, not linspace(0, 100), whose
        # rounding differs at some n_bins and moves an edge that falls on a data point
        edges = np.percentile(p, np.linspace(0.0, 1.0, n_bins + 1) * 100)
    index = np.searchsorted(edges[1:-1], p)
    count = np.bincount(index, minlength=n_bins)
    weight = np.bincount(index, weights=w, minlength=n_bins)
    filled = weight > 0
    share = np.where(filled, weight, 1.0)
    mean = np.bincount(index, weights=w * p, minlength=n_bins) / share
    frac = np.bincount(index, weights=w * y, minlength=n_bins) / share
    if bool(np.all(w == w[0])):
        n_eff = count.astype(np.float64)  # equal weights: Kish's size is the count
    else:
        # Kish's effective size (sum w)^2 / sum w^2, on weights divided by their bin's largest
        # so that tiny or huge weights can neither underflow nor overflow when squared.
        largest = np.zeros(n_bins)
        np.maximum.at(largest, index, w)
        r = w / np.where(largest > 0, largest, 1.0)[index]
        r_sum = np.bincount(index, weights=r, minlength=n_bins)
        r_sq = np.bincount(index, weights=r * r, minlength=n_bins)
        n_eff = r_sum**2 / np.where(filled, r_sq, 1.0)
    low, high = wilson_interval(frac, np.where(filled, n_eff, 1.0))
    rows = zip(edges[:-1], edges[1:], count, weight, filled, mean, frac, low, high, strict=True)
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
    if f.size == 0 or (f.min() >= 0.0 and f.max() <= 1.0):
        return f
    u = np.ldexp(f, -math.frexp(float(np.abs(f).max()))[1])
    low, high = float(u.min()), float(u.max())
    if high == low:
        return np.full_like(f, 0.5)
    scaled: FloatArray = np.clip((u - low) / (high - low), 0.0, 1.0)
    return scaled


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
    bins = reliability_bins(p, y, n_bins, strategy, w)
    reliability, resolution, uncertainty = murphy_decomposition(bins, float(w @ y / w.sum()))
    return {
        "bins": [row.as_dict() for row in bins],
        "metrics": {
            "brier": brier_score(p, y, w),
            "log_loss": log_loss(p, y, w),
            "ece": expected_calibration_error(bins),
            "mce": maximum_calibration_error(bins),
            "auc": roc_auc(p, y, w),
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
        "brier": brier_score(p, y, w),
        "log_loss": log_loss(p, y, w),
        "ece": expected_calibration_error(reliability_bins(p, y, 10, "uniform", w)),
        "auc": roc_auc(p, y, w),
    }


def _probabilities(
    p: FloatArray, y: FloatArray, w: FloatArray | None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    p, y, w = check_batch(p, y, w, scores_field="probabilities")
    if p.min() < 0.0 or p.max() > 1.0:
        raise CalibrationError("probabilities: must lie in [0, 1]")
    return p, y, w


def _bin_arrays(
    bins: list[ReliabilityBin],
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(weight share, |frac - mean|, mean, frac) of the bins that hold weight."""
    filled = [b for b in bins if b.mean_predicted is not None and b.fraction_positive is not None]
    if not filled:
        raise CalibrationError("bins: no bin holds any weight")
    weight = np.array([b.weight for b in filled])
    mean = np.array([b.mean_predicted for b in filled], dtype=np.float64)
    frac = np.array([b.fraction_positive for b in filled], dtype=np.float64)
    return weight / weight.sum(), np.abs(frac - mean), mean, frac
