"""The monitor's sums, fed in chunks or as stored hours, against the same measures on all the
rows at once."""

from __future__ import annotations

import tracemalloc
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ks_2samp
from sklearn.metrics import brier_score_loss, log_loss

from app.calibration import ScoreReference
from app.service.traffic.monitoring import Monitor
from tests.api.helpers import binned_ks, ece, ks_binning_slack, psi

T0 = datetime(2026, 11, 24, tzinfo=UTC)


def ks(reference: np.ndarray, seen: np.ndarray) -> float:
    """scipy's two-sample KS statistic (its p-value, not asked for, asymptotic: it divides
    by zero for a sample of one)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(ks_2samp(reference, seen, method="asymp").statistic)


def score_reference(scores: np.ndarray, weights: np.ndarray | None = None) -> ScoreReference:
    return ScoreReference.of_batch(scores, np.zeros(scores.size, dtype=np.int64), weights)


def check_ks(value: float, fitted_on: np.ndarray, seen: np.ndarray) -> None:
    """KS read at the batch's percentiles: the brute force's, and within its slack below
    scipy's on the rows."""
    assert value == pytest.approx(binned_ks(fitted_on, seen), rel=1e-12, abs=1e-15)
    exact = ks(fitted_on, seen)
    assert exact - ks_binning_slack(fitted_on, seen) - 1e-12 <= value <= exact + 1e-12


