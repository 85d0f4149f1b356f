"""A window's calibration figures from the sums its rollup keeps.

Each number is a sum over rows divided by a count, so a window's traffic never has to be
held whole: :class:`app.service.traffic.monitoring.Monitor` sums its stored hours and rows into
a rollup, and reads these from it once the window has been read.

- :class:`CalibrationSums`: the mean predicted probability against the observed rate, log
  loss, Brier score and the binned ECE of the labelled predictions, as
  :func:`app.calibration.measures.metrics.summarize` defines them (binary), or their top-label
  readings (k-class: :func:`app.calibration.measures.multiclass_metrics.top_label`);
  with 95% intervals on the log loss, Brier score and ECE from second moments per bin
  (:meth:`CalibrationSums.intervals`);
- built from a rollup (:meth:`CalibrationSums.of_rollup`: a binary version's
  :class:`~app.calibration.BinaryRollup`, or a k-class version's top label, the ``top`` of its
  :class:`~app.calibration.ClassRollup`): the same sums, merged from its cells and fine bins.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from app.calibration import (
    BOOTSTRAP_SEED,
    CELL_FINE,
    CELL_UPPER,
    FINE_UPPER,
    PROBABILITY_EPS,
    ROLLUP_PREDICTED,
    UNIFORM_BINS,
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
RANK_FLOOR = 1e-6
"""A bin covariance's eigenvalues below this share of its largest count as 0 in the
intervals' draws (float32 sums are good to about 6e-8 of it)."""
KEPT_NORMALS = 1 << 20
"""The most standard normal draws of one size the intervals keep between windows: 8 MB, four
sizes at most, so 32 MB a process (the default 1,000 resamples of 10 bins take 50,000)."""


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
        """The sums of a binary rollup's labelled predictions (None: it has none), in the
        ``n_bins`` reliability bins.

        When ``n_bins`` divides :data:`~app.calibration.UNIFORM_BINS`, each bin is a union of
        fine bins and of cells, and every sum is the rows' own (to rounding). Otherwise a
        cell (lo, hi] goes to the bin that holds hi, its labelled rows taken at its
        predictions' mean p: the bins an edge crosses are off by at most that cell's rows, and the
        intervals' moments are those of the cells' two points (positives and negatives at
        that mean), which keeps each bin's matrix a sum of x x^T as the rows' is."""
        counts = (rollup.positives + rollup.negatives).astype(np.float64)
        if not counts.any():
            return None
        sums = cls(n_bins)
        positives = rollup.positives.astype(np.float64)
        sums.n = int(counts.sum())
        sums.predicted = float(rollup.moments[:, ROLLUP_PREDICTED].sum())
        sums.observed = float(positives.sum())
        sums.loss, sums.brier = rollup.loss, rollup.brier
        if UNIFORM_BINS % n_bins == 0:
            _fine_sums(sums, rollup)
        else:
            _cell_sums(sums, rollup)
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
        z, normal = _standard_normals(seed, resamples, self.spread.size)
        bins = self.spread.size
        means = self.moments[:, :, 0]  # sum x = sum x x[0]
        # Each bin's Gaussian of four terms: mean + factor z, the factor the covariance's
        # symmetric square root V sqrt(L) V^T. It is continuous in the moments, where
        # V sqrt(L) alone is not (an eigenvector's sign is arbitrary, and a rounding can
        # flip it, sending the shared draws to the other side): the same window read from
        # its rows, its hours or its day (float32 moments) then draws alike. Eigenvalues
        # under RANK_FLOOR of a bin's largest are taken as 0: a bin of few rows has a
        # covariance short of full rank, whose zero eigenvalues float32 leaves at a rounding
        # either side of 0, and whose square roots would move the draws by far more. Only
        # the ECE needs each bin's draw, of p - y; the others need the sums over bins, one
        # matrix product.
        values_, vectors = np.linalg.eigh(self.moments)  # ascending: the largest last
        kept = np.where(values_ > RANK_FLOOR * values_[:, -1:], values_, 0.0)
        factors = (vectors * np.sqrt(kept)[:, None, :]) @ vectors.transpose(0, 2, 1)
        summed = means.sum(axis=0) + z.reshape(resamples, bins * TERMS) @ factors.transpose(
            0, 2, 1
        ).reshape(bins * TERMS, TERMS)
        gaps = means[:, 1, None] + (z.transpose(1, 0, 2) @ factors[:, 1, :, None])[..., 0]
        count = np.maximum(summed[:, 0], 1e-300)
        values = {
            "log_loss": summed[:, 2] / count,
            "brier": summed[:, 3] / count,
            "ece": np.abs(gaps).sum(axis=0) / count,
        }
        consistent = np.abs(normal * np.sqrt(self.spread))
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


