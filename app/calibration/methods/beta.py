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
lbfgs (:func:`~app.calibration.kernels.newton.fit_logistic`, the solver Platt scaling uses); and
should the remaining slope still be negative (scores that rank the classes the wrong
way round), it is dropped too, leaving a constant map, so a, b >= 0 always holds.

One departure for weighted batches: betacal's ridge is in the units of the sample weights, so
its fit depends on their scale (weights of 1e-300 let the ridge flatten the map to a
constant). Here the ridge is that of the weights rescaled to mean 1, which is betacal's ridge
for unweighted data and makes the fit scale-invariant
(:func:`~app.calibration.kernels.weights.relative_weights`). For weights of mean m the two ridges
differ by the factor m, which moves a and b by some 1e-11 relative unless m is extreme.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np
from scipy.special import expit

from app.calibration.base import (
    CalibrationError,
    Capabilities,
    FloatArray,
    JSONValue,
    StateError,
    check_state_keys,
    state_float,
)
from app.calibration.kernels.bounds import BoundOnly, OutputBound
from app.calibration.kernels.newton import fit_logistic
from app.calibration.kernels.pooling import pool_ties
from app.calibration.kernels.weights import relative_weights

EPS = float(np.finfo(np.float64).eps)
"""Scores are clipped to [EPS, 1 - EPS] (fit and predict alike), as ``betacal`` does."""
_RIDGE = 1.0 / 99999999999.0  # betacal's LogisticRegression(C=99999999999): ||w||^2 / (2 C)
_MAX_ITER = 200


def require_open_unit_interval(scores: FloatArray, method: str) -> None:
    """Raise :class:`CalibrationError` unless every score lies strictly between 0 and 1.

    Its ``loc`` is the first offending index, ``("scores", 17)`` (``("scores", 17, 2)`` for a
    matrix): ``scores[17]: is 1.0; beta calibration needs scores strictly between 0 and 1``.
    """
    bad = ~((scores > 0.0) & (scores < 1.0))  # NaN counts as outside
    if bad.any():
        where = np.unravel_index(int(np.flatnonzero(bad)[0]), bad.shape)
        raise CalibrationError(
            f"is {float(scores[where])!r}; "
            f"{method} calibration needs scores strictly between 0 and 1",
            loc=("scores", *(int(i) for i in where)),
        )


def beta_features(scores: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(ln f, -ln(1 - f)) of the scores clipped to [EPS, 1 - EPS]: the paper's two features."""
    f = np.clip(np.asarray(scores, dtype=np.float64), EPS, 1.0 - EPS)
    return np.log(f), -np.log1p(-f)


class BetaCalibrator(BoundOnly):
    """p(f) = expit(a ln f - b ln(1 - f) + c), the "abm" beta calibration map.

    Parameters
    ----------
    bound : {"none", "laplace"}, default "none"
        ``"laplace"`` clips the outputs into [1 / (n + 2), (n + 1) / (n + 2)]
        (:class:`~app.calibration.kernels.bounds.OutputBound`). Listed in ``params`` and the state
        only when bounded.

    Fitting needs every score strictly in (0, 1) (:class:`CalibrationError`
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
    capabilities: ClassVar[Capabilities] = Capabilities(probabilities=True, bound=True)

    def __init__(self, bound: OutputBound | None = None) -> None:
        super().__init__(bound)
        self.a = 1.0
        self.b = 1.0
        self.c = 0.0

    def fit(self, scores: FloatArray, labels: FloatArray, sample_weight: FloatArray) -> Self:
        """Fit a, b, c by weighted maximum likelihood, dropping a negative slope; ``self``."""
        require_open_unit_interval(scores, self.method)
        self.bound = self.bound.fitted(sample_weight)
        # Relative weights (exact), then rescaled to mean 1 per point, so the tolerances and
        # betacal's ridge mean what they mean unweighted, whatever the weights' scale.
        w, _ = relative_weights(sample_weight)
        f, weight, positive = pool_ties(scores, labels, w)
        log_f, log_1mf = beta_features(f)
        scale = np.count_nonzero(w) / float(weight.sum())
        weight, positive = scale * weight, scale * positive
        features = (log_f, log_1mf)
        kept = [0, 1]
        total, n_pos = float(weight.sum()), float(positive.sum())
        while True:
            # from slopes 0 and the log-odds of the base rate (finite for a one-class fold)
            start = np.zeros(len(kept) + 1)
            start[-1] = np.log((n_pos + 0.5) / (total - n_pos + 0.5))
            ridge = np.zeros(len(kept) + 1)
            ridge[:-1] = _RIDGE
            theta = fit_logistic(
                [features[j] for j in kept],
                weight,
                positive,
                start,
                ridge=ridge,
                max_iter=_MAX_ITER,
            ).theta
            coef, self.c = theta[:-1], float(theta[-1])
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
        return self.bound.apply(p)

    def state(self) -> dict[str, JSONValue]:
        """``{"a", "b", "c"}``, and ``"bound"`` when bounded."""
        return {"a": self.a, "b": self.b, "c": self.c, **self.bound.state()}

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild a fitted calibrator; :class:`StateError` unless a, b >= 0 and c are finite."""
        calibrator = cls.from_params(params)
        bounded, calibrator.bound = calibrator.bound.read_state(state)
        check_state_keys(state, ("a", "b", "c", *bounded))
        a, b, c = (state_float(state, key) for key in ("a", "b", "c"))
        for key, value in (("a", a), ("b", b)):
            if value < 0.0 or abs(value) > 1e300:
                raise StateError(f"state.{key}: must be between 0 and 1e300, not {value!r}")
        calibrator.a, calibrator.b, calibrator.c = a, b, c
        return calibrator
