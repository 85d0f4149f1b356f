"""Beta calibration against betacal (the authors' implementation) and a tight optimiser."""

from __future__ import annotations

import numpy as np
import pytest
from betacal import BetaCalibration
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from app.calibration import BetaCalibrator, CalibrationError, ParamError, require_open_unit_interval


def _distorted(seed: int, n: int = 2000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.01, 0.99, n)
    s = q**3 / (q**3 + (1 - q) ** 0.5)  # asymmetric: beta's family, not a sigmoid of s
    y = (rng.random(n) < q).astype(np.float64)
    return s, y, rng.uniform(0.1, 3.0, n)


def _features(s: np.ndarray) -> np.ndarray:
    return np.column_stack([np.log(s), -np.log1p(-s)])


@pytest.mark.parametrize("weighted", [False, True])
def test_matches_betacal_recipe(weighted: bool) -> None:
    s, y, w = _distorted(0)
    weights = w if weighted else np.ones_like(s)
    fitted = BetaCalibrator().fit(s, y, weights)
    # betacal's own recipe (C = 99999999999) solved to convergence: the same optimum to 1e-6
    tight = LogisticRegression(
        C=99999999999, tol=1e-12, max_iter=10_000, solver="newton-cholesky"
    ).fit(_features(s), y, sample_weight=weights)
    np.testing.assert_allclose([fitted.a, fitted.b], tight.coef_[0], atol=1e-6)
    assert fitted.c == pytest.approx(tight.intercept_[0], abs=1e-6)
    # betacal itself stops lbfgs at its default tolerance, so it is ~1e-4 off that optimum
    reference = BetaCalibration(parameters="abm").fit(s, y, sample_weight=weights)
    grid = np.linspace(0.0, 1.0, 1001)
    np.testing.assert_allclose(fitted.predict(grid), reference.predict(grid), atol=1e-3)


def test_drops_a_negative_slope_as_betacal_does() -> None:
    rng = np.random.default_rng(0)
    s = rng.uniform(0.001, 0.999, 3000)
    # U-shaped: more positives near 0 than in the middle, so the ln f slope comes out negative
    y = (rng.random(3000) < 0.15 + 0.7 * s**3 + 0.4 * (1 - s) ** 12).astype(np.float64)
    fitted = BetaCalibrator().fit(s, y, np.ones(3000))
    reference = BetaCalibration(parameters="abm").fit(s, y)
    assert reference.calibrator_.map_[0] == 0  # betacal dropped ln f
    assert fitted.a == 0.0
    assert fitted.b > 0.0
    np.testing.assert_allclose(fitted.predict(s), reference.predict(s), atol=1e-3)


def test_formula_and_extreme_scores_at_predict_time() -> None:
    calibrator = BetaCalibrator.from_state({}, {"a": 2.0, "b": 0.5, "c": -0.3})
    f = np.array([0.01, 0.3, 0.9])
    expected = 1 / (1 + 1 / (np.exp(-0.3) * f**2.0 / (1 - f) ** 0.5))
    np.testing.assert_allclose(calibrator.predict(f), expected, rtol=1e-12)
    eps = np.finfo(np.float64).eps
    extremes = calibrator.predict(np.array([0.0, 1.0, -5.0, 7.0]))
    np.testing.assert_allclose(
        extremes, calibrator.predict(np.array([eps, 1 - eps, eps, 1 - eps])), rtol=0
    )
    assert np.all((extremes > 0) & (extremes < 1))
    assert np.all(np.isfinite(expit(extremes)))


@pytest.mark.parametrize(("bad", "text"), [(0, "0.0"), (17, "1.0"), (3, "-0.5")])
def test_fit_names_the_first_score_outside_the_open_interval(bad: int, text: str) -> None:
    s, y, w = _distorted(1, 40)
    s[bad] = float(text)
    reason = f"is {text}; beta calibration needs scores strictly between 0 and 1"
    with pytest.raises(CalibrationError) as info:
        BetaCalibrator().fit(s, y, w)
    assert (info.value.loc, info.value.reason) == (("scores", bad), reason)
    assert str(info.value) == f"scores[{bad}]: {reason}"
    with pytest.raises(CalibrationError, match=r"^scores\[0\]: is 2.0; minmax"):
        require_open_unit_interval(np.array([2.0]), "minmax")
    with pytest.raises(CalibrationError, match=r"^scores\[1\]\[0\]: is 1.0; beta") as info:
        require_open_unit_interval(np.array([[0.5, 0.5], [1.0, 0.0]]), "beta")
    assert info.value.loc == ("scores", 1, 0)


def test_single_class_and_identical_scores_still_fit() -> None:
    s = np.full(5, 0.3)
    for y in (np.ones(5), np.zeros(5), np.array([0, 1, 0, 1, 1.0])):
        p = BetaCalibrator().fit(s, y, np.ones(5)).predict(np.array([1e-300, 0.3, 0.999]))
        assert np.all((p >= 0) & (p <= 1))
    p = BetaCalibrator().fit(s, np.array([0, 1, 0, 1, 1.0]), np.ones(5)).predict(s)
    np.testing.assert_allclose(p, 0.6, atol=1e-6)


def test_only_the_bound_is_a_param() -> None:
    assert BetaCalibrator.from_params({}).params == {}
    assert BetaCalibrator.from_params({"bound": "laplace"}).params == {"bound": "laplace"}
    with pytest.raises(ParamError, match=r"params\.parameters: unknown parameter; expected one"):
        BetaCalibrator.from_params({"parameters": "abm"})
