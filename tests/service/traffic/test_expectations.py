"""A k-class window's priors (app/service/traffic/expectations.py) from its hours' samples
(:class:`~app.calibration.ClassRollup`): the weighted samples' interval covers the window's
true priors as a 95% interval should, hours of unequal traffic included; and with many
classes, EM alone and no interval."""

from __future__ import annotations

import numpy as np
import pytest

from app.calibration import ClassRollup, id_keys
from app.calibration.measures.class_rollups import sample_size
from app.service.traffic.expectations import class_expectations

TRAINING = np.array([0.5, 0.3, 0.2])
MEANS = np.array([-1.0, 0.0, 1.0])


def _hour_rows(n: int, priors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Calibrated probabilities (under TRAINING) of n rows whose classes have ``priors``:
    x | y ~ N(MEANS[y], 1), so P(y | x) is TRAINING times the class densities, normalised."""
    y = rng.choice(3, size=n, p=priors)
    x = rng.normal(MEANS[y], 1.0)
    weighted = TRAINING * np.exp(-0.5 * (x[:, None] - MEANS) ** 2)
    rows: np.ndarray = weighted / weighted.sum(axis=1, keepdims=True)
    return rows


def _window(hours: list[tuple[int, np.ndarray]], replicate: int) -> ClassRollup:
    """A window of hours (their number, their rows), each summed as the log sums it."""
    window = ClassRollup(3)
    for hour, rows in hours:
        ids = [f"{replicate}-{hour}-{i}" for i in range(rows.shape[0])]
        summed = ClassRollup(3)
        for part in np.array_split(np.arange(rows.shape[0]), 3):  # three flushes
            delta = ClassRollup(3)
            delta.add_predictions(rows[part], id_keys([ids[i] for i in part]), hour)
            summed.add(ClassRollup.from_bytes(delta.to_bytes()))
        window.add(summed)
    return window


def test_the_weighted_samples_interval_covers_the_windows_priors() -> None:
    """Hours whose priors differ and whose traffic differs tenfold: the window's priors are
    the traffic-weighted mix, which unweighted samples (each hour's the same size) miss."""
    rng = np.random.default_rng(0)
    busy, quiet = np.array([0.2, 0.3, 0.5]), np.array([0.6, 0.3, 0.1])
    truth = (10 * busy + quiet) / 11
    covered, replicates = np.zeros(3), 40
    for replicate in range(replicates):
        hours = [(h, _hour_rows(3_000 if h % 2 else 300, busy if h % 2 else quiet, rng))
                 for h in range(8)]  # fmt: skip
        window = _window(hours, replicate)
        assert window.keys.size == 4 * sample_size(3) + 4 * 300  # a quiet hour kept whole
        prior = class_expectations(window, TRAINING).prior
        assert prior is not None
        assert prior["training"] == pytest.approx(TRAINING.tolist())
        for c, (low, high) in enumerate(prior["interval"]):
            covered[c] += low <= truth[c] <= high
    assert np.all(covered / replicates >= 0.8), covered / replicates


def test_many_classes_get_em_alone_and_no_interval() -> None:
    """100 classes: an hour keeps 30 rows, so a window needs 34 hours for its 1,000."""
    rng = np.random.default_rng(1)
    k = 100
    training = np.full(k, 1 / k)
    window = ClassRollup(k)
    for hour in range(40):
        rows = rng.dirichlet(np.full(k, 0.3), size=200)
        window.add_predictions(rows, id_keys([f"{hour}-{i}" for i in range(200)]), hour)
    assert window.keys.size == 40 * sample_size(k) == 1_200
    prior = class_expectations(window, training).prior
    assert prior is not None
    assert prior["interval"] is None
    estimate = np.array(prior["estimated"])
    assert estimate.sum() == pytest.approx(1.0)
    # EM's fixed point: the weighted mean posterior of the sample is the estimate
    sample, weights = window.sample()
    q = sample * (estimate / training)
    q /= q.sum(axis=1, keepdims=True)
    assert weights @ q / weights.sum() == pytest.approx(estimate, abs=1e-6)


def test_a_sample_of_fewer_than_ten_rows_a_class_gives_no_prior() -> None:
    rng = np.random.default_rng(2)
    window = ClassRollup(3)
    rows = _hour_rows(29, TRAINING, rng)
    window.add_predictions(rows, id_keys([f"r{i}" for i in range(29)]), 1)
    prior = class_expectations(window, TRAINING).prior
    assert prior == {"training": TRAINING.tolist(), "estimated": None, "interval": None}
    more = _hour_rows(1, TRAINING, rng)
    window.add_predictions(more, id_keys(["r29"]), 1)
    assert class_expectations(window, TRAINING).prior["estimated"] is not None  # type: ignore[index]
