"""The monitor's sums, fed in chunks, against the same measures on all the rows at once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ks_2samp
from sklearn.metrics import brier_score_loss, log_loss

from app.monitoring import Monitor, Reference
from tests.api.helpers import ece, psi

T0 = datetime(2026, 11, 24, tzinfo=UTC)


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
def test_ks_and_psi_from_chunks_equal_scipy_and_numpy_with_ties(
    reference: list[int], traffic: list[int], cuts: list[int]
) -> None:
    ref, seen = np.array(reference, dtype=float), np.array(traffic, dtype=float)
    monitor = Monitor(T0, T0 + timedelta(hours=1), "1h", {1: Reference(ref)})
    rows = columns(seen, np.full(seen.size, 0.5), np.full(seen.size, -1.0))
    for chunk in np.split(rows, sorted(c for c in cuts if c <= seen.size)):
        monitor.add_traffic(chunk)
    (row,) = monitor.rows()
    assert row["ks"] == pytest.approx(ks_2samp(ref, seen).statistic, rel=1e-12, abs=1e-15)
    assert row["psi"] == pytest.approx(psi(ref, seen), rel=1e-9, abs=1e-12)


def test_calibration_sums_over_chunks_equal_scikit_learn_on_all_rows() -> None:
    rng = np.random.default_rng(3)
    p = rng.random(5000)
    y = (rng.random(5000) < p**1.3).astype(float)
    y[::3] = -1  # no outcome yet
    monitor = Monitor(T0, T0 + timedelta(hours=1), "1h", {1: Reference(rng.normal(size=700))})
    rows = columns(rng.normal(size=5000), p, y)
    for chunk in np.array_split(rows, 17):
        monitor.add_traffic(chunk)
    (row,) = monitor.rows()
    known = y >= 0
    assert (row["n_predictions"], row["n_labelled"]) == (5000, int(known.sum()))
    assert row["log_loss"] == pytest.approx(log_loss(y[known], p[known]), rel=1e-12)
    assert row["brier"] == pytest.approx(brier_score_loss(y[known], p[known]), rel=1e-12)
    assert row["ece"] == pytest.approx(ece(p[known], y[known]), rel=1e-12)
    assert row["mean_predicted"] == pytest.approx(p[known].mean(), rel=1e-12)


def test_a_window_is_closed_once_later_rows_arrive() -> None:
    """Only the window being read keeps its KS slot counts (one per distinct batch score)."""
    monitor = Monitor(T0, T0 + timedelta(hours=3), "1h", {1: Reference(np.arange(1000.0))})
    for hour in range(3):
        rows = columns(np.arange(10.0), np.full(10, 0.5), np.full(10, -1.0))
        rows[:, 0] += hour * 3600
        monitor.add_traffic(rows)
        assert [key[0] for key in monitor.reading] == [hour]
    assert [row["ks"] for row in monitor.rows()] == pytest.approx([0.99] * 3)
