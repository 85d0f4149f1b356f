"""One entry point for the measures, binary (vectors) or multiclass (n x k matrices).

The service asks for a version's headline metrics and reliability report without caring how
many classes there are; this module picks :mod:`app.calibration.metrics` or
:mod:`app.calibration.multiclass_metrics` by the shape of the probabilities.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import CalibrationError, FloatArray
from app.calibration.metrics import headline_metrics, scale_raw_scores, summarize
from app.calibration.multiclass_metrics import (
    headline_multiclass,
    raw_probabilities,
    summarize_multiclass,
)


def raw_as_probabilities(scores: FloatArray) -> FloatArray:
    """The raw scores as probabilities for their "before" report: min-max scaled margins
    (binary, as the paper does for SVMs), or the rows themselves / their softmax (multiclass)."""
    return raw_probabilities(scores) if scores.ndim == 2 else scale_raw_scores(scores)


def headline(
    probabilities: FloatArray, labels: NDArray[np.int64], weights: FloatArray | None
) -> dict[str, Any]:
    """The metrics stored with a version (``metrics.cv`` and ``metrics.raw``)."""
    if probabilities.ndim == 2:
        return headline_multiclass(probabilities, labels, weights)
    return headline_metrics(probabilities, labels.astype(np.float64), weights)


def reliability_report(
    probabilities: FloatArray,
    labels: NDArray[np.int64],
    weights: FloatArray | None,
    *,
    n_bins: int,
    strategy: str,
    class_index: int | None = None,
) -> dict[str, Any]:
    """Reliability bins and metrics: binary, top-label (multiclass) or one class against the
    rest (``class_index``)."""
    if probabilities.ndim == 2:
        k = probabilities.shape[1]
        if class_index is not None and not 0 <= class_index < k:
            raise CalibrationError(f"is {class_index}; expected 0..{k - 1}", loc=("class_index",))
        return summarize_multiclass(
            probabilities,
            labels,
            weights,
            n_bins=n_bins,
            strategy=strategy,
            class_index=class_index,
        )
    if class_index in (None, 1):
        y = labels.astype(np.float64)
        return summarize(probabilities, y, weights, n_bins=n_bins, strategy=strategy)
    if class_index == 0:
        y = np.subtract(1.0, labels, dtype=np.float64)  # 1 - y, without a copy of y
        return summarize(1.0 - probabilities, y, weights, n_bins=n_bins, strategy=strategy)
    raise CalibrationError(
        f"is {class_index}; a binary calibrator has classes 0, 1", loc=("class_index",)
    )
