"""The Newton solver over many blocks of points (:data:`~app.calibration.kernels.newton.
BLOCK`): the same minimiser as statsmodels' weighted logistic GLM, and, up to one block, the
same bits as a single pass (the order of the sums is the only thing blocks change)."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm

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
    reference = glm.fit(tol=1e-14, maxiter=100).params
    np.testing.assert_allclose(fit.theta, reference, rtol=1e-9, atol=1e-11)


def test_blocks_change_only_the_order_of_the_sums() -> None:
    """The points of several blocks, fitted in one block (a larger BLOCK), give the same
    coefficients to a few ulps; the same points in another order too."""
    x, z, weight, target = _batch(2 * BLOCK + 5, seed=3)
    blocked = fit_logistic([x, z], weight, target, np.zeros(3)).theta
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("app.calibration.kernels.newton.BLOCK", 4 * BLOCK)
        whole = fit_logistic([x, z], weight, target, np.zeros(3)).theta
    np.testing.assert_allclose(blocked, whole, rtol=1e-13)
    order = np.random.default_rng(4).permutation(x.size)
    shuffled = fit_logistic([x[order], z[order]], weight[order], target[order], np.zeros(3))
    np.testing.assert_allclose(shuffled.theta, blocked, rtol=1e-12)
