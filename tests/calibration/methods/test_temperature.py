"""Temperature scaling against scikit-learn's and a known temperature."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp
from sklearn.calibration import _TemperatureScaling

from app.calibration import ParamError
from app.calibration.methods.temperature import TemperatureScaling
from tests.calibration.methods.test_multiclass import logit_batch, sklearn_calibrated


@pytest.mark.parametrize("k", [3, 6])
def test_matches_sklearn_on_logits(k: int) -> None:
    z, y, w = logit_batch(k, n=500, k=k)
    ours = TemperatureScaling().fit(z, y, w)
    assert ours.input == "logits"
    np.testing.assert_allclose(
        ours.predict(z), sklearn_calibrated("temperature", z, y, proba=False), rtol=0, atol=1e-4
    )


@pytest.mark.filterwarnings("ignore:Since FrozenEstimator does not appear to accept sample_weight")
def test_matches_sklearn_on_probabilities_with_weights() -> None:
    z, y, _ = logit_batch(7, n=500, k=4)
    P = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)  # smallest entries ~1e-6 >> 1e-12
    w = np.random.default_rng(7).uniform(0.1, 3.0, size=y.size)
    ours = TemperatureScaling().fit(P, y, w)
    assert ours.input == "probabilities"
    theirs = sklearn_calibrated("temperature", P, y, w, proba=True)
    np.testing.assert_allclose(ours.predict(P), theirs, rtol=0, atol=1e-4)


def test_recovers_the_generating_temperature() -> None:
    z, y, w = logit_batch(11, n=20_000, k=5, T0=2.5)
    T = TemperatureScaling().fit(z, y, w).T
    np.testing.assert_allclose(T, 2.5, rtol=0.05)


def test_is_the_minimiser_of_the_weighted_log_loss() -> None:
    z, y, _ = logit_batch(12, n=300, k=3)
    w = np.random.default_rng(12).uniform(0.0, 2.0, size=y.size)

    def loss(log_T: float) -> float:
        s = z / np.exp(log_T)
        return float(w @ (logsumexp(s, axis=1) - s[np.arange(y.size), y]))

    reference = minimize_scalar(loss, bounds=(-10, 10), method="bounded", options={"xatol": 1e-12})
    assert np.log(TemperatureScaling().fit(z, y, w).T) == pytest.approx(reference.x, abs=1e-6)


def test_bounds_and_stability() -> None:
    # perfectly separable: the loss falls as T -> 0 until it is flat in float64, where bounded
    # Brent stops; the same minimize_scalar call as scikit-learn's, so the same T
    z = np.array([[2.0, 0.0], [0.0, 2.0], [3.0, 1.0]])
    y = np.array([0, 1, 0])
    ts = TemperatureScaling().fit(z, y, np.ones(3))
    np.testing.assert_allclose(ts.T, 1.0 / _TemperatureScaling().fit(z, y).beta_, rtol=1e-9)
    assert ts.T < 0.05
    # anti-correlated: T at the upper bound exp(10) (to Brent's tolerance), as scikit-learn's
    ts.fit(z, 1 - y, np.ones(3))
    np.testing.assert_allclose(ts.T, 1.0 / _TemperatureScaling().fit(z, 1 - y).beta_, rtol=1e-9)
    np.testing.assert_allclose(ts.T, np.exp(10.0), rtol=1e-6)
    p = ts.predict(np.array([[1e308, -1e308], [0.0, 0.0]]))
    assert np.all(np.isfinite(p))
    np.testing.assert_allclose(p.sum(axis=1), 1.0)


def test_takes_only_the_bound() -> None:
    assert TemperatureScaling.from_params({}).params == {}
    assert TemperatureScaling.from_params({"bound": "laplace"}).params == {"bound": "laplace"}
    with pytest.raises(ParamError, match="unknown parameter; expected one of bound"):
        TemperatureScaling.from_params({"T": 1.0})
