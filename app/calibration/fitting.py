"""The entry points the service uses: build, fit (with out-of-fold predictions) and load."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import CalibrationError, Calibrator, FloatArray, JSONValue, StateError
from app.calibration.kernels.bounds import BOUND_KEY
from app.calibration.kernels.checks import check_batch
from app.calibration.kernels.crossval import (
    effective_class_folds,
    fold_runs,
    predict_folds,
    stratified_class_folds,
)
from app.calibration.kernels.pooling import score_order
from app.calibration.measures.multiclass_metrics import check_multiclass_batch
from app.calibration.methods.beta import require_open_unit_interval
from app.calibration.methods.candidates import AutoSpec, Candidate, eligible_candidates
from app.calibration.methods.multiclass import (
    MulticlassCalibrator,
    load_multiclass,
    make_multiclass,
)
from app.calibration.methods.prior_adjusted import ADJUSTMENTS, PriorAdjusted, split_state
from app.calibration.methods.registry import (
    BINARY,
    BINARY_ONLY,
    MULTICLASS_ONLY,
    PROBABILITY_METHODS,
)
from app.calibration.methods.selection import select


@dataclass(frozen=True)
class FitOutcome:
    """A fitted calibrator with its out-of-sample predictions on the fitting batch.

    ``calibrator`` is fitted on the whole batch and ``method``/``params`` describe it (for
    ``auto``: the chosen candidate's method, e.g. ``"isotonic"``, and its effective params,
    e.g. ``{"interpolation": "linear"}``; the candidate's label is the record's ``chosen``).
    ``out_of_fold`` holds one k-fold out-of-sample probability per point. ``selection`` is
    ``auto``'s record (:meth:`Selection.record`), ``None`` for the other methods.
    """

    calibrator: Calibrator | MulticlassCalibrator
    method: str
    params: dict[str, JSONValue]
    out_of_fold: FloatArray
    selection: dict[str, JSONValue] | None


@dataclass(frozen=True)
class Progress:
    """What a fit tells its caller as it goes, so that work can start meanwhile (a service
    measures the raw scores while it fits: :class:`~app.calibration.measures.headline_reports.
    HeadlineReports`): the method and params checked, then the out-of-fold predictions (in
    the batch's order), known before the final fit, with their runs where the fit sorted the
    batch (:func:`~app.calibration.kernels.crossval.fold_runs`, a hint for the caller's sorts;
    else None)."""

    checked: Callable[[], None] = lambda: None
    out_of_fold: Callable[[FloatArray, NDArray[np.intp] | None], None] = lambda p, runs: None


def make_calibrator(method: str, params: Mapping[str, object]) -> Calibrator:
    """An unfitted binary calibrator of ``method`` with validated ``params``.

    :class:`CalibrationError` for an unknown method (``auto`` included: it has no calibrator
    of its own), :class:`ParamError` for bad params.
    """
    cls = BINARY.get(method)
    if cls is None:
        raise CalibrationError(
            f"unknown method {method!r}; expected one of {', '.join(BINARY)}", loc=("method",)
        )
    return cls.from_params(params)


def load_calibrator(
    method: str, params: Mapping[str, object], state: Mapping[str, object], *, n_classes: int = 2
) -> Calibrator | MulticlassCalibrator:
    """Rebuild a fitted calibrator from its stored method, params and state.

    ``n_classes`` > 2 rebuilds a multiclass calibrator (one-vs-rest, temperature, bostrom); a
    state with ``"adjustments"``, the method's followed by those Bayes steps (PriorAdjusted).
    :class:`StateError` when ``state`` is not a valid state of ``method``.
    """
    if isinstance(state, Mapping) and ADJUSTMENTS in state:
        base, steps = split_state(state, n_classes)
        return PriorAdjusted(load_calibrator(method, params, base, n_classes=n_classes), steps)
    if n_classes > 2:
        return load_multiclass(method, params, state)
    cls = BINARY.get(method)
    if cls is None:
        raise StateError(f"method: unknown method {method!r}; expected one of {', '.join(BINARY)}")
    if not isinstance(state, Mapping):
        raise StateError(f"state: must be an object, not {type(state).__name__}")
    return cls.from_state(params, state)


def fit_calibrator(
    method: str,
    params: Mapping[str, object],
    scores: FloatArray,
    labels: FloatArray | NDArray[np.int64],
    sample_weight: FloatArray | None,
    *,
    n_folds: int = 5,
    n_jobs: int = 1,
) -> FitOutcome:
    """Fit ``method`` on the batch and cross-validate it: the fitting entry point for arrays as
    they come, which checks them first (:func:`fit_checked_batch` for a batch checked already).

    Parameters
    ----------
    method : str
        One of :data:`~app.calibration.methods.registry.METHODS`.
    params : mapping
        The method's parameters, validated before any work (:class:`ParamError`).
    scores, labels, sample_weight : ndarray
        The batch: finite scores, a vector with 0/1 labels (binary) or an n x k matrix with
        labels 0..k-1 (multiclass: temperature, bostrom, or a binary method one-vs-rest);
        both classes, n >= 2; weights non-negative with a positive sum, ``None`` for all ones.
    n_folds : int
        Folds of the out-of-fold predictions (reduced for a rare class, see
        :func:`~app.calibration.kernels.crossval.effective_class_folds`).
    n_jobs : int
        joblib workers (threads) for the folds.

    Returns
    -------
    FitOutcome
        ``out_of_fold`` are the k-fold predictions of the same method and params. For
        ``auto`` (:class:`~app.calibration.methods.candidates.AutoSpec`) its ``cv`` folds decide and
        ``out_of_fold`` reuses them: the chosen candidate's predictions from the selection,
        not a second run (``n_folds`` does not apply to ``auto``).

    Raises
    ------
    CalibrationError
        An unknown method or an invalid batch; :class:`ParamError` for bad params.
    """
    matrix = np.ndim(scores) == 2
    spec, effective = _method_for(method, params, scores, matrix)
    if matrix:
        s, classes, w = check_multiclass_batch(scores, labels, sample_weight)
        y: NDArray[Any] = classes
    else:
        s, y, w = check_batch(scores, np.asarray(labels, dtype=np.float64), sample_weight)
        classes = y.astype(np.int64)
    if s.shape[0] < 2 or np.count_nonzero(np.bincount(classes)) < 2:
        what = "of 2 classes" if matrix else "and both classes"
        raise CalibrationError(f"calibration needs at least 2 points {what}", loc=("labels",))
    return _fit(method, spec, effective, s, y, w, classes, n_folds=n_folds, n_jobs=n_jobs)


def fit_checked_batch(
    method: str,
    params: Mapping[str, object],
    scores: FloatArray,
    labels: NDArray[np.int64],
    weights: FloatArray,
    *,
    n_folds: int = 5,
    n_jobs: int = 1,
    progress: Progress | None = None,
) -> FitOutcome:
    """:func:`fit_calibrator` on a batch its caller has checked already, as the service's edge
    does (:mod:`app.service.batches`: finite scores of a shape the method takes, integer labels
    in range with two classes present, weights finite, non-negative with a positive sum): the
    batch is trusted, not checked again; the method and its params still are (then
    ``progress.checked`` is called, and ``progress.out_of_fold`` before the final fit)."""
    matrix = scores.ndim == 2
    spec, effective = _method_for(method, params, scores, matrix)
    progress = progress or Progress()
    progress.checked()
    y: NDArray[Any] = labels if matrix else labels.astype(np.float64)
    batch = (scores, y, weights, labels)
    return _fit(method, spec, effective, *batch, n_folds=n_folds, n_jobs=n_jobs, progress=progress)


def _method_for(
    method: str, params: Mapping[str, object], scores: object, matrix: bool
) -> tuple[AutoSpec | None, dict[str, JSONValue]]:
    """``auto``'s spec (None for another method) and the method's effective params, checked
    against the batch's shape and, for the methods of probabilities, its range."""
    if method in PROBABILITY_METHODS:
        # checked on the whole batch, so that the error names the batch's index, not a fold's
        require_open_unit_interval(np.asarray(scores, dtype=np.float64), method)
    if matrix and method in BINARY_ONLY:
        raise CalibrationError(
            f"is an n x k matrix but method {method!r} is binary; send a vector", loc=("scores",)
        )
    if not matrix and method in MULTICLASS_ONLY:
        raise CalibrationError(
            f"is a vector but method {method!r} is multiclass; send an n x k matrix",
            loc=("scores",),
        )
    spec = AutoSpec.from_params(params) if method == "auto" else None
    effective = {} if spec else _build(method, params, matrix).params
    return spec, effective


def _fit(
    method: str,
    spec: AutoSpec | None,
    effective: dict[str, JSONValue],
    s: FloatArray,
    y: NDArray[Any],
    w: FloatArray,
    classes: NDArray[np.int64],
    *,
    n_folds: int,
    n_jobs: int,
    progress: Progress | None = None,
) -> FitOutcome:
    """The fit and its out-of-fold predictions, on a checked batch (``y`` float 0/1 for a
    binary batch, the class indices for a k-class one), telling ``progress`` of its out-of-fold
    predictions before the final fit."""
    progress = progress or Progress()
    matrix = s.ndim == 2
    k = effective_class_folds(classes, spec.cv if spec else n_folds)
    folds = stratified_class_folds(classes, k, sample_weight=w)
    batch = (s, y, w)  # what a direct fit would see (but see final() below)
    order, spread = (None, False) if matrix else score_order(s)
    if order is not None:
        # Sorted once here, every fold's training part is sorted too (a subsequence of a
        # sorted array), so no fold or candidate sorts again (pool_ties checks in one pass).
        s, y, w, folds = s[order], y[order], w[order], folds[order]

    def final(method: str, params: Mapping[str, object]) -> tuple[FloatArray, ...]:
        """What the final fit reads: the sorted batch where a fit of it is that of the batch
        as sent to the last bit (:data:`ORDER_FREE`), saving its sort; else the batch as sent."""
        free = spread and method in ORDER_FREE and "trim" not in params
        # a bound's effective size sums the weights, in their order unless all are equal
        if BOUND_KEY in params and not bool(np.all(w == w[0])):
            free = False
        return (s, y, w) if free else batch

    if spec is None:
        out_of_fold = predict_folds(
            lambda: _build(method, effective, matrix), s, y, w, folds, n_jobs
        )
        out_of_fold = _in_input_order(out_of_fold, order)
        progress.out_of_fold(out_of_fold, fold_runs(order, folds))
        calibrator = _build(method, effective, matrix).fit(*final(method, effective))
        return FitOutcome(calibrator, method, effective, out_of_fold, None)
    candidates, skipped = eligible_candidates(spec, s)
    if not candidates:
        raise CalibrationError(
            "none of them can fit this batch ("
            + "; ".join(f"{label} {why}" for label, why in skipped.items())
            + ")",
            loc=("params", "candidates"),
        )
    selection = select(
        candidates,
        lambda c: _build(c.method, c.params, matrix),
        s,
        y,
        w,
        folds,
        skipped=skipped,
        n_jobs=n_jobs,
    )
    chosen: Candidate = selection.chosen
    out_of_fold = _in_input_order(selection.out_of_fold[chosen.label], order)
    progress.out_of_fold(out_of_fold, fold_runs(order, folds))
    calibrator = _build(chosen.method, chosen.params, matrix)
    calibrator.fit(*final(chosen.method, chosen.params))
    return FitOutcome(calibrator, chosen.method, calibrator.params, out_of_fold, selection.record())


ORDER_FREE = frozenset({"isotonic", "platt"})
"""Methods whose fit, untrimmed, reads a batch of spread scores
(:func:`~app.calibration.kernels.pooling.score_order`) only through its sorted (score, label,
weight) triples, so that the batch sorted is the batch as sent to the last bit (trimming's
internal folds pick rows by position: not those; nor a bound's sums of unequal weights, see
:func:`_fit`).
"""


def _in_input_order(values: FloatArray, order: NDArray[np.intp] | None) -> FloatArray:
    """``values`` computed on the batch permuted by ``order``, put back in input order."""
    if order is None:
        return values
    restored = np.empty_like(values)
    restored[order] = values
    return restored


def _build(method: str, params: Mapping[str, object], matrix: bool) -> Any:
    """An unfitted calibrator of ``method``: binary, or k-class (natively or one-vs-rest)."""
    return make_multiclass(method, params) if matrix else make_calibrator(method, params)
