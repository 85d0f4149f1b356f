"""Weighted logistic regression on a few features: one Newton solver for Platt and beta.

Lin, Lin & Weng (2007), *A note on Platt's probabilistic outputs for support vector machines*,
Algorithm 1: Newton steps on the Hessian plus a small ridge, with Armijo backtracking, and a
loss evaluated so that exp() never overflows. Platt scaling (one feature, the score) and beta
calibration (two features, ln f and -ln(1 - f), with betacal's negligible ridge on the slopes)
both minimise

    L(theta) = sum_i w_i log(1 + e^eta_i) - t_i eta_i + 1/2 sum_j ridge_j theta_j^2,
    eta_i = theta_0 x_i0 + ... + theta_{p-1} x_i,p-1 + theta_p           (intercept last)

over pooled points: ``w_i`` the summed weight of a distinct feature vector and ``t_i`` the
summed weight times target of its points (0 <= t_i <= w_i), so the fitted probability of a
positive is expit(eta). Work is vectorised over points, a block of :data:`BLOCK` points at a
time in buffers allocated once; each Newton step (a handful) is one pass over the blocks for
the loss, gradient and Hessian together, and a backtracked candidate of the line search one
pass for its loss alone. Beyond its float64 inputs a fit's memory does not grow with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.calibration.base import FloatArray

GRADIENT_TOL = 1e-10
"""Stop once every gradient component is this small (Lin, Lin & Weng use 1e-5; Newton's
quadratic convergence makes the tighter rule cost at most a step more)."""
_DECREASE_RTOL = 1e-14  # below this the summed loss cannot resolve the Newton decrease
_HESSIAN_RIDGE = 1e-12  # sigma added to the Hessian's diagonal (Lin, Lin & Weng, Algorithm 1)
_ARMIJO = 1e-4
_MIN_STEP = 1e-10
BLOCK = 1 << 15
"""Points per block of each pass (loss, gradient and Hessian in one): six buffers of 256 KiB, small
enough for the processor's caches with the inputs' slices (~2 MiB). Whole-length ones (seven)
took 320 MB at the peak of a one-feature fit of 6 x 10^6 points, now 1.5 MB, and the fit takes
0.97 s instead of 1.54 s (0.121 s against 0.242 s at 10^6; three Newton steps, best of five runs
of each, interleaved). Up to this many points a pass is one block and the fit is the same bit
for bit; beyond, the sums' order moves its last bits (a few ulps)."""


@dataclass(frozen=True)
class LogisticFit:
    """The minimiser found: coefficients (one per feature, intercept last) and steps taken."""

    theta: FloatArray
    n_iter: int


