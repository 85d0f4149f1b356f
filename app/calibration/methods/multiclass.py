"""Multiclass calibration: the protocol, one-vs-rest, and building a k-class calibrator.

Scores are an n x k matrix (logits or probability vectors), labels class indices 0..k-1.
Any binary method extends to k classes one-vs-rest: fitted per class on column j against
(y == j), then each row renormalised (Zadrozny & Elkan 2002, *Transforming Classifier Scores
into Accurate Multiclass Probability Estimates*; scikit-learn's ``CalibratedClassifierCV``).
Temperature scaling and Boström's correction are multiclass by construction.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol, Self, cast

import numpy as np

from app.calibration.base import (
    CalibrationError,
    Calibrator,
    FloatArray,
    IntervalCalibrator,
    JSONValue,
    StateError,
    check_state_keys,
)
from app.calibration.kernels.budget import checkpoint
from app.calibration.measures.multiclass_metrics import IntArray
from app.calibration.methods.registry import NATIVE_MULTICLASS, ONE_VS_REST

__all__ = ["MulticlassCalibrator", "OneVsRest", "load_multiclass", "make_multiclass"]


class MulticlassCalibrator(Protocol):
    """A k-class calibrator: ``fit`` on an n x k batch, ``predict`` rows that sum to 1.

    ``fit`` receives a batch checked by :func:`check_multiclass_batch`: finite scores,
    int64 labels in 0..k-1 (a class may be absent from a training fold), non-negative weights
    with a positive sum. Construction is the concrete class's: ``from_params(params)`` and
    ``from_state(params, state)`` for the k-class methods, ``OneVsRest(binary_cls, params)``
    and ``OneVsRest.from_state(binary_cls, params, state)`` for one-vs-rest, whose method
    name is its binary method's (an instance attribute, so not part of this protocol's
    class-level surface); :func:`make_multiclass` and :func:`load_multiclass` dispatch.
    """

    @property
    def method(self) -> str:
        """The method name (a class constant, or the binary method's for one-vs-rest)."""
        ...

    @property
    def params(self) -> dict[str, JSONValue]:
        """Every parameter with its effective value, defaults included."""
        ...

    def fit(self, scores: FloatArray, labels: IntArray, sample_weight: FloatArray) -> Self:
        """Fit on the n x k batch and return ``self``."""
        ...

    def predict(self, scores: FloatArray) -> FloatArray:
        """An n x k matrix of calibrated probabilities, each row summing to 1."""
        ...

    def state(self) -> dict[str, JSONValue]:
        """The fitted numbers as JSON-able values."""
        ...


def _each_class(k: int) -> Iterator[int]:
    """0, ..., k - 1, passing a checkpoint of the running job's budget before each: a loop
    over classes, not samples, but a 4-row batch of 40,000 classes is 40,000 fits."""
    for j in range(k):
        checkpoint()
        yield j


class OneVsRest:
    """A binary method per class, column j against (y == j), rows renormalised to sum to 1.

    A row whose calibrated values are all 0 becomes uniform, as in scikit-learn. The state is
    ``{"one_vs_rest": [state_0, ..., state_{k-1}]}``; ``method`` is the binary method's name.
    """

    def __init__(self, binary_cls: type[Calibrator], params: Mapping[str, object]) -> None:
        self.binary_cls = binary_cls
        self.method: str = binary_cls.method
        template = binary_cls.from_params(params)  # validates the params once
        self._params = template.params
        self.calibrators: list[Calibrator] = []

    @property
    def params(self) -> dict[str, JSONValue]:
        """The binary method's parameters, defaults included."""
        return dict(self._params)

    def fit(self, scores: FloatArray, labels: IntArray, sample_weight: FloatArray) -> Self:
        """Fit one binary calibrator per column; return ``self``."""
        self.calibrators = [
            self.binary_cls.from_params(self._params).fit(
                scores[:, j], (labels == j).astype(np.float64), sample_weight
            )
            for j in _each_class(scores.shape[1])
        ]
        return self

    def predict(self, scores: FloatArray) -> FloatArray:
        """Each column through its calibrator, then rows divided by their sums."""
        s = self._check(scores)
        p = np.column_stack([self.calibrators[j].predict(s[:, j]) for j in _each_class(s.shape[1])])
        total = p.sum(axis=1, keepdims=True)
        uniform = np.full_like(p, 1.0 / p.shape[1])
        out: FloatArray = np.divide(p, total, out=uniform, where=total > 0)
        return out

    def _check(self, scores: FloatArray) -> FloatArray:
        s = np.asarray(scores, dtype=np.float64)
        k = len(self.calibrators)
        if s.ndim != 2 or s.shape[1] != k:
            raise CalibrationError(
                f"must be a matrix with {k} columns, not {s.shape}", loc=("scores",)
            )
        return s

    def predict_interval(self, scores: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Each class's binary interval (class j against the rest) as n x k matrices (p0, p1),
        for a binary method that gives intervals. They bound the one-vs-rest probabilities,
        before the rows are renormalised, which is why the rows of ``predict`` may leave them."""
        s = self._check(scores)
        pairs = [
            cast(IntervalCalibrator, self.calibrators[j]).predict_interval(s[:, j])
            for j in _each_class(s.shape[1])
        ]
        return np.column_stack([p0 for p0, _ in pairs]), np.column_stack([p1 for _, p1 in pairs])

    def state(self) -> dict[str, JSONValue]:
        """``{"one_vs_rest": [state of class 0, ..., state of class k-1]}``."""
        return {"one_vs_rest": [c.state() for c in self.calibrators]}

    @classmethod
    def from_state(
        cls, binary_cls: type[Calibrator], params: Mapping[str, object], state: object
    ) -> Self:
        """Rebuild; :class:`StateError` unless ``one_vs_rest`` lists >= 2 valid binary states."""
        calibrator = cls(binary_cls, params)
        if not isinstance(state, Mapping):
            raise StateError(f"state: must be an object, not {type(state).__name__}")
        check_state_keys(state, ("one_vs_rest",))
        states = state["one_vs_rest"]
        if not isinstance(states, list) or len(states) < 2:
            raise StateError("state.one_vs_rest: must list the states of at least 2 classes")
        for j, binary_state in enumerate(states):
            if not isinstance(binary_state, Mapping):
                raise StateError(f"state.one_vs_rest[{j}]: must be an object")
        calibrator.calibrators = [binary_cls.from_state(calibrator._params, s) for s in states]
        return calibrator


def make_multiclass(method: str, params: Mapping[str, object]) -> MulticlassCalibrator:
    """An unfitted k-class calibrator: temperature, bostrom, or a binary method one-vs-rest.

    :class:`CalibrationError` for an unknown method (``auto`` too), :class:`ParamError` for
    bad params.
    """
    if method in NATIVE_MULTICLASS:
        calibrator: MulticlassCalibrator = NATIVE_MULTICLASS[method].from_params(params)
        return calibrator
    if method in ONE_VS_REST:
        return OneVsRest(ONE_VS_REST[method], params)
    known = ", ".join((*NATIVE_MULTICLASS, *ONE_VS_REST))
    raise CalibrationError(f"unknown method {method!r}; expected one of {known}", loc=("method",))


def load_multiclass(
    method: str, params: Mapping[str, object], state: Mapping[str, object]
) -> MulticlassCalibrator:
    """Rebuild a fitted k-class calibrator; :class:`StateError` for an unknown method or state."""
    if not isinstance(state, Mapping):
        raise StateError(f"state: must be an object, not {type(state).__name__}")
    if method in NATIVE_MULTICLASS:
        calibrator: MulticlassCalibrator = NATIVE_MULTICLASS[method].from_state(params, state)
        return calibrator
    if method in ONE_VS_REST:
        return OneVsRest.from_state(ONE_VS_REST[method], params, state)
    known = ", ".join((*NATIVE_MULTICLASS, *ONE_VS_REST))
    raise StateError(f"method: unknown method {method!r}; expected one of {known}")
