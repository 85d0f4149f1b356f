"""Platt scaling against a tightly converged optimiser, scikit-learn, and extreme scores."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.calibration import _SigmoidCalibration
from sklearn.linear_model import LogisticRegression

from app.calibration import ParamError, PlattCalibrator
from app.calibration.kernels.newton import fit_logistic
from app.calibration.kernels.pooling import pool_ties
from tests.calibration.batches import random_weights, sigmoid_batch


def _reference_fit(f: np.ndarray, t: np.ndarray, w: np.ndarray) -> np.ndarray:
    """argmin over (A, B) of the weighted cross-entropy against targets t, to gtol 1e-12."""

    def loss(ab: np.ndarray) -> float:
        p = expit(-(ab[0] * f + ab[1]))
        return float(-(w @ (t * np.log(p) + (1 - t) * np.log(1 - p))))

    def grad(ab: np.ndarray) -> np.ndarray:
        r = w * (t - expit(-(ab[0] * f + ab[1])))
        return np.array([r @ f, r.sum()])

    def hess(ab: np.ndarray) -> np.ndarray:
        p = expit(-(ab[0] * f + ab[1]))
        h = w * p * (1 - p)
        return np.array([[h @ f**2, h @ f], [h @ f, h.sum()]])

    result = minimize(
        loss, np.zeros(2), jac=grad, hess=hess, method="trust-exact", options={"gtol": 1e-12}
    )
    ab = np.asarray(result.x)
    for _ in range(3):  # polish: trust-exact may stop once it cannot predict an improvement
        ab = ab - np.linalg.solve(hess(ab), grad(ab))
    assert np.max(np.abs(grad(ab))) < 1e-9 * max(1.0, w.sum())  # converged to rounding
    return ab


def _platt_targets(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    n_pos, n_neg = w @ y, w @ (1 - y)
    return np.where(y > 0, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n", [12, 200, 5000])
def test_smoothed_targets_reach_the_optimum(n: int, weighted: bool) -> None:
    rng = np.random.default_rng(n)
    f, y, w = sigmoid_batch(rng, n, decimals=2)
    if weighted:
        w = random_weights(rng, n)
    calibrator = PlattCalibrator().fit(f, y, w)
    A, B = _reference_fit(f, _platt_targets(y, w), w)
    np.testing.assert_allclose([calibrator.A, calibrator.B], [A, B], rtol=0, atol=1e-6)


@pytest.mark.parametrize("weighted", [False, True])
def test_probabilities_match_sklearn_sigmoid_calibration(weighted: bool) -> None:
    rng = np.random.default_rng(11)
    f, y, w = sigmoid_batch(rng, 800, spread=40.0, slope=0.05)  # sklearn rescales |f| >= 30
    if weighted:
        w = random_weights(rng, 800)
    ours = PlattCalibrator().fit(f, y, w)
    reference = _SigmoidCalibration().fit(f, y, sample_weight=w if weighted else None)
    grid = np.linspace(-200, 200, 401)
    assert np.max(np.abs(ours.predict(grid) - reference.predict(grid))) < 1e-4


def test_hard_targets_equal_unregularised_logistic_regression() -> None:
    rng = np.random.default_rng(5)
    f, y, _ = sigmoid_batch(rng, 3000)
    w = random_weights(rng, 3000, zero_fraction=0.0)
    ours = PlattCalibrator.from_params({"targets": "hard"}).fit(f, y, w)
    reference = LogisticRegression(C=np.inf, solver="newton-cholesky", tol=1e-12, max_iter=1000)
    reference.fit(f.reshape(-1, 1), y, sample_weight=w)
    # p = expit(coef f + intercept) = 1 / (1 + exp(A f + B))
    expected = [-reference.coef_[0, 0], -reference.intercept_[0]]
    np.testing.assert_allclose([ours.A, ours.B], expected, rtol=0, atol=1e-6)


def test_pooled_fit_equals_unpooled() -> None:
    rng = np.random.default_rng(2)
    f, y, w = sigmoid_batch(rng, 4000, decimals=1)
    pooled = PlattCalibrator().fit(f, y, w)
    assert np.unique(f).size < 100  # heavy ties: pooling does real work
    # the same Newton solver, one point per score (no pooling), on the same scaled scores
    n_pos, n_neg = y.sum(), (1 - y).sum()
    t = np.where(y > 0, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    scale = np.max(np.abs(f))
    start = np.array([0.0, -np.log((n_neg + 1) / (n_pos + 1))])
    minus_a, minus_b = fit_logistic([f / scale], w, w * t, start).theta  # expit(-(a x + b))
    np.testing.assert_allclose([pooled.A, pooled.B], [-minus_a / scale, -minus_b], atol=1e-9)
    unique, weight, positive = pool_ties(f, y, w)
    np.testing.assert_array_equal(unique, np.unique(f))
    assert weight.sum() == w.sum()
    assert positive.sum() == y.sum()


@pytest.mark.parametrize("magnitude", [1e3, 1e100, 1e300])
def test_huge_scores_fit_without_warnings(magnitude: float) -> None:
    rng = np.random.default_rng(0)
    f, y, w = sigmoid_batch(rng, 500)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = PlattCalibrator().fit(f * magnitude, y, w)
        p = big.predict(np.array([-1e308, -magnitude, 0.0, magnitude, 1e308]))
    assert np.isfinite([big.A, big.B]).all()
    assert np.all((p >= 0) & (p <= 1))
    # scale invariance: A f is the same sigmoid as on the unscaled scores
    small = PlattCalibrator().fit(f, y, w)
    np.testing.assert_allclose([big.A * magnitude, big.B], [small.A, small.B], rtol=1e-9)
    np.testing.assert_allclose(big.predict(f * magnitude), small.predict(f), atol=1e-12)


def test_predict_saturates_without_overflow() -> None:
    calibrator = PlattCalibrator.from_state({}, {"A": -1e300, "B": 1e308, "n_iter": 0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = calibrator.predict(np.array([-1e308, 0.0, 1e308]))
    np.testing.assert_array_equal(p, [0.0, 0.0, 1.0])


def test_single_class_fits_a_constant_near_platts_target() -> None:
    f = np.linspace(-1, 1, 9)
    calibrator = PlattCalibrator().fit(f, np.zeros(9), np.ones(9))
    # all targets are 1 / (N- + 2) = 1/11: the best sigmoid is that constant
    np.testing.assert_allclose(calibrator.predict(f), 1 / 11, atol=1e-6)
    hard = PlattCalibrator.from_params({"targets": "hard"}).fit(f, np.ones(9), np.ones(9))
    assert np.isfinite([hard.A, hard.B]).all()
    assert hard.predict(f).min() > 0.999


def test_separable_hard_targets_stay_finite() -> None:
    f = np.arange(10.0)
    y = (f >= 5).astype(float)
    calibrator = PlattCalibrator.from_params({"targets": "hard", "max_iter": 10_000}).fit(
        f, y, np.ones(10)
    )
    assert np.isfinite([calibrator.A, calibrator.B]).all()
    assert calibrator.n_iter < 10_000
    p = calibrator.predict(f)
    assert p[:5].max() < 1e-3
    assert p[5:].min() > 1 - 1e-3


def test_is_strictly_monotone_so_auc_is_kept() -> None:
    rng = np.random.default_rng(9)
    f, y, w = sigmoid_batch(rng, 300)
    p = PlattCalibrator().fit(f, y, w).predict(np.sort(f))
    assert np.all(np.diff(p) >= 0)
    assert np.unique(p).size == np.unique(f).size


def test_max_iter_bounds_the_newton_steps() -> None:
    rng = np.random.default_rng(4)
    f, y, w = sigmoid_batch(rng, 300)
    assert PlattCalibrator.from_params({"max_iter": 1}).fit(f, y, w).n_iter == 1


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"targets": "soft"}, "targets"),
        ({"targets": 1}, "targets"),
        ({"max_iter": 0}, "max_iter"),
        ({"max_iter": 10_001}, "max_iter"),
        ({"max_iter": True}, "max_iter"),
        ({"max_iter": 5.0}, "max_iter"),
        ({"trim": "median"}, "trim"),
    ],
)
def test_bad_params_name_the_key(params: dict[str, object], field: str) -> None:
    with pytest.raises(ParamError) as info:
        PlattCalibrator.from_params(params)
    assert info.value.field == field


def test_unknown_param_lists_the_known_ones() -> None:
    with pytest.raises(ParamError, match=r"unknown parameter; expected one of targets, max_iter"):
        PlattCalibrator.from_params({"C": 1})


def test_params_report_defaults() -> None:
    assert PlattCalibrator.from_params({}).params == {"targets": "platt", "max_iter": 100}
