"""Temperature scaling: softmax(z / T), one temperature T > 0 fitted by maximum likelihood.

Guo, Pleiss, Sun & Weinberger (2017), *On Calibration of Modern Neural Networks*, section 4.2.
Fitted as scikit-learn's ``CalibratedClassifierCV(method="temperature")`` fits it: bounded
Brent minimisation (``scipy.optimize.minimize_scalar``) of the log loss over the log of the
inverse temperature beta = 1 / T, within [-10, 10], to 64 machine epsilons. Rows that are
probability vectors are read as log-probabilities, as scikit-learn does, except for zeros:
scikit-learn takes log(p + 1e-12), which moves every entry; here only a zero is replaced
(by 1e-300), so rows without zeros are read exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np
from scipy.optimize import minimize_scalar

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
from app.calibration.kernels.weights import relative_weights
from app.calibration.measures.multiclass_metrics import IntArray, is_probability_matrix

INPUTS = ("logits", "probabilities")
LOG_BETA_BOUNDS = (-10.0, 10.0)  # scikit-learn's bounds on log(1 / T)
SMALLEST_P = 1e-300  # log(p) of a zero probability stays finite
FLOOR = -1e300  # centred logits below this give exp(...) = 0 anyway; keeps p * z finite
_XATOL = 64 * float(np.finfo(np.float64).eps)  # on log beta, scikit-learn's tolerance


class TemperatureScaling(BoundOnly):
    """p = softmax(z / T) with T minimising the weighted multiclass log loss.

    Parameters
    ----------
    bound : {"none", "laplace"}, default "none"
        ``"laplace"``: every probability raised to at least 1 / (n + k) and the rows
        renormalised, so none ends below 1 / (n + 2k)
        (:class:`~app.calibration.kernels.bounds.OutputBound`); softmax otherwise underflows to
        exactly 0 for a class far below the others. Listed in ``params`` and the state only
        when bounded.

    Attributes
    ----------
    T : float
        The fitted temperature; the state is ``{"T": T, "input": input}``.
    input : {"logits", "probabilities"}
        What the fitting batch held: for ``"probabilities"`` the rows are taken as
        z = log(max(p, 1e-300)) before scaling, at fit and at predict time.
    """

    method: ClassVar[str] = "temperature"
    capabilities: ClassVar[Capabilities] = Capabilities(vector=False, matrix="native", bound=True)

    def __init__(self, bound: OutputBound | None = None) -> None:
        super().__init__(bound)
        self.T = 1.0
        self.input = "logits"

    def fit(self, scores: FloatArray, labels: IntArray, sample_weight: FloatArray) -> Self:
        """Fit T on the n x k batch; return ``self``.

        Minimises L(log beta) = sum_i w_i (logsumexp(beta z_i) - beta z_{i, y_i}) over
        log beta in :data:`LOG_BETA_BOUNDS` with bounded Brent, as scikit-learn does. L is
        convex in beta (its second derivative is a weighted variance), so the minimiser is
        unique; one outside the bounds gives the bound.
        """
        self.bound = self.bound.fitted(sample_weight, n_classes=scores.shape[1])
        self.input = "probabilities" if is_probability_matrix(scores) else "logits"
        z = self._centred_logits(scores)  # row maxima 0: exp(beta z) <= 1 never overflows
        true = z[np.arange(labels.size), labels]
        w, _ = relative_weights(sample_weight)  # exact; its sum neither overflows nor underflows
        w /= w.sum()

        def loss(log_beta: float) -> float:
            beta = np.exp(log_beta)
            normaliser = np.log(np.exp(beta * z).sum(axis=1))  # >= 0: each row holds a 1
            return float(w @ (normaliser - beta * true))

        found = minimize_scalar(
            loss, bounds=LOG_BETA_BOUNDS, method="bounded", options={"xatol": _XATOL}
        )
        self.T = float(np.exp(-found.x))
        return self

    def predict(self, scores: FloatArray) -> FloatArray:
        """softmax(z / T) of each row (rows read as the fitting batch's ``input``)."""
        z = self._centred_logits(np.asarray(scores, dtype=np.float64)) / self.T
        e = np.exp(z)
        p: FloatArray = e / e.sum(axis=1, keepdims=True)
        return self.bound.apply(p)

    def state(self) -> dict[str, JSONValue]:
        """``{"T", "input"}``, and ``"bound"`` when bounded."""
        return {"T": self.T, "input": self.input, **self.bound.state()}

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild; :class:`StateError` unless T is a positive number and input is known."""
        calibrator = cls.from_params(params)
        bounded, calibrator.bound = calibrator.bound.read_state(state)
        check_state_keys(state, ("T", "input", *bounded))
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
            raise CalibrationError(f"must be a 2-d matrix, not {scores.ndim}-d", loc=("scores",))
        z = np.log(np.maximum(scores, SMALLEST_P)) if self.input == "probabilities" else scores
        with np.errstate(over="ignore"):  # a spread beyond 1.8e308 is -inf, then floored
            centred = z - z.max(axis=1, keepdims=True)
        floored: FloatArray = np.maximum(centred, FLOOR)
        return floored
