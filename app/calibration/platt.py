"""Platt scaling: a sigmoid of the raw score, fitted by maximum likelihood.

Niculescu-Mizil & Caruana, *Predicting Good Probabilities With Supervised Learning*, eqs. (1)-(4);
fitted with the Newton method with backtracking line search of Lin, Lin & Weng (2007),
*A note on Platt's probabilistic outputs for support vector machines*.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np
from scipy.special import expit

from app.calibration.base import (
    FloatArray,
    JSONValue,
    check_param_keys,
    check_state_keys,
    choice_param,
    int_param,
    pool_ties,
    state_float,
    state_int,
)
from app.calibration.trimming import TRIM_KEYS, TrimSpec, read_trim_state, trim_batch, trim_state

TARGETS = ("platt", "hard")
# Lin, Lin & Weng stop at |gradient| < 1e-5, which leaves A and B ~1e-5 off the optimum on a
# small batch; Newton converges quadratically, so 1e-8 costs at most a step more.
_GRADIENT_TOL = 1e-8
_DECREASE_RTOL = 1e-14  # below this the summed loss cannot resolve the Newton decrease
_MIN_STEP = 1e-10
_SIGMA = 1e-12  # ridge added to the Hessian (Lin, Lin & Weng, Algorithm 1)
_ARMIJO = 1e-4
_WARM_START_MIN = 1 << 17  # pooled points from which Newton starts from a subsample's optimum
_WARM_START_SIZE = 1 << 14


class PlattCalibrator:
    """p(f) = 1 / (1 + exp(A f + B)), A and B minimising the weighted cross-entropy.

    Parameters
    ----------
    targets : {"platt", "hard"}, default "platt"
        ``"platt"``: Platt's smoothed targets t+ = (N+ + 1)/(N+ + 2) for positives and
        t- = 1/(N- + 2) for negatives (*Predicting Good Probabilities*, eq. 4), where N+ and
        N- are the *weighted* class counts (the sum of the sample weights of each class, as
        scikit-learn does), so they scale with the weights. ``"hard"``: the labels 0/1.
    max_iter : int in 1..10000, default 100
        Newton iterations at most.
    trim, trim_tau_min, trim_grid, trim_center, trim_loss, trim_folds
        Trimmed Platt (Rüping, *Robust Probabilistic Calibration*), see
        :class:`~app.calibration.trimming.TrimSpec`; ``trim="none"`` by default. The paper
        found ``trim="cv"`` best for Platt scaling. Listed in ``params`` only when trimming.

    Attributes
    ----------
    A, B : float
        The fitted sigmoid, eq. (1); the state is ``{"A": A, "B": B, "n_iter": n_iter}``,
        plus ``"trim"`` (:meth:`~app.calibration.trimming.TrimResult.record`) when trimmed.
    n_iter : int
        Newton steps taken on the whole batch (after the warm start on a subsample, if any).
    trim_info : dict or None
        The chosen tau, centre, kept radius and each tau's loss; ``None`` untrimmed.
    """

    method: ClassVar[str] = "platt"

    def __init__(
        self, targets: str = "platt", max_iter: int = 100, trim: TrimSpec | None = None
    ) -> None:
        self.targets = targets
        self.max_iter = max_iter
        self.trim = TrimSpec() if trim is None else trim
        self.A = 0.0
        self.B = 0.0
        self.n_iter = 0
        self.trim_info: dict[str, JSONValue] | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> Self:
        """Validate ``params``; :class:`ParamError` names a bad or unknown key."""
        check_param_keys(cls.method, params, ("targets", "max_iter", *TRIM_KEYS))
        return cls(
            targets=choice_param(params, "targets", TARGETS, "platt"),
            max_iter=int_param(params, "max_iter", 1, 10_000, 100),
            trim=TrimSpec.from_params(params),
        )

    @property
    def params(self) -> dict[str, JSONValue]:
        """Every parameter with its effective value."""
        return {"targets": self.targets, "max_iter": self.max_iter, **self.trim.params}

    def fit(self, scores: FloatArray, labels: FloatArray, sample_weight: FloatArray) -> Self:
        """Fit A and B on the batch (a single class present is fine); return ``self``."""
        # Trimmed Platt: the sigmoid is fitted on the kept points only (Robust Probabilistic
        # Calibration, section 3.1); each trial fit is a plain PlattCalibrator.fit.
        scores, labels, sample_weight, self.trim_info = trim_batch(
            lambda: type(self)(self.targets, self.max_iter),
            scores,
            labels,
            sample_weight,
            self.trim,
        )
        # Tied scores pooled: the same loss, summed over the distinct scores only. Zero weights
        # are dropped there too (nothing to the loss, but they would stretch x's range below).
        f, weight, positive = pool_ties(scores, labels, sample_weight)
        n_pos = float(positive.sum())
        n_neg = float(weight.sum()) - n_pos
        if self.targets == "platt":
            # Platt's targets, Predicting Good Probabilities eq. (4), with weighted counts
            t_pos, t_neg = (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0)
        else:
            t_pos, t_neg = 1.0, 0.0
        # Weights rescaled to mean 1 per point, so the published absolute gradient tolerance
        # means for weighted data what it means unweighted, whatever the weights' scale.
        scale = np.count_nonzero(sample_weight) / float(weight.sum())
        target = scale * (positive * t_pos + (weight - positive) * t_neg)
        # Newton works on x in [-1, 1]: f divided by a power of two (exact) and centred, which
        # keeps exp() and the Hessian tame for |f| up to 1e308 and A, B are mapped back below.
        # Limitation (shared with scikit-learn's rescaling by max|f|): one outlier ~1e9 times
        # the others' spread squeezes them together in x and A is lost; with Platt's targets
        # the optimum then has A near 0 anyway (the outlier's target is below 1).
        exponent = math.frexp(max(-float(f[0]), float(f[-1])))[1]  # f is sorted
        u = np.ldexp(f, -exponent)
        centre, half_range = 0.5 * (u[0] + u[-1]), 0.5 * (u[-1] - u[0])
        x = (u - centre) / half_range if half_range > 0 else np.zeros_like(u)
        # Platt's starting point: A = 0, B = log((N- + 1) / (N+ + 1))
        a, b = 0.0, math.log((n_neg + 1.0) / (n_pos + 1.0))
        weight = scale * weight
        if x.size >= _WARM_START_MIN:
            # Many distinct scores: Newton from the optimum of every k-th point (weights times
            # k), which is within ~1% of the batch's, so the batch itself takes two or three
            # steps instead of six or seven. The same minimum, the same stopping rule.
            k = x.size // _WARM_START_SIZE
            a, b, _ = newton_sigmoid(x[::k], k * weight[::k], k * target[::k], b, self.max_iter)
        a, b, self.n_iter = newton_sigmoid(x, weight, target, b, self.max_iter, a0=a)
        slope = a / half_range if half_range > 0 else 0.0  # A for u
        self.B = float(b - slope * centre)
        try:
            self.A = math.ldexp(slope, -exponent)
        except OverflowError:  # scores spread over less than ~1e-300: a step is all that fits
            self.A = math.copysign(np.finfo(np.float64).max, slope)
        return self

    def predict(self, scores: FloatArray) -> FloatArray:
        """expit(-(A f + B)), eq. (1), for any finite A, B and f.

        Computed as expit((-A) f - B), which is -(A f + B) to the last bit (negation is exact)
        in one buffer. Where A f overflows, z is +-inf and expit saturates to exactly 0 or 1,
        which is the value the sigmoid rounds to there anyway.
        """
        with np.errstate(over="ignore"):
            z = np.multiply(np.asarray(scores, dtype=np.float64), -self.A)
            z -= self.B
        p: FloatArray = expit(z, out=z)
        return p

    def state(self) -> dict[str, JSONValue]:
        """``{"A", "B", "n_iter"}``, and ``"trim"`` when fitted with trimming."""
        return {"A": self.A, "B": self.B, "n_iter": self.n_iter, **trim_state(self.trim_info)}

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild a fitted calibrator; :class:`StateError` unless A, B are finite numbers."""
        calibrator = cls.from_params(params)
        extra, calibrator.trim_info = read_trim_state(state)
        check_state_keys(state, ("A", "B", "n_iter", *extra))
        calibrator.A = state_float(state, "A")
        calibrator.B = state_float(state, "B")
        calibrator.n_iter = state_int(state, "n_iter")
        return calibrator


