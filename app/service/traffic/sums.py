"""The sums monitoring keeps per window and version, added to a chunk of rows at a time.

Each number is a sum over rows divided by a count, or (KS) a sup over counts that add up, so
a window's traffic never has to be held whole: :class:`app.service.traffic.monitoring.Monitor` feeds
these chunk by chunk and reads their results once the window has been read.

- :class:`CalibrationSums`: the mean predicted probability against the observed rate, log
  loss, Brier score and the binned ECE of the labelled predictions, as
  :func:`app.calibration.measures.metrics.summarize` defines them (binary), or their top-label
  readings (k-class: :func:`app.calibration.measures.multiclass_metrics.top_label`);
  with 95% intervals on the log loss, Brier score and ECE from second moments per bin
  (:meth:`CalibrationSums.intervals`);
- :class:`ShiftSums`: the population stability index over the fitting batch's deciles and the
  two-sample Kolmogorov-Smirnov statistic of the raw scores against the batch
  (:class:`Reference`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from app.calibration import (
    BOOTSTRAP_SEED,
    FloatArray,
    calibration_error_interval,
    percentile_interval,
)

MIN_INTERVAL_ROWS = 30
"""Labelled predictions a window needs for intervals: the Gaussian draws stand for the
bootstrap's sums by the central limit theorem, which a handful of rows does not reach."""
TERMS = 4
"""The per-row terms whose sums make a window's measures: 1, p - y, loss, Brier."""
PSI_BINS = 10
PSI_FLOOR = 1e-4
"""Bin shares are floored at this before the logarithm (an empty bin would be infinite)."""


class Reference:
    """A version's fitting scores (at least one), prepared for the shift measures, with their
    weights if the batch has unequal ones (a weighted fit, or an adjusted version's batch,
    whose weights give it the new class shares: its scores are then compared with the score
    mix the new priors imply).

    - PSI: the inner edges of the batch's deciles (:data:`PSI_BINS` bins, fewer when ties
      merge them; weighted: the inverted-CDF quantiles of the weights) and the batch's share
      in each, floored at :data:`PSI_FLOOR`;
    - KS: the batch's distinct scores u_0 < … < u_{m-1} and its distribution function at
      each. A traffic score falls in one of 2m + 1 slots: below u_0, at u_j, between u_j
      and u_{j+1}, or above u_{m-1}. Both distribution functions are constant on a slot, and
      one pass over the slots' counts gives sup |F_batch - F_traffic| exactly (the sup over
      every value either sample takes, as the two-sample statistic is defined), from counts
      that add up chunk by chunk.
    """

    def __init__(self, scores: FloatArray, weights: FloatArray | None = None) -> None:
        levels = np.arange(1, PSI_BINS) / PSI_BINS  # i / 10 rounded once, as the deciles are
        if weights is not None and np.all(weights == weights[0]):
            weights = None  # equal weights: the plain batch
        shares: FloatArray
        if weights is None:
            self.inner = np.unique(np.quantile(scores, levels))
            shares = self.psi_counts(scores) / scores.size
        else:
            w = weights / weights.sum()
            self.inner = np.unique(np.quantile(scores, levels, weights=w, method="inverted_cdf"))
            which = np.searchsorted(self.inner, scores, side="right")
            shares = np.bincount(which, w, minlength=self.inner.size + 1).astype(np.float64)
        self.expected = np.maximum(shares, PSI_FLOOR)
        self.values, inverse = np.unique(scores, return_inverse=True)
        mass = np.bincount(inverse, None if weights is None else weights, self.values.size)
        at_or_below = np.cumsum(mass) / mass.sum()
        # F_batch on the slots: 0 below u_0, then F(u_j) at u_j and up to u_{j+1}
        self.slot_cdf = np.concatenate([[0.0], np.repeat(at_or_below, 2)])

    def psi_counts(self, scores: FloatArray) -> NDArray[np.int64]:
        """How many of ``scores`` fall in each PSI bin."""
        bins = np.searchsorted(self.inner, scores, side="right")
        return np.bincount(bins, minlength=self.inner.size + 1)

    def slot_counts(self, scores: FloatArray) -> NDArray[np.int64]:
        """How many of ``scores`` fall in each KS slot: 2j below u_j (above u_{j-1}), 2j + 1
        at u_j."""
        below = np.searchsorted(self.values, scores)
        at = np.zeros(scores.size, dtype=bool)
        inside = below < self.values.size
        at[inside] = self.values[below[inside]] == scores[inside]
        return np.bincount(2 * below + at, minlength=self.slot_cdf.size)