def columns(scores: np.ndarray, probabilities: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Rows of one version (1) in the first hour, in time order."""
    seconds = T0.timestamp() + np.linspace(0, 3599, scores.size)
    return np.column_stack([seconds, np.ones(scores.size), scores, probabilities, labels])


@settings(max_examples=60, deadline=None)
@given(
    reference=st.lists(st.integers(-3, 3), min_size=1, max_size=40),
    traffic=st.lists(st.integers(-4, 4), min_size=1, max_size=60),
    cuts=st.lists(st.integers(0, 60), max_size=5),
)
def test_ks_and_psi_from_chunks_equal_the_brute_force_with_ties(
    reference: list[int], traffic: list[int], cuts: list[int]
) -> None:
    ref, seen = np.array(reference, dtype=float), np.array(traffic, dtype=float)
    monitor = Monitor(T0, T0 + timedelta(hours=1), "1h", {1: score_reference(ref)})
    rows = columns(seen, np.full(seen.size, 0.5), np.full(seen.size, -1.0))
    for chunk in np.split(rows, sorted(c for c in cuts if c <= seen.size)):
        monitor.add_traffic(chunk)
    (row,) = monitor.rows()
    check_ks(row["ks"], ref, seen)
    assert row["psi"] == pytest.approx(psi(ref, seen), rel=1e-9, abs=1e-12)


def test_every_number_from_chunks_spanning_windows_equals_the_measures_on_each_window() -> None:
    rng = np.random.default_rng(3)
    n = 6000
    p = rng.random(n)
    y = (rng.random(n) < p**1.3).astype(float)
    y[::3] = -1  # no outcome yet
    scores, fitted_on = rng.normal(0.3, 1.0, n), rng.normal(size=700)
    rows = columns(scores, p, y)
    rows[:, 0] += np.repeat([0, 3600, 7200], n // 3)  # three hours, 2000 rows each
    monitor = Monitor(T0, T0 + timedelta(hours=3), "1h", {1: score_reference(fitted_on)})
    for chunk in np.array_split(rows, 17):  # 353 rows a chunk: some span two hours
        monitor.add_traffic(chunk)
    for hour, row in enumerate(monitor.rows()):
        at = slice(hour * 2000, (hour + 1) * 2000)
        known = y[at] >= 0
        q, t, s = p[at][known], y[at][known], scores[at]
        assert (row["version"], row["n_predictions"], row["n_labelled"]) == (1, 2000, known.sum())
        assert row["log_loss"] == pytest.approx(log_loss(t, q), rel=1e-12)
        assert row["brier"] == pytest.approx(brier_score_loss(t, q), rel=1e-12)
        assert row["ece"] == pytest.approx(ece(q, t), rel=1e-12)
        assert row["mean_predicted"] == pytest.approx(q.mean(), rel=1e-12)
        assert row["observed_rate"] == pytest.approx(t.mean(), rel=1e-12)
        check_ks(row["ks"], fitted_on, s)
        assert row["psi"] == pytest.approx(psi(fitted_on, s), rel=1e-9)


def test_windows_read_one_after_another_each_get_their_own_shift() -> None:
    """Each hour's scores against the batch: closing a window must not mix in the next."""
    fitted_on = np.arange(1000.0)
    monitor = Monitor(T0, T0 + timedelta(hours=3), "1h", {1: score_reference(fitted_on)})
    seen = [np.arange(10.0), np.arange(500.0, 700.0), np.arange(990.0, 1000.0)]
    for hour, scores in enumerate(seen):
        rows = columns(scores, np.full(scores.size, 0.5), np.full(scores.size, -1.0))
        rows[:, 0] += hour * 3600
        monitor.add_traffic(rows)
    for row, scores in zip(monitor.rows(), seen, strict=True):
        check_ks(row["ks"], fitted_on, scores)


def test_a_chunk_spanning_many_windows_holds_a_rollup_a_window() -> None:
    """Sparse traffic puts hundreds of windows in one chunk: each window holds a rollup of a
    few kilobytes (the rows' KS slot counts, 2 x 10^5 + 1 here, 1.6 MB, are not kept)."""
    monitor = Monitor(T0, T0 + timedelta(hours=300), "1h", {1: score_reference(np.arange(1e5))})
    rows = columns(np.arange(3000.0), np.full(3000, 0.5), np.full(3000, -1.0))
    rows[:, 0] = T0.timestamp() + np.repeat(np.arange(300) * 3600.0, 10)  # 10 rows an hour
    tracemalloc.start()
    try:
        monitor.add_traffic(rows)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20e6
    assert len(monitor.rows()) == 300


@pytest.mark.parametrize(("n", "power"), [(3000, 1.0), (3000, 1.6), (20000, 1.2)])
def test_window_intervals_from_moments_match_the_poisson_bootstrap_of_its_rows(
    n: int, power: float
) -> None:
    """The Gaussian draws with the bootstrap's per-bin moments give the intervals the exact
    Poisson bootstrap (:func:`app.calibration.measures.headline_reports.headline_resampled`,
    the same ten bins) gives on the window's rows: each end within 10% of the interval's
    width, on a calibrated and two miscalibrated windows."""
    from app.calibration.measures.headline_reports import headline_resampled
    from app.calibration.measures.metrics import log_losses, squared_errors
    from app.service.traffic.sums import CalibrationSums

    rng = np.random.default_rng(n + int(power * 10))
    p = rng.beta(2, 3, n)
    y = (rng.random(n) < p**power).astype(np.float64)
    sums = CalibrationSums(10)
    for part in np.array_split(np.arange(n), 7):  # fed in chunks
        sums.add(p[part], y[part], log_losses(p[part], y[part]), squared_errors(p[part], y[part]))
    ours = sums.intervals(2000)
    _, (exact,) = headline_resampled([p], y.astype(np.int64), None, 2000)
    for name in ("log_loss", "brier", "ece"):
        (low, high), (ref_low, ref_high) = ours[name], exact.intervals[name]
        width = ref_high - ref_low
        assert abs(low - ref_low) < 0.1 * width, (name, ours[name], exact.intervals[name])
        assert abs(high - ref_high) < 0.1 * width, (name, ours[name], exact.intervals[name])
    assert sums.intervals(500) == sums.intervals(500)  # seeded
    assert sums.intervals(0) == {}


def test_monitor_rows_carry_intervals_when_asked() -> None:
    rng = np.random.default_rng(3)
    scores = rng.normal(size=400)
    probabilities = 1 / (1 + np.exp(-scores))
    labels = (rng.random(400) < probabilities).astype(np.float64)
    for resamples, expected in ((0, False), (300, True)):
        monitor = Monitor(T0, T0 + timedelta(hours=1), "1h", {}, resamples=resamples)
        monitor.add_traffic(columns(scores, probabilities, labels))
        (row,) = monitor.rows()
        assert ("intervals" in row) is expected
        if expected:
            for name in ("log_loss", "brier"):
                low, high = row["intervals"][name]
                assert low < row[name] < high


def test_a_window_of_few_labelled_predictions_gets_no_intervals() -> None:
    from app.calibration.measures.metrics import log_losses, squared_errors
    from app.service.traffic.sums import MIN_INTERVAL_ROWS, CalibrationSums

    rng = np.random.default_rng(5)
    for n, expected in ((2, False), (MIN_INTERVAL_ROWS - 1, False), (MIN_INTERVAL_ROWS, True)):
        p = rng.uniform(0.05, 0.95, n)
        y = (rng.random(n) < p).astype(np.float64)
        sums = CalibrationSums(10)
        sums.add(p, y, log_losses(p, y), squared_errors(p, y))
        assert bool(sums.intervals(1000)) is expected, n


def test_a_weighted_reference_is_its_batch_with_rows_repeated_by_weight() -> None:
    """Integer weights: KS against the batch whose rows are repeated that many times
    (scipy), and PSI over that batch's inverted-CDF deciles (numpy)."""
    rng = np.random.default_rng(3)
    scores = np.round(rng.normal(size=400), 2)
    weights = rng.integers(1, 4, size=400).astype(float)
    repeated = np.repeat(scores, weights.astype(int))
    traffic = rng.normal(0.4, 1.1, 300)
    monitor = Monitor(T0, T0 + timedelta(hours=1), "1h", {1: score_reference(scores, weights)})
    monitor.add_traffic(columns(traffic, np.full(300, 0.5), np.full(300, -1.0)))
    (row,) = monitor.rows()
    edges = np.unique(np.quantile(repeated, np.arange(1, 100) / 100, method="inverted_cdf"))
    below = [abs(np.mean(repeated < e) - np.mean(traffic < e)) for e in edges]
    assert row["ks"] == pytest.approx(max(below), rel=1e-12)
    edges = np.unique(np.quantile(repeated, np.arange(1, 10) / 10, method="inverted_cdf"))
    expected = np.bincount(np.searchsorted(edges, repeated, side="right")) / repeated.size
    seen = np.bincount(np.searchsorted(edges, traffic, side="right"), minlength=edges.size + 1)
    a, e = np.maximum(seen / traffic.size, 1e-4), np.maximum(expected, 1e-4)
    assert row["psi"] == pytest.approx(float(np.sum((a - e) * np.log(a / e))), rel=1e-9)
    plain = score_reference(scores, np.full(400, 2.5))  # equal weights: the plain batch
    assert np.array_equal(plain.edges, score_reference(scores).edges)
