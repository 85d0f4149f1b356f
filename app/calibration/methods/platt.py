"""Platt scaling: a sigmoid of the raw score, fitted by maximum likelihood.

Niculescu-Mizil & Caruana, *Predicting Good Probabilities With Supervised Learning*, eqs. (1)-(4);
fitted with the Newton method with backtracking line search of Lin, Lin & Weng (2007),
*A note on Platt's probabilistic outputs for support vector machines*
(:func:`~app.calibration.kernels.newton.fit_logistic`, shared with beta calibration).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np
from scipy.special import expit

from app.calibration.base import (
    Capabilities,
    FloatArray,
    JSONValue,
    check_param_keys,
    check_state_keys,
    choice_param,
    int_param,
    state_float,
    state_int,
)
from app.calibration.kernels.bounds import BOUND_KEY, OutputBound
from app.calibration.kernels.newton import fit_logistic
from app.calibration.kernels.pooling import pool_ties
from app.calibration.kernels.weights import relative_weights, unit_weight
from app.calibration.methods.trim_spec import TRIM_KEYS, TrimSpec, read_trim_state, trim_state
from app.calibration.methods.trimming import trim_batch

TARGETS = ("platt", "hard")
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
        Hence Platt's targets make the fit depend on the weights' unit (weights times c give
        another fit): the pseudo-counts 1 and 2 are in units of weight, so weights of 1e-300
        pull every target to 1/2 (a constant map, p = 1/2), weights of 1e300 make them the
        hard targets. ``"hard"`` is scale-invariant, as is every weight of the fit itself
        (:func:`~app.calibration.kernels.weights.relative_weights`).
    max_iter : int in 1..10000, default 100
        Newton iterations at most.
    trim, trim_tau_min, trim_grid, trim_center, trim_loss, trim_folds
        Trimmed Platt (Rüping, *Robust Probabilistic Calibration*), see
        :class:`~app.calibration.methods.trim_spec.TrimSpec`; ``trim="none"`` by default. The paper
        found ``trim="cv"`` best for Platt scaling. Listed in ``params`` only when trimming.
    bound : {"none", "laplace"}, default "none"
        ``"laplace"`` clips the outputs into [1 / (n + 2), (n + 1) / (n + 2)]
        (:class:`~app.calibration.kernels.bounds.OutputBound`): the sigmoid itself rounds to exactly
        1.0 in float64 once A f + B < -37. Listed in ``params`` and the state only when bounded.

    Attributes
    ----------
    A, B : float
        The fitted sigmoid, eq. (1); the state is ``{"A": A, "B": B, "n_iter": n_iter}``,
        plus ``"trim"`` (:meth:`~app.calibration.methods.trimming.TrimResult.record`) when trimmed.
    n_iter : int
        Newton steps taken on the whole batch (after the warm start on a subsample, if any).
    trim_info : dict or None
        The chosen tau, centre, kept radius and each tau's loss; ``None`` untrimmed.
    """

    method: ClassVar[str] = "platt"
    capabilities: ClassVar[Capabilities] = Capabilities(bound=True)

    def __init__(
        self,
        targets: str = "platt",
        max_iter: int = 100,
        trim: TrimSpec | None = None,
        bound: OutputBound | None = None,
    ) -> None:
        self.targets = targets
        self.max_iter = max_iter
        self.trim = TrimSpec() if trim is None else trim
        self.bound = OutputBound() if bound is None else bound
        self.A = 0.0
        self.B = 0.0
        self.n_iter = 0
        self.trim_info: dict[str, JSONValue] | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> Self:
        """Validate ``params``; :class:`ParamError` names a bad or unknown key."""
        check_param_keys(cls.method, params, ("targets", "max_iter", *TRIM_KEYS, BOUND_KEY))
        return cls(
            targets=choice_param(params, "targets", TARGETS, "platt"),
            max_iter=int_param(params, "max_iter", 1, 10_000, 100),
            trim=TrimSpec.from_params(params),
            bound=OutputBound.from_params(params),
        )

    @property
    def params(self) -> dict[str, JSONValue]:
        """Every parameter with its effective value."""
        return {
            "targets": self.targets,
            "max_iter": self.max_iter,
            **self.trim.params,
            **self.bound.params,
        }

    def fit(self, scores: FloatArray, labels: FloatArray, sample_weight: FloatArray) -> Self:
        """Fit A and B on the batch (a single class present is fine); return ``self``."""
        self.bound = self.bound.fitted(sample_weight)
        # Trimmed Platt: the sigmoid is fitted on the kept points only (Robust Probabilistic
        # Calibration, section 3.1); each trial fit is a plain PlattCalibrator.fit.
        scores, labels, sample_weight, self.trim_info = trim_batch(
            lambda: type(self)(self.targets, self.max_iter, bound=OutputBound(self.bound.rule)),
            scores,
            labels,
            sample_weight,
            self.trim,
        )
        # Relative weights (exact: a power of two), so that subnormal or huge weights neither
        # underflow nor overflow below; the counts n_pos, n_neg are in those units.
        w, exponent = relative_weights(sample_weight)
        # Tied scores pooled: the same loss, summed over the distinct scores only. Zero weights
        # are dropped there too (nothing to the loss, but they would stretch x's range below).
        f, weight, positive = pool_ties(scores, labels, w)
        n_pos = float(positive.sum())
        n_neg = float(weight.sum()) - n_pos
        one = unit_weight(exponent)  # Platt's pseudo-counts are in the caller's units
        if self.targets == "platt":
            # Platt's targets, Predicting Good Probabilities eq. (4), with weighted counts:
            # (N+ + 1) / (N+ + 2) and 1 / (N- + 2), numerator and denominator times 2^-e
            t_pos, t_neg = (n_pos + one) / (n_pos + 2.0 * one), one / (n_neg + 2.0 * one)
        else:
            t_pos, t_neg = 1.0, 0.0
        # Weights rescaled to mean 1 per point, so the published absolute gradient tolerance
        # means for weighted data what it means unweighted, whatever the weights' scale.
        scale = np.count_nonzero(w) / float(weight.sum())
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
        # Platt's starting point: A = 0, B = log((N- + 1) / (N+ + 1)). The solver fits
        # expit(eta) with eta = -(a x + b), so its coefficients are (-a, -b).
        start = np.array([0.0, -math.log((n_neg + one) / (n_pos + one))])
        weight = scale * weight
        if x.size >= _WARM_START_MIN:
            # Many distinct scores: Newton from the optimum of every k-th point (weights times
            # k), which is within ~1% of the batch's, so the batch itself takes two or three
            # steps instead of six or seven. The same minimum, the same stopping rule.
            k = x.size // _WARM_START_SIZE
            start = fit_logistic(
                [x[::k]], k * weight[::k], k * target[::k], start, max_iter=self.max_iter
            ).theta
        fitted = fit_logistic([x], weight, target, start, max_iter=self.max_iter)
        a, b = -float(fitted.theta[0]), -float(fitted.theta[1])
        self.n_iter = fitted.n_iter
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
        return self.bound.apply(p)

    def state(self) -> dict[str, JSONValue]:
        """``{"A", "B", "n_iter"}``, and ``"trim"`` when fitted with trimming."""
        return {
            "A": self.A,
            "B": self.B,
            "n_iter": self.n_iter,
            **trim_state(self.trim_info),
            **self.bound.state(),
        }

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild a fitted calibrator; :class:`StateError` unless A, B are finite numbers."""
        calibrator = cls.from_params(params)
        extra, calibrator.trim_info = read_trim_state(state)
        bounded, calibrator.bound = calibrator.bound.read_state(state)
        check_state_keys(state, ("A", "B", "n_iter", *extra, *bounded))
        calibrator.A = state_float(state, "A")
        calibrator.B = state_float(state, "B")
        calibrator.n_iter = state_int(state, "n_iter")
        return calibrator
