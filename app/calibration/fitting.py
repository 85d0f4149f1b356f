"""The entry points the service uses: build, fit (with out-of-fold predictions) and load."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import (
    CalibrationError,
    Calibrator,
    FloatArray,
    JSONValue,
    StateError,
    check_batch,
)
from app.calibration.beta import BetaCalibrator, require_open_unit_interval
from app.calibration.binning import HistogramBinning
from app.calibration.crossval import out_of_fold_predictions
from app.calibration.isotonic import IsotonicCalibrator
from app.calibration.logistic import LogisticCorrection
from app.calibration.minmax import MinMaxScaling
from app.calibration.multiclass import (
    MULTICLASS_ONLY,
    MulticlassCalibrator,
    fit_multiclass,
    load_multiclass,
)
from app.calibration.platt import PlattCalibrator
from app.calibration.selection import auto_params, make_candidate, select_method

_CalibratorClass = type[
    PlattCalibrator
    | IsotonicCalibrator
    | LogisticCorrection
    | BetaCalibrator
    | HistogramBinning
    | MinMaxScaling
]
_CALIBRATORS: dict[str, _CalibratorClass] = {
    cls.method: cls
    for cls in (
        PlattCalibrator,
        IsotonicCalibrator,
        LogisticCorrection,
        BetaCalibrator,
        HistogramBinning,
        MinMaxScaling,
    )
}
CALIBRATOR_METHODS: tuple[str, ...] = tuple(_CALIBRATORS)
"""Methods with a calibrator of their own: what a stored version's ``method`` can be."""
METHODS: tuple[str, ...] = (*CALIBRATOR_METHODS, *MULTICLASS_ONLY, "auto")
"""The methods :func:`fit_calibrator` accepts; ``auto`` resolves to one of its candidates."""
BINARY_ONLY: tuple[str, ...] = ("logistic_correction", "minmax")
"""Methods that make no sense one-vs-rest on a multiclass batch."""
_ONE_VS_REST: dict[str, _CalibratorClass] = {
    name: cls for name, cls in _CALIBRATORS.items() if name not in BINARY_ONLY
}
"""Binary methods that calibrate a multiclass batch one class against the rest."""
PROBABILITY_METHODS: tuple[str, ...] = ("beta",)
"""Methods whose scores must lie strictly between 0 and 1."""


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


def make_calibrator(method: str, params: Mapping[str, object]) -> Calibrator:
    """An unfitted calibrator of ``method`` with validated ``params``.

    :class:`CalibrationError` for an unknown method (``auto`` included: it has no calibrator
    of its own), :class:`ParamError` for bad params.
    """
    cls = _CALIBRATORS.get(method)
    if cls is None:
        raise CalibrationError(
            f"method: unknown method {method!r}; expected one of {', '.join(CALIBRATOR_METHODS)}"
        )
    return cls.from_params(params)


def load_calibrator(
    method: str,
    params: Mapping[str, object],
    state: Mapping[str, object],
    *,
    n_classes: int = 2,
) -> Calibrator | MulticlassCalibrator:
    """Rebuild a fitted calibrator from its stored method, params and state.

    ``n_classes`` > 2 rebuilds a multiclass calibrator (one-vs-rest, temperature, bostrom).
    :class:`StateError` when ``state`` is not a valid state of ``method``.
    """
    if n_classes > 2:
        return load_multiclass(method, params, state, _ONE_VS_REST)
    cls = _CALIBRATORS.get(method)
    if cls is None:
        raise StateError(
            f"method: unknown method {method!r}; expected one of {', '.join(CALIBRATOR_METHODS)}"
        )
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
    """Fit ``method`` on the batch and cross-validate it: the one fitting entry point.

    Parameters
    ----------
    method : str
        One of :data:`METHODS`.
    params : mapping
        The method's parameters, validated before any work (:class:`ParamError`).
    scores, labels, sample_weight : ndarray
        The batch: finite scores, a vector with 0/1 labels (binary) or an n x k matrix with
        labels 0..k-1 (multiclass: :func:`~app.calibration.multiclass.fit_multiclass`, with
        one-vs-rest for the binary methods); both classes, n >= 2; weights non-negative
        with a positive sum, ``None`` for all ones.
    n_folds : int
        Folds of the out-of-fold predictions (reduced for a rare class, see
        :func:`~app.calibration.crossval.effective_folds`).
    n_jobs : int
        joblib workers (threads) for the folds.

    Returns
    -------
    FitOutcome
        ``out_of_fold`` comes from :func:`out_of_fold_predictions` with the same method and
        params. For ``auto`` (params ``{"cv": 2..20}``) the selection's ``cv`` folds decide
        and ``out_of_fold`` reuses them: the chosen candidate's predictions from the
        selection, not a second run (``n_folds`` does not apply to ``auto``).

    Raises
    ------
    CalibrationError
        An unknown method or an invalid batch; :class:`ParamError` for bad params.
    """
    if method in PROBABILITY_METHODS:
        # checked on the whole batch, so that the error names the batch's index, not a fold's
        require_open_unit_interval(np.asarray(scores, dtype=np.float64), method)
    if np.ndim(scores) == 2:
        if method in BINARY_ONLY:
            raise CalibrationError(
                f"scores: is an n x k matrix but method {method!r} is binary; send a vector"
            )
        fitted = fit_multiclass(
            method,
            params,
            scores,
            np.asarray(labels, dtype=np.int64),
            sample_weight,
            binary=_ONE_VS_REST,
            n_folds=n_folds,
            n_jobs=n_jobs,
        )
        return FitOutcome(
            fitted.calibrator, fitted.method, fitted.params, fitted.out_of_fold, fitted.selection
        )
    if method in MULTICLASS_ONLY:
        raise CalibrationError(
            f"scores: is a vector but method {method!r} is multiclass; send an n x k matrix"
        )
    if method == "auto":
        cv = auto_params(params)["cv"]
    else:
        calibrator = make_calibrator(method, params)
    f, y, w = check_batch(scores, np.asarray(labels, dtype=np.float64), sample_weight)
    n_pos = int(y.sum())
    if f.size < 2 or n_pos in (0, f.size):
        raise CalibrationError("labels: calibration needs at least 2 points and both classes")
    if method == "auto":
        selection = select_method(f, y, w, cv=cv, n_jobs=n_jobs)
        chosen = selection.chosen
        calibrator = make_candidate(chosen).fit(f, y, w)
        return FitOutcome(
            calibrator,
            chosen.method,
            calibrator.params,
            selection.out_of_fold[chosen.label],
            selection.record(),
        )
    effective = calibrator.params
    out_of_fold = out_of_fold_predictions(
        lambda: make_calibrator(method, effective), f, y, w, n_folds, n_jobs
    )
    return FitOutcome(calibrator.fit(f, y, w), method, effective, out_of_fold, None)