def newton_sigmoid(
    x: FloatArray,
    weight: FloatArray,
    target: FloatArray,
    b0: float,
    max_iter: int,
    *,
    a0: float = 0.0,
) -> tuple[float, float, int]:
    """Minimise L(a, b) = sum_k weight_k log(1 + e^z_k) - (weight_k - target_k) z_k, z = a x + b.

    This is the cross-entropy of p = 1/(1 + e^z) against targets (``target`` is the summed
    weight times target of each pooled point). Lin, Lin & Weng (2007), Algorithm 1: Newton
    steps on the Hessian plus a ridge sigma, with Armijo backtracking. Stops when the gradient
    is below 1e-8 (their rule, tightened from 1e-5) or the predicted decrease g.d is below the
    resolution of the summed loss (without this, the line search backtracks on rounding noise
    at large n); that last Newton step is then taken without a line search.
    Starts from (a0, b0) (Platt's start is a0 = 0). Returns (a, b, accepted Newton steps).

    One exp and one log1p per point and trial: the loss at an accepted point leaves
    e = exp(-|z|) behind, from which the next gradient and Hessian follow; every pass
    writes into one of six work arrays allocated once.
    """
    non_target = weight - target
    z, e, relu, work, p, d2 = (np.empty(x.size) for _ in range(6))

    def dot(u: FloatArray, v: FloatArray) -> float:
        # einsum, not BLAS: waking OpenBLAS's threads for each of these short dot products
        # costs more than the product itself (several times more on a busy machine)
        return float(np.einsum("i,i->", u, v))

    def loss(a: float, b: float) -> float:
        """L(a, b); leaves z = a x + b, e = exp(-|z|) and max(z, 0) for ``derivatives``."""
        np.multiply(x, a, out=z)
        np.add(z, b, out=z)
        np.abs(z, out=e)
        np.negative(e, out=e)
        np.exp(e, out=e)
        # log(1 + e^z) = max(z, 0) + log1p(e^-|z|) never overflows (Lin, Lin & Weng's stable
        # evaluation), and w log(1 + e^z) - (w - t) z
        #   = w log1p(e^-|z|) + t max(z, 0) - (w - t) min(z, 0),
        # a sum of non-negative terms: no cancellation.
        np.log1p(e, out=work)
        np.maximum(z, 0.0, out=relu)
        total = dot(weight, work) + dot(target, relu)
        np.minimum(z, 0.0, out=work)
        return total - dot(non_target, work)

    def derivatives() -> tuple[float, float, float, float, float]:
        """Gradient and Hessian of L at the point of the last ``loss`` call."""
        np.add(e, 1.0, out=work)
        np.divide(1.0, work, out=work)  # q = 1 / (1 + e^-|z|)
        np.multiply(e, work, out=d2)
        np.multiply(d2, work, out=d2)  # p (1 - p) = e q^2 on both sides of 0
        np.multiply(d2, weight, out=d2)  # d2L/dz2
        np.negative(relu, out=p)
        np.exp(p, out=p)
        np.multiply(p, work, out=p)  # p = 1 / (1 + e^z) = e^-max(z, 0) q, branch-free
        np.multiply(p, weight, out=p)
        np.subtract(target, p, out=p)  # dL/dz
        np.multiply(x, d2, out=work)
        return (
            dot(x, p),
            float(p.sum()),
            dot(x, work),
            float(work.sum()),
            float(d2.sum()),
        )

    a, b = a0, b0
    value = loss(a, b)
    for iteration in range(max_iter):
        g_a, g_b, h_aa, h_ab, h_bb = derivatives()
        if max(abs(g_a), abs(g_b)) < _GRADIENT_TOL:
            return a, b, iteration
        h_aa, h_bb = h_aa + _SIGMA, h_bb + _SIGMA
        det = h_aa * h_bb - h_ab * h_ab
        if not det > 0.0:
            return a, b, iteration
        step_a = -(h_bb * g_a - h_ab * g_b) / det
        step_b = -(-h_ab * g_a + h_aa * g_b) / det
        decrease = g_a * step_a + g_b * step_b  # g.d < 0 for a descent direction
        if -decrease < _DECREASE_RTOL * max(1.0, abs(value)):
            # The loss can no longer tell this step from rounding noise, so Armijo cannot judge
            # it; near the optimum a full Newton step is the most accurate point there is.
            return a + step_a, b + step_b, iteration + 1
        step = 1.0
        while step >= _MIN_STEP:
            new_a, new_b = a + step * step_a, b + step * step_b
            new_value = loss(new_a, new_b)  # leaves z and e at the new point
            if new_value < value + _ARMIJO * step * decrease:  # Armijo condition
                a, b, value = new_a, new_b, new_value
                break
            step /= 2.0
        else:  # the line search failed: no representable decrease left
            return a, b, iteration
    return a, b, max_iter