def fit_logistic(
    features: Sequence[FloatArray],
    weight: FloatArray,
    target: FloatArray,
    theta0: FloatArray,
    *,
    ridge: FloatArray | None = None,
    max_iter: int = 100,
) -> LogisticFit:
    """Minimise L(theta) above from ``theta0`` by Newton's method with backtracking.

    Parameters
    ----------
    features : sequence of p arrays of length m
        The feature columns of the m pooled points (the intercept is added here).
    weight, target : ndarray of length m
        Summed weights and summed weights times targets (0 <= target <= weight). The
        tolerances are absolute, so the callers pass weights rescaled to a mean of 1 per point
        (from :func:`~app.calibration.kernels.weights.relative_weights`, which keeps subnormal or
        huge weights from underflowing or overflowing on the way).
    theta0 : ndarray of length p + 1
        The starting point (intercept last).
    ridge : ndarray of length p + 1, optional
        The penalty 1/2 ridge_j theta_j^2 (none by default).
    max_iter : int
        Newton steps at most.

    Notes
    -----
    Stops when the gradient is below :data:`GRADIENT_TOL`, or when the predicted decrease
    -g.d is below the floating-point resolution of the summed loss: the line search would
    then backtrack on rounding noise (measured: 26 s on 10^7 tied scores before this rule),
    and that last full Newton step is taken without it.
    """
    x = [np.asarray(column, dtype=np.float64) for column in features]
    if target.size != weight.size or any(column.size != weight.size for column in x):
        raise ValueError("the features, weight and target must have one length")
    p = len(x)
    penalty = np.zeros(p + 1) if ridge is None else np.asarray(ridge, dtype=np.float64)
    size = min(BLOCK, weight.size)
    buffers = [np.empty(size) for _ in range(6)]

    def dot(u: FloatArray, v: FloatArray) -> float:
        # einsum, not BLAS: waking OpenBLAS's threads for each of these short dot products
        # costs more than the product itself (several times more on a busy machine)
        return float(np.einsum("i,i->", u, v))

    def evaluate(
        theta: FloatArray, derivatives: bool = True
    ) -> tuple[float, FloatArray, FloatArray]:
        """L(theta), its gradient and its Hessian, one block of points at a time; without
        ``derivatives`` the loss alone (the two others then hold only the penalty's terms)."""
        total = 0.0
        gradient = penalty * theta
        hessian = np.zeros((p + 1, p + 1))
        hessian[np.diag_indices(p + 1)] += penalty + _HESSIAN_RIDGE
        for start in range(0, weight.size, BLOCK):
            block = slice(start, start + BLOCK)
            w, t, columns = weight[block], target[block], [column[block] for column in x]
            eta, e, relu, work, g, d2 = (buffer[: w.size] for buffer in buffers)
            eta.fill(theta[p])
            for j in range(p):
                np.multiply(columns[j], theta[j], out=work)
                np.add(eta, work, out=eta)
            np.abs(eta, out=e)
            np.negative(e, out=e)
            np.exp(e, out=e)
            # w log(1 + e^eta) - t eta = w log1p(e^-|eta|) + (w - t) max(eta, 0) - t min(eta, 0):
            # a sum of non-negative terms, so nothing cancels and nothing overflows.
            np.log1p(e, out=work)
            np.maximum(eta, 0.0, out=relu)
            np.subtract(w, t, out=d2)  # d2 is free until the derivatives
            positive = dot(w, work) + dot(d2, relu)
            np.minimum(eta, 0.0, out=work)
            total += positive - dot(t, work)
            if not derivatives:
                continue
            # the derivatives in eta: e q^2 = expit(eta)(1 - expit(eta)) with q = 1 / (1 +
            # e^-|eta|), either sign, and expit(eta) = e^min(eta, 0) q, branch-free
            np.add(e, 1.0, out=work)
            np.divide(1.0, work, out=work)
            np.multiply(e, work, out=d2)
            np.multiply(d2, work, out=d2)
            np.multiply(d2, w, out=d2)  # d2L/deta2
            np.subtract(relu, eta, out=g)  # -min(eta, 0)
            np.negative(g, out=g)
            np.exp(g, out=g)
            np.multiply(g, work, out=g)
            np.multiply(g, w, out=g)
            np.subtract(g, t, out=g)  # dL/deta
            with_ones = [*columns, None]  # None: the intercept's column of ones
            for j, cj in enumerate(with_ones):
                gradient[j] += float(g.sum()) if cj is None else dot(cj, g)
                weighted = d2 if cj is None else np.multiply(cj, d2, out=work)
                for k in range(j, p + 1):
                    ck = with_ones[k]
                    term = float(weighted.sum()) if ck is None else dot(ck, weighted)
                    hessian[j, k] += term
                    if k != j:
                        hessian[k, j] += term
        return total + 0.5 * float(penalty @ (theta * theta)), gradient, hessian

    theta = np.array(theta0, dtype=np.float64)
    value, gradient, hessian = evaluate(theta)
    for iteration in range(max_iter):
        if np.max(np.abs(gradient)) < GRADIENT_TOL:
            return LogisticFit(theta, iteration)
        try:
            step = -np.linalg.solve(hessian, gradient)
        except np.linalg.LinAlgError:
            return LogisticFit(theta, iteration)
        decrease = float(gradient @ step)  # g.d < 0 for a descent direction
        if not np.isfinite(decrease) or decrease >= 0.0:
            return LogisticFit(theta, iteration)
        if -decrease < _DECREASE_RTOL * max(1.0, abs(value)):
            # The loss can no longer tell this step from rounding noise, so Armijo cannot judge
            # it; near the optimum a full Newton step is the most accurate point there is.
            return LogisticFit(theta + step, iteration + 1)
        length = 1.0
        while length >= _MIN_STEP:
            candidate = theta + length * step
            # the full step is all but always taken: its pass has the derivatives too
            new_value, new_gradient, new_hessian = evaluate(candidate, length == 1.0)
            if new_value < value + _ARMIJO * length * decrease:  # Armijo condition
                if length < 1.0:
                    new_value, new_gradient, new_hessian = evaluate(candidate)
                theta, value, gradient, hessian = candidate, new_value, new_gradient, new_hessian
                break
            length /= 2.0
        else:  # the line search failed: no representable decrease left
            return LogisticFit(theta, iteration)
    return LogisticFit(theta, max_iter)
