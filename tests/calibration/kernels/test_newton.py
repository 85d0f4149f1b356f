"""The Newton solver over many blocks of points (:data:`~app.calibration.kernels.newton.
BLOCK`): the same minimiser as statsmodels' weighted logistic GLM, a vanishing gradient with a
ridge and fractional targets, and the same steps as one pass over all the points (the order of
the sums is the only thing blocks change)."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.special import expit

from app.calibration.kernels.newton import BLOCK, fit_logistic


def _batch(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x, z = rng.normal(size=n), rng.normal(size=n)
    weight = rng.random(n) + 0.5
    positive = rng.random(n) < 1.0 / (1.0 + np.exp(-(1.5 * x - 0.5 * z + 0.3)))
    return x, z, weight, weight * positive


@pytest.mark.parametrize("n", [BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 17])
def test_a_fit_over_blocks_is_statsmodels_weighted_glm(n: int) -> None:
    x, z, weight, target = _batch(n, seed=n)
    fit = fit_logistic([x, z], weight, target, np.zeros(3))
    design = np.column_stack([x, z, np.ones(n)])
    glm = sm.GLM(target / weight, design, family=sm.families.Binomial(), var_weights=weight)
    result = glm.fit(tol=1e-12, tol_criterion="params", maxiter=100)
    assert result.converged
    np.testing.assert_allclose(fit.theta, result.params, rtol=1e-9, atol=1e-11)


def test_with_a_ridge_and_fractional_targets_the_gradient_vanishes() -> None:
    """Pooled points carry fractional targets (0 <= t <= w) and beta a ridge: at the fit, the
    penalised loss's gradient, computed here from its formula, is zero to rounding."""
    n = 2 * BLOCK + 999
    x, z, weight, _ = _batch(n, seed=9)
    target = weight * np.random.default_rng(10).random(n)
    ridge = np.array([0.5, 2.0, 0.0])
    theta = fit_logistic([x, z], weight, target, np.zeros(3), ridge=ridge).theta
    design = np.column_stack([x, z, np.ones(n)])
    gradient = design.T @ (weight * expit(design @ theta) - target) + ridge * theta
    assert np.max(np.abs(gradient)) < 1e-8 * weight.sum()


def test_blocks_change_only_the_order_of_the_sums() -> None:
    """The points of several blocks, fitted in one block (a larger BLOCK), take the same
    Newton steps to the same coefficients up to rounding (rtol 1e-13); the same points in
    another order too."""
    x, z, weight, target = _batch(2 * BLOCK + 5, seed=3)
    blocked = fit_logistic([x, z], weight, target, np.zeros(3))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("app.calibration.kernels.newton.BLOCK", 4 * BLOCK)
        whole = fit_logistic([x, z], weight, target, np.zeros(3))
    assert blocked.n_iter == whole.n_iter
    np.testing.assert_allclose(blocked.theta, whole.theta, rtol=1e-13)
    order = np.random.default_rng(4).permutation(x.size)
    shuffled = fit_logistic([x[order], z[order]], weight[order], target[order], np.zeros(3))
    np.testing.assert_allclose(shuffled.theta, blocked.theta, rtol=1e-12)


def test_inputs_of_different_lengths_are_refused() -> None:
    x, z, weight, target = _batch(BLOCK + 3, seed=1)
    with pytest.raises(ValueError, match="one length"):
        fit_logistic([x, z[:-1]], weight, target, np.zeros(3))
