"""Beta calibration, the three-parameter "abm" family, for scores that are probabilities.

Kull, Silva Filho & Flach (2017), *Beta calibration: a well-founded and easily implemented
improvement on logistic calibration for binary classifiers*: the calibration map is
p = 1 / (1 + 1 / (e^c f^a / (1 - f)^b)) with a, b >= 0, i.e. a logistic regression on the two
features ln f and -ln(1 - f). Unlike Platt's sigmoid of f it can fix asymmetric distortions and
contains the identity (a = b = 1, c = 0).

The fit follows the authors' reference implementation (``betacal``, ``_beta_calibration``):
scores clipped to [eps, 1 - eps] with eps float64's machine epsilon, a logistic regression with
the same negligible ridge (scikit-learn's ``C = 99999999999`` on the two slopes, none on the
intercept), and when a slope comes out negative, a refit without that feature (a = 0 when a < 0,
otherwise b = 0 when b < 0). Here the refit is by Newton's method on tie-pooled scores, not
lbfgs; and should the remaining slope still be negative (scores that rank the classes the wrong
way round), it is dropped too, leaving a constant map, so a, b >= 0 always holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np
from scipy.special import expit

from app.calibration.base import (
    CalibrationError,
    FloatArray,
    JSONValue,
    StateError,
    WithoutParams,
    check_state_keys,
    pool_ties,
    state_float,
)

EPS = float(np.finfo(np.float64).eps)
"""Scores are clipped to [EPS, 1 - EPS] (fit and predict alike), as ``betacal`` does."""
_RIDGE = 1.0 / 99999999999.0  # betacal's LogisticRegression(C=99999999999): ||w||^2 / (2 C)
_GRADIENT_TOL = 1e-10
_DECREASE_RTOL = 1e-15
_MAX_ITER = 200
_ARMIJO = 1e-4
_MIN_STEP = 1e-12


def require_open_unit_interval(scores: FloatArray, method: str) -> None:
    """Raise :class:`CalibrationError` unless every score lies strictly between 0 and 1.

    The message names the first offending index, e.g. ``scores[17] is 1.0; beta calibration
    needs scores strictly between 0 and 1`` (``scores[17][2]`` for a matrix).
    """
    bad = ~((scores > 0.0) & (scores < 1.0))  # NaN counts as outside
    if bad.any():
        where = np.unravel_index(int(np.flatnonzero(bad)[0]), bad.shape)
        index = "".join(f"[{int(i)}]" for i in where)
        raise CalibrationError(
            f"scores{index} is {float(scores[where])!r}; "
            f"{method} calibration needs scores strictly between 0 and 1"
        )


def beta_features(scores: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(ln f, -ln(1 - f)) of the scores clipped to [EPS, 1 - EPS]: the paper's two features."""
    f = np.clip(np.asarray(scores, dtype=np.float64), EPS, 1.0 - EPS)
    return np.log(f), -np.log1p(-f)


