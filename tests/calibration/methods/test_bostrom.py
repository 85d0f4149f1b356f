"""Boström's correction: the closed-form constant, the sigmoid, and the paper's properties."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from app.calibration import CalibrationError
from app.calibration.measures.multiclass_metrics import accuracy, multiclass_brier
from app.calibration.methods.bostrom import BostromCalibrator


def _forest_like(seed: int, n: int = 500, k: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Under-confident probability rows (a forest's averaged votes): the truth is sharper."""
    rng = np.random.default_rng(seed)
    sharp = rng.dirichlet(np.full(k, 0.3), size=n)
    y = (rng.random((n, 1)) > np.cumsum(sharp, axis=1)).sum(axis=1).clip(0, k - 1)
    P = 0.5 * sharp + 0.5 / k  # pulled towards uniform
    P[0] = np.full(k, 1.0 / k)  # a full tie: the first class counts as the top
    return P, y, rng.uniform(0.0, 2.0, size=n)


def _corrected(P: np.ndarray, r: float) -> np.ndarray:
    """The paper's correction with a constant r, written out row by row."""
    out = P * (1 - r)
    out[np.arange(len(P)), P.argmax(axis=1)] += r
    return out


@pytest.mark.parametrize("weighted", [False, True])
def test_constant_r_is_the_brier_minimiser(weighted: bool) -> None:
    P, y, w = _forest_like(1)
    sw = w if weighted else np.ones(len(y))
    fitted = BostromCalibrator("constant").fit(P, y, sw)
    reference = minimize_scalar(
        lambda r: multiclass_brier(_corrected(P, r), y, sw),
        bounds=(0, 1),
        method="bounded",
        options={"xatol": 1e-12},
    )
    assert 0.0 < fitted.r < 1.0
    assert fitted.r == pytest.approx(reference.x, abs=1e-7)
    np.testing.assert_allclose(fitted.predict(P), _corrected(P, fitted.r), atol=1e-15)


def test_constant_r_clips_to_zero_for_overconfident_rows() -> None:
    rng = np.random.default_rng(2)
    P = rng.dirichlet(np.full(3, 0.2), size=300)
    y = rng.integers(0, 3, size=300)  # labels unrelated to P: the best r would be negative
    assert BostromCalibrator("constant").fit(P, y, np.ones(300)).r == 0.0


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_sigmoid_is_no_worse_than_constant_and_keeps_the_arg_max(seed: int) -> None:
    P, y, w = _forest_like(seed)
    constant = BostromCalibrator("constant").fit(P, y, w)
    sigmoid = BostromCalibrator().fit(P, y, w)
    assert sigmoid.a >= 0.0
    brier = {c.mode: multiclass_brier(c.predict(P), y, w) for c in (constant, sigmoid)}
    assert brier["sigmoid"] <= brier["constant"] + 1e-12
    assert brier["constant"] < multiclass_brier(P, y, w)
    for c in (constant, sigmoid):
        Q = c.predict(P)
        np.testing.assert_allclose(Q.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        assert np.all((Q >= 0) & (Q <= 1))
        np.testing.assert_array_equal(Q.argmax(axis=1), P.argmax(axis=1))
        assert accuracy(Q, y, w) == accuracy(P, y, w)
    assert sigmoid.predict(P)[0, 0] > 0.25  # the tied row: the first class is boosted


def test_rejects_rows_that_are_not_probability_vectors() -> None:
    P = np.array([[0.5, 0.5], [0.7, 0.4], [1.2, -0.2]])
    reason = "is not a probability vector; bostrom needs rows in [0,1] summing to 1"
    with pytest.raises(CalibrationError) as info:
        BostromCalibrator().fit(P, np.array([0, 1, 0]), np.ones(3))
    assert (info.value.loc, info.value.reason) == (("scores", 1), reason)
    assert str(info.value) == f"scores[1]: {reason}"
    fitted = BostromCalibrator().fit(P[:1], np.array([0]), np.ones(1))
    with pytest.raises(CalibrationError, match=r"^scores\[2\]: ") as info:
        fitted.predict(P[[0, 0, 2]])
    assert info.value.loc == ("scores", 2)
