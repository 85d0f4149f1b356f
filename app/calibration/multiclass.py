"""Multiclass calibration: the protocol, one-vs-rest, and the fitting entry points.

Scores are an n x k matrix (logits or probability vectors), labels class indices 0..k-1.
Any binary method extends to k classes one-vs-rest: fitted per class on column j against
(y == j), then each row renormalised (Zadrozny & Elkan 2002, *Transforming Classifier Scores
into Accurate Multiclass Probability Estimates*; scikit-learn's ``CalibratedClassifierCV``).
Temperature scaling and Boström's correction are multiclass by construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Protocol, Self

import numpy as np

from app.calibration.base import (
    CalibrationError,
    Calibrator,
    FloatArray,
    JSONValue,
    StateError,
    check_param_keys,
    check_state_keys,
    int_param,
)
from app.calibration.bostrom import BostromCalibrator
from app.calibration.crossval import (
    effective_class_folds,
    predict_folds,
    stratified_class_folds,
)
from app.calibration.multiclass_metrics import (
    IntArray,
    check_multiclass_batch,
    is_probability_matrix,
    multiclass_log_loss,
)
from app.calibration.temperature import TemperatureScaling

__all__ = [
    "MULTICLASS_ONLY",
    "MulticlassCalibrator",
    "MulticlassFit",
    "OneVsRest",
    "check_multiclass_batch",
    "fit_multiclass",
    "is_probability_matrix",
    "load_multiclass",
    "make_multiclass",
]

MULTICLASS_ONLY = ("temperature", "bostrom")
"""Methods that exist only for k classes; every binary method also runs one-vs-rest."""
AUTO_ORDER = ("temperature", "bostrom", "platt", "isotonic")
"""``auto``'s candidates, simplest first: a tie (relative 1e-12) goes to the earlier one."""
TIE_RTOL = 1e-12
METRIC = "log_loss"


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
            for j in range(scores.shape[1])  # a loop over classes, not samples
        ]
        return self

    def predict(self, scores: FloatArray) -> FloatArray:
        """Each column through its calibrator, then rows divided by their sums."""
        s = np.asarray(scores, dtype=np.float64)
        k = len(self.calibrators)
        if s.ndim != 2 or s.shape[1] != k:
            raise CalibrationError(f"scores: must be a matrix with {k} columns, not {s.shape}")
        p = np.column_stack([c.predict(s[:, j]) for j, c in enumerate(self.calibrators)])
        total = p.sum(axis=1, keepdims=True)
        out: FloatArray = np.divide(p, total, out=np.full_like(p, 1.0 / k), where=total > 0)
        return out

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


@dataclass(frozen=True)
class MulticlassFit:
    """A fitted k-class calibrator with its out-of-fold predictions (n x k) on the batch.

    ``method``/``params`` describe ``calibrator`` (for ``auto``: the chosen candidate with
    default params); ``selection`` is ``auto``'s record, ``None`` otherwise.
    """

    calibrator: MulticlassCalibrator
    method: str
    params: dict[str, JSONValue]
    out_of_fold: FloatArray
    selection: dict[str, JSONValue] | None


def make_multiclass(
    method: str, params: Mapping[str, object], binary: Mapping[str, type[Calibrator]]
) -> MulticlassCalibrator:
    """An unfitted k-class calibrator: temperature, bostrom, or a ``binary`` method one-vs-rest.

    :class:`CalibrationError` for an unknown method (``auto`` too), :class:`ParamError` for
    bad params.
    """
    if method == TemperatureScaling.method:
        return TemperatureScaling.from_params(params)
    if method == BostromCalibrator.method:
        return BostromCalibrator.from_params(params)
    if method in binary:
        return OneVsRest(binary[method], params)
    known = ", ".join((*MULTICLASS_ONLY, *binary))
    raise CalibrationError(f"method: unknown method {method!r}; expected one of {known}")


def load_multiclass(
    method: str,
    params: Mapping[str, object],
    state: Mapping[str, object],
    binary: Mapping[str, type[Calibrator]],
) -> MulticlassCalibrator:
    """Rebuild a fitted k-class calibrator; :class:`StateError` for an unknown method or state."""
    if not isinstance(state, Mapping):
        raise StateError(f"state: must be an object, not {type(state).__name__}")
    if method == TemperatureScaling.method:
        return TemperatureScaling.from_state(params, state)
    if method == BostromCalibrator.method:
        return BostromCalibrator.from_state(params, state)
    if method in binary:
        return OneVsRest.from_state(binary[method], params, state)
    known = ", ".join((*MULTICLASS_ONLY, *binary))
    raise StateError(f"method: unknown method {method!r}; expected one of {known}")


def fit_multiclass(
    method: str,
    params: Mapping[str, object],
    scores: object,
    labels: object,
    sample_weight: object,
    *,
    binary: Mapping[str, type[Calibrator]],
    n_folds: int = 5,
    n_jobs: int = 1,
) -> MulticlassFit:
    """Fit ``method`` on an n x k batch with ``n_folds`` out-of-fold predictions.

    ``auto`` (params ``{"cv": 2..20, default 5}``) scores temperature, bostrom (only when the
    rows are probability vectors), one-vs-rest platt and isotonic (when in ``binary``) by
    ``cv``-fold weighted multiclass log loss on shared stratified folds, refits the best
    (ties to the simpler, :data:`AUTO_ORDER`) and reuses its out-of-fold predictions.
    :class:`CalibrationError` for an invalid batch: n >= 2 rows and 2 classes present.
    """
    if method == "auto":
        check_param_keys("auto", params, ("cv",))
        cv = int_param(params, "cv", 2, 20, 5)
    else:
        effective = make_multiclass(method, params, binary).params
    s, y, w = check_multiclass_batch(scores, labels, sample_weight)
    if np.count_nonzero(np.bincount(y)) < 2:
        raise CalibrationError("labels: calibration needs at least 2 points of 2 classes")
    if method != "auto":
        folds = stratified_class_folds(y, effective_class_folds(y, n_folds), sample_weight=w)
        oof = predict_folds(
            partial(make_multiclass, method, effective, binary), s, y, w, folds, n_jobs
        )
        calibrator = make_multiclass(method, effective, binary).fit(s, y, w)
        return MulticlassFit(calibrator, method, effective, oof, None)
    k_folds = effective_class_folds(y, cv)
    folds = stratified_class_folds(y, k_folds, sample_weight=w)
    candidates = [
        name
        for name in AUTO_ORDER
        if (name in MULTICLASS_ONLY or name in binary)
        and (name != BostromCalibrator.method or is_probability_matrix(s))
    ]
    out_of_fold = {
        name: predict_folds(partial(make_multiclass, name, {}, binary), s, y, w, folds, n_jobs)
        for name in candidates
    }
    losses = {name: multiclass_log_loss(p, y, w) for name, p in out_of_fold.items()}
    chosen = candidates[0]
    for name in candidates[1:]:
        best = losses[chosen]
        if losses[name] < best - TIE_RTOL * max(abs(losses[name]), abs(best)):
            chosen = name
    calibrator = make_multiclass(chosen, {}, binary).fit(s, y, w)
    record: dict[str, JSONValue] = {
        "chosen": chosen,
        "cv_folds": k_folds,
        "metric": METRIC,
        "candidates": {name: {METRIC: loss} for name, loss in losses.items()},
    }
    return MulticlassFit(calibrator, chosen, calibrator.params, out_of_fold[chosen], record)
