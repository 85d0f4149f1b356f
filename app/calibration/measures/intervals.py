"""What a report shows of its resamples: each measure's 95% interval, and its smoothed
curve's band (:func:`~app.calibration.measures.report_bootstrap.bootstrap` draws them).

The interval of the log loss, Brier score, accuracy, AUC, calibration slope and intercept is
the percentile interval; a calibration error's (ECE, smooth ECE) the basic interval that
reaches 0 where the test of perfect calibration does not reject
(:mod:`app.calibration.measures.bootstrap`).
"""

from __future__ import annotations

import numpy as np

from app.calibration.base import FloatArray
from app.calibration.measures.bootstrap import (
    LEVEL,
    Interval,
    calibration_error_interval,
    percentile_interval,
)
from app.calibration.measures.report import Band

CALIBRATION_ERRORS = ("ece", "smooth_ece")
"""Measures whose interval is
:func:`~app.calibration.measures.bootstrap.calibration_error_interval`."""
PERCENTILE = ("log_loss", "brier", "accuracy", "auc", "calibration_slope", "calibration_intercept")
"""Measures whose interval is the percentile interval."""


def curve_band(curves: FloatArray | None) -> Band | None:
    """The pointwise 2.5% and 97.5% quantiles of the resampled curves (resamples x mesh),
    relplot's band; None without curves. numpy's nanquantile, a column at a time, for NaNs only."""
    if curves is None:
        return None
    levels = [(1.0 - LEVEL) / 2.0, (1.0 + LEVEL) / 2.0]
    quantile = np.nanquantile if np.isnan(curves).any() else np.quantile
    with np.errstate(invalid="ignore"):
        low, high = quantile(curves, levels, axis=0)
    return low, high


def measure_intervals(
    point: dict[str, float | None],
    resampled: dict[str, FloatArray],
    consistent: dict[str, FloatArray],
) -> dict[str, Interval]:
    """Each measured headline measure's interval from its values on the resamples (and, for a
    calibration error, on the consistency resamples)."""
    found: dict[str, Interval] = {}
    for name, values in resampled.items():
        value = point.get(name)
        interval: Interval | None = None
        if value is None:
            continue
        if name in CALIBRATION_ERRORS:
            interval = calibration_error_interval(value, values, consistent[name])
        elif name in PERCENTILE:
            interval = percentile_interval(values)
        if interval is not None:
            found[name] = interval
    return found