class BetaCalibrator(WithoutParams):
    """p(f) = expit(a ln f - b ln(1 - f) + c), the "abm" beta calibration map.

    No parameters. Fitting needs every score strictly in (0, 1) (:class:`CalibrationError`
    naming the first index otherwise); prediction accepts any finite score, clipping to
    [EPS, 1 - EPS] first, so 0 and 1 map to finite, extreme probabilities.

    Attributes
    ----------
    a, b, c : float
        The map's slopes on ln f and -ln(1 - f) (both >= 0) and its intercept; the state is
        ``{"a": a, "b": b, "c": c}``. The paper's midpoint m is not stored: it follows from
        a, b and c.
    """

    method: ClassVar[str] = "beta"

    def __init__(self) -> None:
        self.a = 1.0
        self.b = 1.0
        self.c = 0.0

    def fit(self, scores: FloatArray, labels: FloatArray, sample_weight: FloatArray) -> Self:
        """Fit a, b, c by weighted maximum likelihood, dropping a negative slope; ``self``."""
        require_open_unit_interval(scores, self.method)
        f, weight, positive = pool_ties(scores, labels, sample_weight)
        log_f, log_1mf = beta_features(f)
        # Weights rescaled to mean 1 per point so the tolerances mean the same whatever their
        # scale; the ridge is rescaled with them so the optimum is betacal's.
        scale = np.count_nonzero(sample_weight) / float(weight.sum())
        features = np.stack([log_f, log_1mf], axis=1)
        kept = [0, 1]
        while True:
            coef, self.c = _logistic_fit(features[:, kept], scale * weight, scale * positive, scale)
            slopes = dict(zip(kept, coef, strict=True))
            negative = [j for j in kept if slopes[j] < 0.0]
            if not negative:
                break
            kept.remove(negative[0])  # betacal drops a first when both are negative
        self.a, self.b = float(slopes.get(0, 0.0)), float(slopes.get(1, 0.0))
        return self

    def predict(self, scores: FloatArray) -> FloatArray:
        """expit(a ln f - b ln(1 - f) + c) with f clipped to [EPS, 1 - EPS]."""
        log_f, log_1mf = beta_features(scores)
        # a, b >= 0 and |ln| <= 37 keep z finite for any finite a, b, c below ~1e306
        z = np.clip(self.a * log_f + self.b * log_1mf + self.c, -800.0, 800.0)
        p: FloatArray = expit(z)
        return p

    def state(self) -> dict[str, JSONValue]:
        """``{"a", "b", "c"}``."""
        return {"a": self.a, "b": self.b, "c": self.c}

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild a fitted calibrator; :class:`StateError` unless a, b >= 0 and c are finite."""
        calibrator = cls.from_params(params)
        check_state_keys(state, ("a", "b", "c"))
        a, b, c = (state_float(state, key) for key in ("a", "b", "c"))
        for key, value in (("a", a), ("b", b)):
            if value < 0.0 or abs(value) > 1e300:
                raise StateError(f"state.{key}: must be between 0 and 1e300, not {value!r}")
        calibrator.a, calibrator.b, calibrator.c = a, b, c
        return calibrator


def _logistic_fit(
    x: FloatArray, weight: FloatArray, positive: FloatArray, scale: float
) -> tuple[FloatArray, float]:
    """Weighted logistic regression of pooled counts on the columns of ``x`` plus intercept.

    Minimises sum_k weight_k log(1 + e^z_k) - positive_k z_k + scale * ridge/2 * ||coef||^2,
    z = x coef + intercept: Newton steps with Armijo backtracking (as Lin, Lin & Weng's for
    Platt), stopping at a tiny gradient or once the predicted decrease is below the resolution
    of the loss. Returns (coef, intercept).
    """
    n_coef = x.shape[1]
    design = np.hstack([x, np.ones((x.shape[0], 1))])
    ridge = np.zeros(n_coef + 1)
    ridge[:n_coef] = scale * _RIDGE
    total, n_pos = float(weight.sum()), float(positive.sum())
    theta = np.zeros(n_coef + 1)
    # start at the log-odds of the base rate (kept finite for a single-class fold)
    theta[-1] = np.log((n_pos + 0.5) / (total - n_pos + 0.5))

    def loss(t: FloatArray) -> float:
        z = design @ t
        return float(weight @ np.logaddexp(0.0, z) - positive @ z + 0.5 * ridge @ (t * t))

    value = loss(theta)
    for _ in range(_MAX_ITER):
        p = expit(design @ theta)
        gradient = design.T @ (weight * p - positive) + ridge * theta
        if np.max(np.abs(gradient)) < _GRADIENT_TOL:
            break
        hessian = (design.T * (weight * p * (1.0 - p))) @ design + np.diag(ridge)
        try:
            step = -np.linalg.solve(hessian, gradient)
        except np.linalg.LinAlgError:
            break
        decrease = float(gradient @ step)
        if not np.isfinite(decrease) or decrease >= 0.0:
            break
        if -decrease < _DECREASE_RTOL * max(1.0, abs(value)):
            theta = theta + step
            break
        length = 1.0
        while length >= _MIN_STEP:
            candidate = theta + length * step
            new_value = loss(candidate)
            if new_value < value + _ARMIJO * length * decrease:
                theta, value = candidate, new_value
                break
            length /= 2.0
        else:
            break
    return theta[:n_coef], float(theta[-1])
