"""Bounded outputs: Laplace's interval, clipping only, recorded in the state, never 0 or 1."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from app.calibration import ParamError, StateError, load_calibrator, make_calibrator
from app.calibration.kernels.bounds import OutputBound, effective_size
from app.calibration.methods.bostrom import BostromCalibrator
from app.calibration.methods.temperature import TemperatureScaling

EXTREMES = np.array([-1e300, -50.0, -5.0, 0.0, 5.0, 50.0, 1e300])


def margins(seed: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    f = rng.normal(scale=3.0, size=n)
    y = (rng.random(n) < 1 / (1 + np.exp(-2 * f))).astype(np.float64)
    return f, y, np.ones(n)


def test_effective_size_is_kish_and_scale_free() -> None:
    w = np.random.default_rng(0).uniform(0.0, 5.0, size=300)
    np.testing.assert_allclose(effective_size(w), w.sum() ** 2 / (w**2).sum(), rtol=1e-12)
    np.testing.assert_allclose(effective_size(1e-300 * w), effective_size(w), rtol=1e-12)
    assert effective_size(np.full(40, 0.25)) == pytest.approx(40.0, rel=1e-14)


def test_isotonic_bound_is_sklearn_clipped_into_laplaces_interval() -> None:
    f, y, w = margins(1, 200)
    bounded = make_calibrator("isotonic", {"bound": "laplace"}).fit(f, y, w)
    reference = IsotonicRegression(out_of_bounds="clip").fit(f, y).predict(EXTREMES)
    assert reference.min() == 0.0  # pure end blocks
    assert reference.max() == 1.0
    np.testing.assert_allclose(
        bounded.predict(EXTREMES), np.clip(reference, 1 / 202, 201 / 202), rtol=0, atol=1e-15
    )
    assert bounded.state()["bound"] == [1 / 202, 201 / 202]
    assert bounded.params["bound"] == "laplace"


@pytest.mark.parametrize("method", ["platt", "isotonic", "histogram_binning", "beta"])
def test_bounded_outputs_are_the_unbounded_ones_clipped(method: str) -> None:
    f, y, w = margins(2, 150)
    if method == "beta":
        f = 1 / (1 + np.exp(-f))
        grid = np.array([1e-300, 1e-12, 0.1, 0.5, 0.9, 1 - 1e-16])
    else:
        grid = EXTREMES
    plain = make_calibrator(method, {}).fit(f, y, w).predict(grid)
    bounded = make_calibrator(method, {"bound": "laplace"}).fit(f, y, w)
    p = bounded.predict(grid)
    np.testing.assert_array_equal(p, np.clip(plain, 1 / 152, 151 / 152))
    assert np.all((p > 0) & (p < 1))
    again = load_calibrator(method, bounded.params, bounded.state())
    np.testing.assert_array_equal(again.predict(grid), p)


def test_weighted_bound_uses_the_effective_size() -> None:
    f, y, _ = margins(3, 100)
    w = np.where(np.arange(100) % 2 == 0, 3.0, 1.0)
    bound = make_calibrator("isotonic", {"bound": "laplace"}).fit(f, y, w).state()["bound"]
    n = w.sum() ** 2 / (w**2).sum()  # 80 points' worth
    np.testing.assert_allclose(bound, [1 / (n + 2), (n + 1) / (n + 2)], rtol=1e-14)


@pytest.mark.parametrize("cls", [TemperatureScaling, BostromCalibrator])
def test_multiclass_rows_stay_probabilities_and_above_the_floor(
    cls: type[TemperatureScaling] | type[BostromCalibrator],
) -> None:
    rng = np.random.default_rng(4)
    n, k = 120, 4
    logits = rng.normal(scale=4.0, size=(n, k))
    y = rng.integers(0, k, size=n)
    P = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    P[:5] = np.eye(k)[y[:5]]  # rows with exact zeros and ones
    plain = cls.from_params({}).fit(P, y, np.ones(n))
    bounded = cls.from_params({"bound": "laplace"}).fit(P, y, np.ones(n))
    p, q = bounded.predict(P), plain.predict(P)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    floor = 1 / (n + k)
    assert p.min() >= 1 / (n + 2 * k)  # raised to the floor, then renormalised
    assert p.max() < 1.0
    # rows that never fell below the floor are unchanged
    untouched = (q >= floor).all(axis=1)
    assert untouched.any()
    np.testing.assert_allclose(p[untouched], q[untouched], rtol=1e-12)
    assert bounded.state()["bound"][0] == pytest.approx(floor, rel=1e-14)


def test_the_state_must_agree_with_the_params() -> None:
    f, y, w = margins(5, 50)
    state = make_calibrator("platt", {"bound": "laplace"}).fit(f, y, w).state()
    with pytest.raises(StateError, match=r"params\.bound is 'none'"):
        load_calibrator("platt", {}, state)
    without = {key: value for key, value in state.items() if key != "bound"}
    with pytest.raises(StateError, match=r"state\.bound: missing"):
        load_calibrator("platt", {"bound": "laplace"}, without)
    with pytest.raises(StateError, match=r"0 < low <= 0\.5 <= high < 1"):
        load_calibrator("platt", {"bound": "laplace"}, {**state, "bound": [0.0, 1.0]})
    with pytest.raises(ParamError, match=r"params\.bound: must be one of none, laplace"):
        OutputBound.from_params({"bound": "wilson"})
