"""A k-class window's priors (app/service/traffic/expectations.py) when its rows outnumber
the sample EM reads: the sample's interval covers the window's true priors as a 95%
interval should; and with many classes, EM alone and no interval."""

from __future__ import annotations

import numpy as np
import pytest

from app.service.traffic.expectations import SAMPLE_ROWS, ClassWindow

TRAINING = np.array([0.5, 0.3, 0.2])
MEANS = np.array([-1.0, 0.0, 1.0])


def _window_rows(n: int, priors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Calibrated probabilities (under TRAINING) of n rows whose classes have ``priors``:
    x | y ~ N(MEANS[y], 1), so P(y | x) is TRAINING times the class densities, normalised."""
    y = rng.choice(3, size=n, p=priors)
    x = rng.normal(MEANS[y], 1.0)
    weighted = TRAINING * np.exp(-0.5 * (x[:, None] - MEANS) ** 2)
    rows: np.ndarray = weighted / weighted.sum(axis=1, keepdims=True)
    return rows


def test_the_samples_interval_covers_the_windows_priors() -> None:
    rng = np.random.default_rng(0)
    truth = np.array([0.3, 0.3, 0.4])  # shifted from TRAINING
    covered, replicates = np.zeros(3), 40
    for _ in range(replicates):
        window = ClassWindow(TRAINING)
        rows = _window_rows(2 * SAMPLE_ROWS, truth, rng)
        for chunk in np.array_split(rows, 7):
            window.add(chunk)
        prior = window.prior()
        assert prior is not None
        assert prior["training"] == pytest.approx(TRAINING.tolist())
        for c, (low, high) in enumerate(prior["interval"]):
            covered[c] += low <= truth[c] <= high
    assert np.all(covered / replicates >= 0.8), covered / replicates


def test_many_classes_get_em_alone_and_no_interval() -> None:
    rng = np.random.default_rng(1)
    k = 100
    training = np.full(k, 1 / k)
    rows = rng.dirichlet(np.full(k, 0.3), size=5_000)
    window = ClassWindow(training)
    window.add(rows)
    prior = window.prior()
    assert prior is not None
    assert prior["interval"] is None
    estimate = np.array(prior["estimated"])
    assert estimate.sum() == pytest.approx(1.0)
    # EM's fixed point: the mean posterior under the estimate is the estimate
    q = rows * (estimate / training)
    q /= q.sum(axis=1, keepdims=True)
    assert q.mean(axis=0) == pytest.approx(estimate, abs=1e-6)
