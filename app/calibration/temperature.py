"""Temperature scaling: softmax(z / T), one temperature T > 0 fitted by maximum likelihood.

Guo, Pleiss, Sun & Weinberger (2017), *On Calibration of Modern Neural Networks*, section 4.2;
scikit-learn's ``CalibratedClassifierCV(method="temperature")`` fits the same model (through
the inverse temperature beta = 1 / T, bounded to log beta in [-10, 10]). Rows that are
probability vectors are read as log-probabilities, as scikit-learn does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import ClassVar, Self

import numpy as np

from app.calibration.base import (
    CalibrationError,
    FloatArray,
    JSONValue,
    StateError,
    WithoutParams,
    check_state_keys,
    state_float,
)
from app.calibration.multiclass_metrics import IntArray, is_probability_matrix

INPUTS = ("logits", "probabilities")
LOG_BETA_BOUNDS = (-10.0, 10.0)  # scikit-learn's bounds on log(1 / T)
_SMALLEST_P = 1e-300  # log(p) of a zero probability stays finite
_FLOOR = -1e300  # centred logits below this give exp(...) = 0 anyway; keeps p * z finite
_XTOL = 1e-12  # relative, on beta
_MAX_ITER = 200


class TemperatureScaling(WithoutParams):
    """p = softmax(z / T) with T minimising the weighted multiclass log loss; no parameters.

    Attributes
    ----------
    T : float
        The fitted temperature; the state is ``{"T": T, "input": input}``.
    input : {"logits", "probabilities"}
        What the fitting batch held: for ``"probabilities"`` the rows are taken as
        z = log(max(p, 1e-300)) before scaling, at fit and at predict time.
    """

    method: ClassVar[str] = "temperature"

    def __init__(self) -> None:
        self.T = 1.0
        self.input = "logits"

    def fit(self, scores: FloatArray, labels: IntArray, sample_weight: FloatArray) -> Self:
        """Fit T on the n x k batch; return ``self``.

        The loss L(beta) = sum_i w_i (logsumexp(beta z_i) - beta z_{i, y_i}) is convex in
        beta = 1 / T: L' = sum_i w_i (E_softmax(beta z_i)[z] - z_{i, y_i}) is increasing
        (L'' = sum_i w_i Var(z)), so its root is found by Newton steps safeguarded by bisection
        in log beta within :data:`LOG_BETA_BOUNDS`; a root outside them gives the bound.
        """
        self.input = "probabilities" if is_probability_matrix(scores) else "logits"
        z = self._centred_logits(scores)
        true = z[np.arange(labels.size), labels]
        w = sample_weight / sample_weight.sum()

        # The moments are taken of u = z / 2^e (exact) with |u| <= 1, so z * z cannot overflow;
        # L' is returned divided by 2^e (its sign is all bisection needs) and L'' by 4^e, so
        # their ratio, the Newton step, is the true one.
        exponent = math.frexp(float(np.max(np.abs(z))))[1]
        u, u_true = np.ldexp(z, -exponent), np.ldexp(true, -exponent)

        def derivatives(beta: float) -> tuple[float, float]:
            e = np.exp(beta * z)
            p = e / e.sum(axis=1, keepdims=True)
            mean = np.einsum("ij,ij->i", p, u)
            var = np.maximum(np.einsum("ij,ij->i", p, u * u) - mean * mean, 0.0)
            return float(w @ (mean - u_true)), math.ldexp(float(w @ var), exponent)

        low, high = (math.exp(bound) for bound in LOG_BETA_BOUNDS)
        if derivatives(low)[0] >= 0.0:
            beta = low
        elif derivatives(high)[0] <= 0.0:
            beta = high
        else:
            beta = _safeguarded_newton(derivatives, low, high)
        self.T = 1.0 / beta
        return self

    def predict(self, scores: FloatArray) -> FloatArray:
        """softmax(z / T) of each row (rows read as the fitting batch's ``input``)."""
        z = self._centred_logits(np.asarray(scores, dtype=np.float64)) / self.T
        e = np.exp(z)
        p: FloatArray = e / e.sum(axis=1, keepdims=True)
        return p

    def state(self) -> dict[str, JSONValue]:
        """``{"T", "input"}``."""
        return {"T": self.T, "input": self.input}

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild; :class:`StateError` unless T is a positive number and input is known."""
        calibrator = cls.from_params(params)
        check_state_keys(state, ("T", "input"))
        T = state_float(state, "T")
        if not T > 0.0:
            raise StateError(f"state.T: must be positive, not {T!r}")
        if state["input"] not in INPUTS:
            raise StateError(f"state.input: must be one of {', '.join(INPUTS)}")
        calibrator.T, calibrator.input = T, str(state["input"])
        return calibrator

    def _centred_logits(self, scores: FloatArray) -> FloatArray:
        """Logits minus their row maximum (softmax is unchanged), floored at -1e300."""
        if scores.ndim != 2:
            raise CalibrationError(f"scores: must be a 2-d matrix, not {scores.ndim}-d")
        z = np.log(np.maximum(scores, _SMALLEST_P)) if self.input == "probabilities" else scores
        with np.errstate(over="ignore"):  # a spread beyond 1.8e308 is -inf, then floored
            centred = z - z.max(axis=1, keepdims=True)
        floored: FloatArray = np.maximum(centred, _FLOOR)
        return floored


def _safeguarded_newton(
    derivatives: Callable[[float], tuple[float, float]], low: float, high: float
) -> float:
    """The root of the increasing L'(beta) in [low, high], with L'(low) < 0 < L'(high)."""
    beta = 1.0 if low < 1.0 < high else math.sqrt(low * high)
    for _ in range(_MAX_ITER):
        g, h = derivatives(beta)
        if g == 0.0:
            return beta
        if g < 0.0:
            low = beta
        else:
            high = beta
        step = beta - g / h if h > 0.0 else math.nan
        # outside the bracket (or no curvature): bisect in log beta instead
        new = step if low < step < high else math.sqrt(low * high)
        if abs(new - beta) <= _XTOL * beta or high - low <= _XTOL * low:
            return new
        beta = new
    return beta
