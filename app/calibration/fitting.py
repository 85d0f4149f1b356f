"""The entry points the service uses: build, fit (with out-of-fold predictions) and load."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.calibration.base import (
    CalibrationError,
    Calibrator,
    FloatArray,
    JSONValue,
    StateError,
    check_batch,
)
from app.calibration.crossval import out_of_fold_predictions
from app.calibration.isotonic import IsotonicCalibrator
from app.calibration.logistic import LogisticCorrection
from app.calibration.platt import PlattCalibrator
from app.calibration.selection import CANDIDATES, auto_params, select_method

_CALIBRATORS: dict[str, type[PlattCalibrator | IsotonicCalibrator | LogisticCorrection]] = {
    cls.method: cls for cls in (PlattCalibrator, IsotonicCalibrator, LogisticCorrection)
}
CALIBRATOR_METHODS: tuple[str, ...] = tuple(_CALIBRATORS)
"""Methods with a calibrator of their own: what a stored version's ``method`` can be."""
METHODS: tuple[str, ...] = (*CALIBRATOR_METHODS, "auto")
"""The methods :func:`fit_calibrator` accepts; ``auto`` resolves to one of its candidates."""


@dataclass(frozen=True)
class FitOutcome:
    """A fitted calibrator with its out-of-sample predictions on the fitting batch.

    ``calibrator`` is fitted on the whole batch and ``method``/``params`` describe it (for
    ``auto``: the chosen candidate, e.g. ``"isotonic"``, and its default params).
    ``out_of_fold`` holds one k-fold out-of-sample probability per point. ``selection`` is
    ``auto``'s record (:meth:`Selection.record`), ``None`` for the other methods.
    """

    calibrator: Calibrator
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
    method: str, params: Mapping[str, object], state: Mapping[str, object]
) -> Calibrator:
    """Rebuild a fitted calibrator from its stored method, params and state.

    :class:`StateError` when ``state`` is not a valid state of ``method``.
    """
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
    labels: FloatArray,
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
        The batch: finite scores, 0/1 labels with both classes, n >= 2; weights
        non-negative with a positive sum, ``None`` for all ones.
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
    if method == "auto":
        cv = auto_params(params)["cv"]
    else:
        calibrator = make_calibrator(method, params)
    f, y, w = check_batch(scores, labels, sample_weight)
    n_pos = int(y.sum())
    if f.size < 2 or n_pos in (0, f.size):
        raise CalibrationError("labels: calibration needs at least 2 points and both classes")
    if method == "auto":
        selection = select_method(f, y, w, cv=cv, n_jobs=n_jobs)
        calibrator = CANDIDATES[selection.chosen]().fit(f, y, w)
        return FitOutcome(
            calibrator,
            selection.chosen,
            calibrator.params,
            selection.out_of_fold[selection.chosen],
            selection.record(),
        )
    effective = calibrator.params
    out_of_fold = out_of_fold_predictions(
        lambda: make_calibrator(method, effective), f, y, w, n_folds, n_jobs
    )
    return FitOutcome(calibrator.fit(f, y, w), method, effective, out_of_fold, None)
