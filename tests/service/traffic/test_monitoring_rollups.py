"""A window read from stored hours (rollups, through their bytes) against the same window read
from its rows; the reliability bins that do not coincide with the rollups' cells."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.calibration import BinaryRollup, ScoreReference, expected_of
from app.service.traffic.monitoring import Monitor
from app.service.traffic.sums import CalibrationSums
from tests.api.helpers import ece

T0 = datetime(2026, 11, 24, tzinfo=UTC)
HOURS = 6


def _traffic(seed: int) -> np.ndarray:
    """Six hours of one version's rows (1,500 an hour, two thirds labelled), time-ordered."""
    rng = np.random.default_rng(seed)
    n = 1500 * HOURS
    scores = rng.normal(0.2, 1.2, n)
    p = 1 / (1 + np.exp(-1.3 * scores))
    y = (rng.random(n) < p**1.2).astype(np.float64)
    y[::3] = -1.0
    seconds = T0.timestamp() + np.sort(rng.uniform(0, HOURS * 3600, n))
    return np.column_stack([seconds, np.ones(n), scores, p, y])


def _stored_hours(rows: np.ndarray, reference: ScoreReference) -> list[BinaryRollup]:
    """Each hour's rollup as the log writes it (three flushes an hour) and reads it back."""
    hours = ((rows[:, 0] - T0.timestamp()) // 3600).astype(int)
    stored = []
    for hour in range(HOURS):
        kept = BinaryRollup(reference.bins)
        for part in np.array_split(rows[hours == hour], 3):
            _, _, scores, p, y = part.T
            flush = BinaryRollup(reference.bins)
            flush.add_predictions(p, reference.bin_of(scores))
            flush.add_labels(p[y >= 0], y[y >= 0])
            kept = BinaryRollup.from_bytes(kept.to_bytes())
            kept.add(flush)
        stored.append(BinaryRollup.from_bytes(kept.to_bytes()))
    return stored


@pytest.mark.parametrize("window", ["1h", "1d"])
def test_stored_hours_give_the_windows_of_the_rows(window: str) -> None:
    rng = np.random.default_rng(11)
    fitted_on = rng.normal(size=3000)
    reference = ScoreReference.of_batch(fitted_on, (rng.random(3000) < 0.4).astype(np.int64))
    rows = _traffic(11)
    options = {"priors": {1: reference.priors}, "threshold": 0.35, "resamples": 400}
    until = T0 + timedelta(hours=HOURS) if window == "1h" else T0 + timedelta(days=1)
    from_rows = Monitor(T0, until, window, {1: reference}, **options)  # type: ignore[arg-type]
    for chunk in np.array_split(rows, 7):
        from_rows.add_traffic(chunk)
    from_hours = Monitor(T0, until, window, {1: reference}, **options)  # type: ignore[arg-type]
    for hour, rollup in enumerate(_stored_hours(rows, reference)):
        from_hours.add_rollup(T0 + timedelta(hours=hour), 1, rollup)
    for ours, theirs in zip(from_hours.rows(), from_rows.rows(), strict=True):
        assert ours.keys() == theirs.keys()
        for key in ("start", "end", "version", "n_predictions", "n_labelled"):
            assert ours[key] == theirs[key]
        for key in ("mean_predicted", "observed_rate", "log_loss", "brier", "ece", "psi", "ks"):
            assert ours[key] == pytest.approx(theirs[key], rel=1e-12), key
        for part in ("estimated", "realized"):
            for key, value in ours[part].items():
                # the cells' sums are float32 once stored: the AUC reads them
                rel = 1e-6 if key == "roc_auc" and part == "estimated" else 1e-9
                if key != "intervals":
                    assert value == pytest.approx(theirs[part][key], rel=rel), (part, key)
            for key, band in (ours[part].get("intervals") or {}).items():
                # the cells' p (1 - p) are float32 once stored: the bands' split at the threshold
                assert band == pytest.approx(theirs[part]["intervals"][key], rel=1e-6), key
        for key, value in ours["prior"].items():  # EM on the cells' float32 means
            assert value == pytest.approx(theirs["prior"][key], rel=1e-6), key
        for key, interval in ours["intervals"].items():
            # second moments in float32: the Gaussian draws move by as little
            assert interval == pytest.approx(theirs["intervals"][key], rel=1e-4), key


@pytest.mark.parametrize("n_bins", [2, 4, 5, 10, 20, 3, 7, 15, 100])
def test_reliability_bins_against_the_rows(n_bins: int) -> None:
    """ECE of bins that are unions of cells (n_bins divides 20) is the rows' own; of others,
    within 5e-3 for probabilities that do not repeat (1e-2 past 20 bins; a cell across an
    edge goes whole to one side); and the intervals of either stay those the rows' own
    moments give, each end within a fifth of the interval's width."""
    rows = _traffic(12)
    _, _, _, p, y = rows.T
    monitor = Monitor(T0, T0 + timedelta(hours=HOURS), "7d", {}, n_bins=n_bins, resamples=500)
    monitor.add_traffic(rows)
    (row,) = monitor.rows()
    known = y >= 0
    q, t = p[known], y[known]
    truth = ece(q, t, n_bins)
    if 20 % n_bins == 0:
        assert row["ece"] == pytest.approx(truth, rel=1e-12)
    else:  # bins finer than the cells near 0.5 (1/8 of a unit of log odds) merge
        assert abs(row["ece"] - truth) <= (5e-3 if n_bins < 20 else 1e-2)
    from app.calibration.measures.metrics import log_losses, squared_errors

    exact = CalibrationSums(n_bins)
    exact.add(q, t, log_losses(q, t), squared_errors(q, t))
    for name, (low, high) in exact.intervals(500).items():
        ours = row["intervals"][name]
        assert abs(ours[0] - low) <= 0.2 * (high - low), (name, ours, (low, high))
        assert abs(ours[1] - high) <= 0.2 * (high - low), (name, ours, (low, high))


def test_probabilities_on_the_bins_edges_fall_where_the_rows_put_them() -> None:
    """Isotonic and binning outputs repeat a few values, which can sit exactly on an edge:
    j x 0.05 as the reliability bins cut (0.30000000000000004) or j / 20 as a threshold
    names it (0.3). The stored hour bins them as the diagnostics of the rows do
    (:func:`app.calibration.measures.metrics.summarize`), and splits them at a threshold as
    the expected measures of the rows do."""
    from app.calibration import expected_binary
    from app.calibration.measures.metrics import summarize

    values = np.array([0.6000000000000001, 0.6, 0.30000000000000004, 0.3, 0.15000000000000002,
                       0.15, 0.35, 0.7000000000000001, 0.625, 0.5])  # fmt: skip
    rng = np.random.default_rng(4)
    p = rng.choice(values, 3000)
    y = (rng.random(3000) < p).astype(np.float64)
    stored = BinaryRollup()
    stored.add_predictions(p)
    stored.add_labels(p, y)
    stored = BinaryRollup.from_bytes(stored.to_bytes())
    for n_bins in (2, 4, 5, 10, 20):
        sums = CalibrationSums.of_rollup(stored, n_bins)
        assert sums is not None
        expected = summarize(p, y, n_bins=n_bins, with_bin_free=False).metrics["ece"]
        assert sums.result()["ece"] == pytest.approx(expected, rel=1e-12), n_bins
    for threshold in (0.3, 0.6, 0.15, 0.35):
        ours, rows = expected_of(stored, threshold), expected_binary(p, threshold)
        for key in ("accuracy", "precision", "recall", "f1", "positive_rate"):
            assert ours[key] == pytest.approx(rows[key], rel=1e-12), (threshold, key)
