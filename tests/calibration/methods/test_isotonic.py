"""Isotonic calibration against scikit-learn's IsotonicRegression and the PAV definition."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from app.calibration import IsotonicCalibrator, ParamError
from tests.calibration.batches import random_weights, sigmoid_batch

TOL = 1e-10


def _sklearn(f: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> IsotonicRegression:
    return IsotonicRegression(out_of_bounds="clip").fit(f, y, sample_weight=w)


@pytest.mark.parametrize("decimals", [1, 2, -1])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_linear_matches_sklearn(decimals: int, weighted: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 3000))
    f, y, w = sigmoid_batch(rng, n, decimals=decimals)
    if weighted:
        w = random_weights(rng, n)
    ours = IsotonicCalibrator().fit(f, y, w)
    reference = _sklearn(f, y, w if weighted else None)
    # training points, new points inside the range, and far outside it on both sides
    new = np.concatenate([f, rng.uniform(f.min() - 5, f.max() + 5, size=500), [-1e6, 1e6]])
    assert np.max(np.abs(ours.predict(new) - reference.predict(new))) < TOL
    np.testing.assert_allclose(ours.thresholds, reference.X_thresholds_, rtol=0, atol=TOL)
    np.testing.assert_allclose(ours.values, reference.y_thresholds_, rtol=0, atol=TOL)


def test_zero_weights_are_dropped_like_sklearn() -> None:
    f = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    y = np.array([0.0, 1.0, 0.0, 1.0, 1.0, 0.0])
    w = np.array([1.0, 0.0, 1.0, 1.0, 1.0, 0.0])  # the ends of the range carry no weight
    ours = IsotonicCalibrator().fit(f, y, w)
    new = np.linspace(-1, 1, 41)
    np.testing.assert_allclose(ours.predict(new), _sklearn(f, y, w).predict(new), atol=TOL)
    assert ours.thresholds.max() == pytest.approx(0.4)  # 0.5 had weight 0: not a threshold


def test_ties_pooled_by_weighted_mean() -> None:
    # at f = 1 the weighted mean label is (3 * 1 + 1 * 0) / 4 = 0.75
    f = np.array([0.0, 1.0, 1.0, 2.0])
    y = np.array([0.0, 1.0, 0.0, 1.0])
    w = np.array([1.0, 3.0, 1.0, 1.0])
    ours = IsotonicCalibrator().fit(f, y, w)
    np.testing.assert_allclose(ours.predict(np.array([0.0, 1.0, 2.0])), [0.0, 0.75, 1.0])


def test_step_interpolation_is_the_value_of_the_last_threshold_below() -> None:
    rng = np.random.default_rng(7)
    f, y, w = sigmoid_batch(rng, 400, decimals=1)
    linear = IsotonicCalibrator().fit(f, y, w)
    step = IsotonicCalibrator.from_params({"interpolation": "step"}).fit(f, y, w)
    thresholds, values = step.thresholds, step.values
    np.testing.assert_array_equal(thresholds, linear.thresholds)
    new = np.concatenate([f, rng.uniform(f.min() - 2, f.max() + 2, size=300)])
    # the definition, one point at a time (a reference, so a loop is fine here)
    expected = [
        values[0] if x < thresholds[0] else values[thresholds <= x][-1] for x in new.tolist()
    ]
    np.testing.assert_array_equal(step.predict(new), expected)
    # at the fitted scores both interpolations agree with the PAV fit
    np.testing.assert_allclose(step.predict(thresholds), linear.predict(thresholds), atol=0)


def test_predictions_are_monotone_and_within_unit_interval() -> None:
    rng = np.random.default_rng(3)
    f, y, w = sigmoid_batch(rng, 1000, decimals=2)
    for interpolation in ("linear", "step"):
        calibrator = IsotonicCalibrator.from_params({"interpolation": interpolation}).fit(f, y, w)
        p = calibrator.predict(np.linspace(-10, 10, 2001))
        assert np.all(np.diff(p) >= 0)
        assert p.min() >= 0
        assert p.max() <= 1


def test_single_class_fits_a_constant() -> None:
    f = np.array([0.1, 0.5, 0.9])
    calibrator = IsotonicCalibrator().fit(f, np.zeros(3), np.ones(3))
    np.testing.assert_array_equal(calibrator.predict(np.array([-1.0, 0.5, 2.0])), [0, 0, 0])


@pytest.mark.parametrize(
    ("params", "field"),
    [({"interpolation": "cubic"}, "interpolation"), ({"increasing": True}, "increasing")],
)
def test_bad_params_name_the_key(params: dict[str, object], field: str) -> None:
    with pytest.raises(ParamError) as info:
        IsotonicCalibrator.from_params(params)
    assert info.value.field == field
    assert str(info.value).startswith(f"params.{field}: ")
