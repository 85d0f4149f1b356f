"""The checks a binary batch passes before any method or measure sees it.

Validation happens once, at the boundary: :func:`check_batch` for a fit or a measure on
scores, :func:`check_probabilities` for a measure on probabilities. What they return is trusted
by everything after them.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import CalibrationError, FloatArray


def check_batch(
    scores: object, labels: object, sample_weight: object = None, *, scores_field: str = "scores"
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Check a binary batch and return it as three 1-d float64 arrays (weights default to 1).

    Raises :class:`CalibrationError` naming the field: ``scores`` (or ``scores_field``) must be
    finite, ``labels`` 0/1, ``sample_weight`` finite, non-negative with a positive sum, and all
    three of one length n >= 1. The weights may be of any finite size, their sum too
    (see :func:`~app.calibration.kernels.weights.relative_weights`).
    """
    f = _float_vector(scores, scores_field)
    y = _float_vector(labels, "labels")
    if f.size == 0:
        raise CalibrationError("the batch is empty", loc=(scores_field,))
    if y.size != f.size:
        raise CalibrationError(f"has {y.size} values for {f.size} {scores_field}", loc=("labels",))
    if not np.all(np.isfinite(f)):
        raise CalibrationError("must be finite", loc=(scores_field, _first(~np.isfinite(f))))
    bad = (y != 0.0) & (y != 1.0)
    if bad.any():
        raise CalibrationError("must be 0 or 1", loc=("labels", _first(bad)))
    if sample_weight is None:
        return f, y, np.ones_like(f)
    w = _float_vector(sample_weight, "sample_weight")
    if w.size != f.size:
        raise CalibrationError(
            f"has {w.size} values for {f.size} {scores_field}", loc=("sample_weight",)
        )
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        raise CalibrationError("must be finite and >= 0", loc=("sample_weight", _first(bad)))
    if not w.max() > 0:  # not w.sum(): finite weights may have a sum past 1.8e308
        raise CalibrationError("the weights must have a positive sum", loc=("sample_weight",))
    return f, y, w


def check_probabilities(
    p: FloatArray, y: FloatArray, w: FloatArray | None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """:func:`check_batch` of probabilities: the scores must also lie in [0, 1]."""
    p, y, w = check_batch(p, y, w, scores_field="probabilities")
    if p.min() < 0.0 or p.max() > 1.0:
        raise CalibrationError("must lie in [0, 1]", loc=("probabilities",))
    return p, y, w


def _float_vector(values: object, field: str) -> FloatArray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise CalibrationError("must be an array of numbers", loc=(field,)) from None
    if array.ndim != 1:
        raise CalibrationError(f"must be a 1-d array, not {array.ndim}-d", loc=(field,))
    return array


def _first(mask: NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(mask)[0])
