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
- built from a binary version's rollup (:meth:`CalibrationSums.of_rollup`,
  :class:`~app.calibration.BinaryRollup`): the same sums, merged from its cells and fine bins.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from app.calibration import (
    BOOTSTRAP_SEED,
    CELL_LOWER,
    CELL_UPPER,
    FINE_BINS,
    ROLLUP_PREDICTED,
    BinaryRollup,
    FloatArray,
    calibration_error_interval,
    percentile_interval,
)

MIN_INTERVAL_ROWS = 30
"""Labelled predictions a window needs for intervals: the Gaussian draws stand for the
bootstrap's sums by the central limit theorem, which a handful of rows does not reach."""
TERMS = 4
"""The per-row terms whose sums make a window's measures: 1, p - y, loss, Brier."""


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

    @classmethod
    def of_rollup(cls, rollup: BinaryRollup, n_bins: int) -> CalibrationSums | None:
        """The sums of a binary rollup's labelled predictions (None: it has none), its cells
        and fine bins put in the ``n_bins`` reliability bins: a cell, or a fine bin, goes to
        the bin its middle lies in. When ``n_bins`` divides :data:`~app.calibration.FINE_BINS`
        that is where all its rows lie, and the ECE is the rows' own, to rounding; otherwise a
        cell's labelled rows are taken at its predictions' mean p, and the bins that cross a
        cell are off by at most its rows."""
        counts = (rollup.positives + rollup.negatives).astype(np.float64)
        if not counts.any():
            return None
        sums = cls(n_bins)
        which = np.searchsorted(sums.inner, (CELL_LOWER + CELL_UPPER) / 2)
        fine = _fine_bins(sums.inner)
        positives = rollup.positives.astype(np.float64)
        columns = [
            np.bincount(fine, c, minlength=n_bins).astype(np.float64) for c in rollup.moments.T
        ]
        loss, brier, predicted, dd, dl, db, ll, lb, bb, spread = columns
        if FINE_BINS % n_bins:
            means = rollup.sums / np.maximum(rollup.counts, 1)
            predicted = np.bincount(which, counts * means, minlength=n_bins).astype(np.float64)
        sums.n = int(counts.sum())
        sums.predicted = float(rollup.moments[:, ROLLUP_PREDICTED].sum())
        sums.observed = float(positives.sum())
        sums.loss, sums.brier = float(loss.sum()), float(brier.sum())
        sums.bins[0] = np.bincount(which, counts, minlength=n_bins)
        sums.bins[1] = predicted
        sums.bins[2] = np.bincount(which, positives, minlength=n_bins)
        first = (sums.bins[0], predicted - sums.bins[2], loss, brier)
        for j in range(TERMS):
            sums.moments[:, 0, j] = sums.moments[:, j, 0] = first[j]
        pairs = {(1, 1): dd, (1, 2): dl, (1, 3): db, (2, 2): ll, (2, 3): lb, (3, 3): bb}
        for (j, k), values in pairs.items():
            sums.moments[:, j, k] = sums.moments[:, k, j] = values
        sums.spread = spread
        return sums

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
            # A stored hour keeps the second moments in float32, so a bin's may miss being
            # positive semi-definite by rounding: eigh's factor takes |eigenvalue|, which
            # moves the draws by as little.
            draws[:, b] = rng.multivariate_normal(
                means[b], covariance[b], size=resamples, method="eigh", check_valid="ignore"
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


def _fine_bins(inner: FloatArray) -> NDArray[np.intp]:
    """The reliability bin (of ``inner`` edges) each fine bin's middle lies in."""
    return np.searchsorted(inner, (np.arange(FINE_BINS) + 0.5) / FINE_BINS)
