"""A fitted calibrator followed by Bayes steps (PriorAdjusted): its predictions are exactly
``adjust`` of the wrapped calibrator's, its state round-trips through ``load_calibrator`` to
the same bits, steps compose in order, and a damaged state is a StateError."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.calibration import (
    Adjustment,
    CalibrationError,
    PriorAdjusted,
    StateError,
    adjust,
    fit_calibrator,
    load_calibrator,
)
from tests.calibration.batches import sigmoid_batch

STEP = Adjustment(np.array([0.6, 0.4]), np.array([0.9, 0.1]))
AGAIN = Adjustment(np.array([0.9, 0.1]), np.array([0.25, 0.75]))


@pytest.mark.parametrize("method", ["platt", "isotonic", "venn_abers", "histogram_binning"])
def test_predict_is_the_parents_adjusted_and_survives_its_state(method: str) -> None:
    f, y = sigmoid_batch(np.random.default_rng(4), 2_000)[:2]
    parent = fit_calibrator(method, {}, f, y, None).calibrator
    once = PriorAdjusted.of(parent, STEP)
    twice = PriorAdjusted.of(once, AGAIN)
    assert twice.base is parent
    assert twice.adjustments == (STEP, AGAIN)
    grid = np.concatenate([np.linspace(-10, 10, 2001), [-np.inf, np.inf]])
    first = adjust(parent.predict(grid), STEP.prior_from, STEP.prior_to)
    expected = adjust(first, AGAIN.prior_from, AGAIN.prior_to)
    assert np.array_equal(twice.predict(grid), expected)
    loaded = load_calibrator(method, parent.params, twice.state())
    assert np.array_equal(loaded.predict(grid), expected)
    assert loaded.state() == twice.state()
    assert {k: v for k, v in twice.state().items() if k != "adjustments"} == parent.state()
    assert (twice.method, twice.params) == (parent.method, parent.params)
    with pytest.raises(CalibrationError):
        twice.fit(f, y.astype(np.int64), np.ones(f.size))


def test_venn_abers_intervals_go_through_the_same_steps() -> None:
    f, y = sigmoid_batch(np.random.default_rng(5), 1_000)[:2]
    parent: Any = fit_calibrator("venn_abers", {}, f, y, None).calibrator
    adjusted = PriorAdjusted.of(parent, STEP)
    grid = np.linspace(-8, 8, 801)
    p0, p1 = parent.predict_interval(grid)
    q0, q1 = adjusted.predict_interval(grid)
    assert np.array_equal(q0, adjust(p0, STEP.prior_from, STEP.prior_to))
    assert np.array_equal(q1, adjust(p1, STEP.prior_from, STEP.prior_to))
    q = adjusted.predict(grid)
    assert np.all((q0 <= q) & (q <= q1))


def test_a_k_class_calibrator_is_adjusted_row_by_row() -> None:
    rng = np.random.default_rng(6)
    z = rng.normal(size=(900, 3))
    labels = z.argmax(axis=1)
    parent = fit_calibrator("temperature", {}, z, labels, None).calibrator
    step = Adjustment(np.array([0.2, 0.3, 0.5]), np.array([0.6, 0.3, 0.1]))
    adjusted = PriorAdjusted.of(parent, step)
    p, q = parent.predict(z), adjusted.predict(z)
    brute = p * (step.prior_to / step.prior_from)
    np.testing.assert_allclose(q, brute / brute.sum(axis=1, keepdims=True), rtol=1e-14)
    loaded = load_calibrator("temperature", parent.params, adjusted.state(), n_classes=3)
    assert np.array_equal(loaded.predict(z), q)


@pytest.mark.parametrize(
    "adjustments",
    [
        [],
        "none",
        [{"prior_from": [0.5, 0.5]}],
        [{"prior_from": [0.5, 0.5], "prior_to": [0.5, 0.5], "more": 1}],
        [{"prior_from": [0.5, 0.5], "prior_to": [0.2, 0.3, 0.5]}],
        [{"prior_from": [0.5, 0.5], "prior_to": [0.0, 1.0]}],
        [{"prior_from": [0.5, 0.5], "prior_to": [True, 0.5]}],
        [{"prior_from": [0.5, 0.5], "prior_to": ["0.5", 0.5]}],
        [{"prior_from": [0.5, float("nan")], "prior_to": [0.5, 0.5]}],
    ],
)
def test_a_damaged_state_is_a_state_error(adjustments: Any) -> None:
    f, y = sigmoid_batch(np.random.default_rng(7), 200)[:2]
    parent = fit_calibrator("platt", {}, f, y, None).calibrator
    with pytest.raises(StateError, match="adjustments"):
        load_calibrator("platt", {}, {**parent.state(), "adjustments": adjustments})