class CalibrationSums:
    """Sums over labelled predictions: the count, the predicted and observed sums, the
    losses, and the reliability bins' (uniform, ``n_bins``). Binary rows add p and y;
    k-class rows their top-label confidence and correctness.

    For the intervals, each bin also keeps the second moments of its rows' terms
    x = (1, p - y, loss, Brier) and the sum of p (1 - p): :meth:`intervals`."""

    def __init__(self, n_bins: int) -> None:
        self.inner = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
        self.n = 0
        self.predicted = self.observed = self.loss = self.brier = 0.0
        self.bins = np.zeros((3, n_bins))  # count, sum predicted, sum observed
        self.moments = np.zeros((n_bins, TERMS, TERMS))  # sum x x^T per bin (x[0] = 1)
        self.spread = np.zeros(n_bins)  # sum p (1 - p) per bin

    def add(
        self, predicted: FloatArray, observed: FloatArray, loss: FloatArray, brier: FloatArray
    ) -> None:
        """Rows' predicted probabilities, outcomes (0 or 1), and their loss and Brier terms."""
        self.n += predicted.size
        self.predicted += float(predicted.sum())
        self.observed += float(observed.sum())
        self.loss += float(loss.sum())
        self.brier += float(brier.sum())
        which = np.searchsorted(self.inner, predicted)  # the bins of reliability_bins
        size = self.spread.size
        for sums, values in zip(self.bins, (None, predicted, observed), strict=True):
            sums += np.bincount(which, values, minlength=size)
        terms = (np.ones_like(predicted), predicted - observed, loss, brier)
        for j in range(TERMS):  # a loop over the ten pairs of terms, not over rows
            for k in range(j, TERMS):
                summed = np.bincount(which, terms[j] * terms[k], minlength=size)
                self.moments[:, j, k] += summed
                if k != j:
                    self.moments[:, k, j] += summed
        self.spread += np.bincount(which, predicted * (1.0 - predicted), minlength=size)

    def result(self) -> dict[str, float]:
        """mean_predicted, observed_rate, log_loss, brier and ece: the ECE is sum over bins of
        (count / n) |mean observed - mean predicted|
        (:func:`~app.calibration.measures.metrics.expected_calibration_error`)."""
        count, predicted, observed = self.bins
        filled = count > 0
        gaps = np.abs(observed[filled] - predicted[filled]) / count[filled]
        return {
            "mean_predicted": self.predicted / self.n,
            "observed_rate": self.observed / self.n,
            "log_loss": self.loss / self.n,
            "brier": self.brier / self.n,
            "ece": float(count[filled] / self.n @ gaps),
        }

    def intervals(
        self, resamples: int, seed: int = BOOTSTRAP_SEED
    ) -> dict[str, tuple[float, float]]:
        """95% intervals of the log loss, Brier score and ECE from ``resamples`` draws (0:
        none), in time that does not grow with the traffic.

        A Poisson bootstrap resample's sums over a bin, T = sum c_i x_i with independent
        c_i ~ Poisson(1), have mean sum x_i and covariance sum x_i x_i^T, the bins being
        independent; here each bin's T is drawn from the Gaussian with that mean and
        covariance (the bootstrap's own first two moments; the central limit theorem over
        the bin's rows), and each draw gives the measures as the sums give them. The ECE's
        interval is :func:`~app.calibration.measures.bootstrap.calibration_error_interval`, its
        consistency draws the bins' sum of p - y* for labels y* ~ Bernoulli(p): mean 0,
        variance sum p (1 - p)."""
        if resamples == 0 or self.n < MIN_INTERVAL_ROWS:
            return {}
        rng = np.random.default_rng(seed)
        means, covariance = self.moments[:, :, 0], self.moments  # sum x = sum x x[0]
        draws = np.empty((resamples, self.spread.size, TERMS))
        for b in range(self.spread.size):  # a loop over bins: a Gaussian of four terms each
            draws[:, b] = rng.multivariate_normal(
                means[b], covariance[b], size=resamples, method="eigh"
            )
        count = np.maximum(draws[:, :, 0].sum(axis=1), 1e-300)
        values = {
            "log_loss": draws[:, :, 2].sum(axis=1) / count,
            "brier": draws[:, :, 3].sum(axis=1) / count,
            "ece": np.abs(draws[:, :, 1]).sum(axis=1) / count,
        }
        consistent = np.abs(rng.normal(size=(resamples, self.spread.size)) * np.sqrt(self.spread))
        point = self.result()
        found: dict[str, tuple[float, float]] = {}
        for name in ("log_loss", "brier"):
            interval = percentile_interval(values[name])
            if interval is not None:  # the Gaussian's draws may reach below 0: neither can
                found[name] = (max(interval[0], 0.0), interval[1])
        null = consistent.sum(axis=1) / self.n
        ece = calibration_error_interval(point["ece"], values["ece"], null)
        if ece is not None:
            found["ece"] = ece
        return found


class ShiftSums:
    """Raw scores of one binary version against its fitting batch: PSI and KS from counts
    (:class:`Reference`)."""

    def __init__(self, reference: Reference) -> None:
        self.reference = reference
        self.n = 0
        self.psi_counts = np.zeros(reference.inner.size + 1, dtype=np.int64)
        self.slot_counts = np.zeros(reference.slot_cdf.size, dtype=np.int64)

    def add(self, scores: FloatArray) -> None:
        self.n += scores.size
        self.psi_counts += self.reference.psi_counts(scores)
        self.slot_counts += self.reference.slot_counts(scores)

    def result(self) -> dict[str, float]:
        """psi: sum over the bins of (a - e) ln(a / e), the shares a (traffic) and e (batch)
        floored at :data:`PSI_FLOOR`; ks: sup |F_batch - F_traffic|."""
        a = np.maximum(self.psi_counts / self.n, PSI_FLOOR)
        e = self.reference.expected
        traffic = np.cumsum(self.slot_counts) / self.n
        return {
            "psi": float(np.sum((a - e) * np.log(a / e))),
            "ks": float(np.max(np.abs(traffic - self.reference.slot_cdf))),
        }