def _standard_normals(seed: int, resamples: int, bins: int) -> tuple[FloatArray, FloatArray]:
    """:meth:`CalibrationSums.intervals`' standard normal draws: ``resamples`` x ``bins`` x
    :data:`TERMS` of them, then ``resamples`` x ``bins`` for the consistent resamples. The
    same for every window of a request, and every request of the same sizes: kept (read-only)
    up to :data:`KEPT_NORMALS` numbers."""
    if resamples * bins * (TERMS + 1) <= KEPT_NORMALS:
        return _kept_normals(seed, resamples, bins)
    return _draw_normals(seed, resamples, bins)


def _draw_normals(seed: int, resamples: int, bins: int) -> tuple[FloatArray, FloatArray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((resamples, bins, TERMS)), rng.normal(size=(resamples, bins))


@lru_cache(maxsize=4)
def _kept_normals(seed: int, resamples: int, bins: int) -> tuple[FloatArray, FloatArray]:
    draws = _draw_normals(seed, resamples, bins)
    for array in draws:
        array.flags.writeable = False
    return draws


def _fine_sums(sums: CalibrationSums, rollup: BinaryRollup) -> None:
    """``sums``' bins and moments from ``rollup``'s fine bins (and cells), for ``n_bins``
    that divides :data:`~app.calibration.UNIFORM_BINS`: a fine bin (lo, hi] goes to the bin
    that holds hi."""
    size = sums.spread.size
    fine = np.searchsorted(sums.inner, FINE_UPPER, side="left")
    cells = fine[CELL_FINE]
    counts = _by(cells, rollup.positives + rollup.negatives, size)
    positives = _by(cells, rollup.positives, size)
    predicted, loss, brier, dl, db, ll, lb, bb, spread = (
        _by(fine, column, size) for column in rollup.moments.T
    )
    sums.bins[:] = counts, predicted, positives
    _moments(sums, counts, predicted - positives, loss, brier, (brier, dl, db, ll, lb, bb))
    sums.spread = spread.astype(np.float64)


def _cell_sums(sums: CalibrationSums, rollup: BinaryRollup) -> None:
    """``sums``' bins and moments from ``rollup``'s cells, each at its mean p, for any
    ``n_bins``."""
    size = sums.spread.size
    which = np.searchsorted(sums.inner, CELL_UPPER, side="left")
    p = np.clip(rollup.sums / np.maximum(rollup.counts, 1), PROBABILITY_EPS, 1 - PROBABILITY_EPS)
    ones, zeros = rollup.positives.astype(np.float64), rollup.negatives.astype(np.float64)
    counts = ones + zeros
    # x = (1, d, loss, Brier) of a positive at p and of a negative at p
    d1, d0 = p - 1.0, p
    l1, l0 = -np.log(p), -np.log1p(-p)
    b1, b0 = d1 * d1, d0 * d0

    def binned(positive: FloatArray, negative: FloatArray) -> FloatArray:
        return _by(which, ones * positive + zeros * negative, size)

    sums.bins[:] = (
        binned(np.ones_like(p), np.ones_like(p)),
        binned(p, p),
        binned(np.ones_like(p), np.zeros_like(p)),
    )
    gap, loss, brier = binned(d1, d0), binned(l1, l0), binned(b1, b0)
    second = (
        binned(d1 * d1, d0 * d0),
        binned(d1 * l1, d0 * l0),
        binned(d1 * b1, d0 * b0),
        binned(l1 * l1, l0 * l0),
        binned(l1 * b1, l0 * b0),
        binned(b1 * b1, b0 * b0),
    )
    _moments(sums, sums.bins[0], gap, loss, brier, second)
    sums.spread = _by(which, counts * p * (1 - p), size)


def _moments(
    sums: CalibrationSums,
    count: FloatArray,
    gap: FloatArray,
    loss: FloatArray,
    brier: FloatArray,
    second: tuple[FloatArray, ...],
) -> None:
    """Fill ``sums.moments``: the first row from the counts and the sums of p - y, loss and
    Brier; the rest from the second moments (dd, dl, db, ll, lb, bb)."""
    for j, values in enumerate((count, gap, loss, brier)):
        sums.moments[:, 0, j] = sums.moments[:, j, 0] = values
    pairs = ((1, 1), (1, 2), (1, 3), (2, 2), (2, 3), (3, 3))
    for (j, k), values in zip(pairs, second, strict=True):
        sums.moments[:, j, k] = sums.moments[:, k, j] = values


def _by(bins: NDArray[np.intp], values: NDArray[np.generic], size: int) -> FloatArray:
    """The sums of ``values`` in each of ``size`` bins."""
    return np.bincount(bins, values, minlength=size).astype(np.float64)
