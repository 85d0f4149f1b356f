"""Boström's correction of a forest's probability vectors towards its most probable class.

Boström, *Calibrating Random Forests* (section 2.3.2): the most probable class gets
p + r (1 - p) and every other class p (1 - r), with 0 <= r <= 1 chosen to minimise the
Brier score on a calibration set (the paper uses the forest's out-of-bag probabilities,
section 2.4). Rows still sum to 1 and the arg max, hence the accuracy, is unchanged; the
same holds when r is a non-decreasing function of the top probability, and the paper's
experiments use a Platt-shaped sigmoid of it, which is why ``"sigmoid"`` is the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, logit

from app.calibration.base import (
    CalibrationError,
    Capabilities,
    FloatArray,
    JSONValue,
    StateError,
    check_param_keys,
    check_state_keys,
    choice_param,
    state_float,
)
from app.calibration.kernels.bounds import BOUND_KEY, OutputBound
from app.calibration.kernels.weights import relative_weights
from app.calibration.measures.multiclass_metrics import IntArray, probability_rows

MODES = ("sigmoid", "constant")
_R_START = 1e-6  # the sigmoid starts from the constant fit, kept off r = 0 and 1 (logit finite)


class BostromCalibrator:
    """p_top + r (1 - p_top) for the top class, p (1 - r) for the others; rows are probabilities.

    Parameters
    ----------
    r : {"sigmoid", "constant"}, default "sigmoid"
        ``"constant"``: one r in [0, 1]. The Brier score is quadratic in r, so r is its
        closed-form minimiser clipped to [0, 1]. ``"sigmoid"``: r(p_top) =
        1 / (1 + exp(-(a p_top + b))) with a >= 0 (non-decreasing, as the paper requires for
        the arg max to hold), fitted by L-BFGS-B with the analytic gradient rather than the
        paper's integer grid {0, ..., 50} for its two parameters (footnote 1).
    bound : {"none", "laplace"}, default "none"
        ``"laplace"``: every probability raised to at least 1 / (n + k) and the rows
        renormalised, so none ends below 1 / (n + 2k)
        (:class:`~app.calibration.kernels.bounds.OutputBound`); a forest's zeros otherwise stay
        zeros. Listed in ``params`` and the state only when bounded.

    Attributes
    ----------
    r : float
        The constant (``"constant"``); the state is ``{"mode": "constant", "r": r}``.
    a, b : float
        The sigmoid (``"sigmoid"``); the state is ``{"mode": "sigmoid", "a": a, "b": b}``.
    """

    method: ClassVar[str] = "bostrom"
    capabilities: ClassVar[Capabilities] = Capabilities(
        vector=False, matrix="native", probabilities=True, bound=True
    )

    def __init__(self, r: str = "sigmoid", bound: OutputBound | None = None) -> None:
        self.mode = r
        self.bound = OutputBound() if bound is None else bound
        self.r = 0.0
        self.a = 0.0
        self.b = 0.0

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> Self:
        """Validate ``params``; :class:`ParamError` names a bad or unknown key."""
        check_param_keys(cls.method, params, ("r", BOUND_KEY))
        return cls(choice_param(params, "r", MODES, "sigmoid"), OutputBound.from_params(params))

    @property
    def params(self) -> dict[str, JSONValue]:
        """Every parameter with its effective value."""
        return {"r": self.mode, **self.bound.params}

    def fit(self, scores: FloatArray, labels: IntArray, sample_weight: FloatArray) -> Self:
        """Fit r (or a and b) to minimise the weighted multiclass Brier score; return ``self``."""
        p, top, p_top = _rows(scores)
        self.bound = self.bound.fitted(sample_weight, n_classes=p.shape[1])
        rows = np.arange(labels.size)
        w, _ = relative_weights(sample_weight)  # exact; its sum neither overflows nor underflows
        w /= w.sum()
        # With d = e_top - p the corrected row is p + r d, and its Brier score
        # |p + r d - e_y|^2 = |p - e_y|^2 + 2 r q + r^2 s with q = (p - e_y).d, s = |d|^2.
        norm2 = np.einsum("ij,ij->i", p, p)
        q = p_top - norm2 - (top == labels).astype(np.float64) + p[rows, labels]
        s = np.maximum(1.0 - 2.0 * p_top + norm2, 0.0)
        qw, sw = float(w @ q), float(w @ s)
        self.r = float(np.clip(-qw / sw, 0.0, 1.0)) if sw > 0.0 else 0.0
        if self.mode == "constant":
            return self

        def brier(ab: FloatArray) -> tuple[float, FloatArray]:
            r = expit(ab[0] * p_top + ab[1])
            slope = 2.0 * w * (q + r * s) * r * (1.0 - r)  # dBrier/dr dr/dz per row
            return float(w @ (2.0 * r * q + r * r * s)), np.array([slope @ p_top, slope.sum()])

        start = np.array([0.0, float(logit(np.clip(self.r, _R_START, 1.0 - _R_START)))])
        result = minimize(
            brier,
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, None), (None, None)],
            options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 1000},
        )
        self.a, self.b = float(result.x[0]), float(result.x[1])
        return self

    def predict(self, scores: FloatArray) -> FloatArray:
        """The corrected rows; :class:`CalibrationError` unless each row is a probability vector."""
        p, top, p_top = _rows(scores)
        r = np.full(p_top.size, self.r) if self.mode == "constant" else self._sigmoid(p_top)
        corrected: FloatArray = p * (1.0 - r)[:, None]
        corrected[np.arange(top.size), top] += r
        return self.bound.apply(corrected)

    def state(self) -> dict[str, JSONValue]:
        """``{"mode": "constant", "r"}`` or ``{"mode": "sigmoid", "a", "b"}``."""
        fitted: dict[str, JSONValue] = (
            {"mode": "constant", "r": self.r}
            if self.mode == "constant"
            else {"mode": "sigmoid", "a": self.a, "b": self.b}
        )
        return {**fitted, **self.bound.state()}

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild; :class:`StateError` unless the state matches the mode in ``params``."""
        calibrator = cls.from_params(params)
        if not isinstance(state, Mapping):
            raise StateError(f"state: must be an object, not {type(state).__name__}")
        if state.get("mode") != calibrator.mode:
            raise StateError(f"state.mode: must be {calibrator.mode!r} for params.r")
        bounded, calibrator.bound = calibrator.bound.read_state(state)
        if calibrator.mode == "constant":
            check_state_keys(state, ("mode", "r", *bounded))
            calibrator.r = state_float(state, "r")
            if not 0.0 <= calibrator.r <= 1.0:
                raise StateError(f"state.r: must lie in [0, 1], not {calibrator.r!r}")
        else:
            check_state_keys(state, ("mode", "a", "b", *bounded))
            calibrator.a, calibrator.b = state_float(state, "a"), state_float(state, "b")
            if calibrator.a < 0.0:
                raise StateError(f"state.a: must be >= 0 (r non-decreasing), not {calibrator.a!r}")
        return calibrator

    def _sigmoid(self, p_top: FloatArray) -> FloatArray:
        r: FloatArray = expit(self.a * p_top + self.b)
        return r


def _rows(scores: FloatArray) -> tuple[FloatArray, IntArray, FloatArray]:
    """(rows renormalised to sum 1, the top class (first maximum), its probability).

    :class:`CalibrationError` naming the first row that is not a probability vector.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise CalibrationError(f"must be a 2-d matrix, not {s.ndim}-d", loc=("scores",))
    ok = probability_rows(s)
    if not ok.all():
        raise CalibrationError(
            "is not a probability vector; bostrom needs rows in [0,1] summing to 1",
            loc=("scores", int(np.argmin(ok))),
        )
    p = s / s.sum(axis=1, keepdims=True)  # sums within 1e-6 of 1: make them exact
    top = np.argmax(p, axis=1)
    return p, top, p[np.arange(top.size), top]
