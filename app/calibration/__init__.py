"""Probability calibration, pure numerics (numpy and scipy; nothing about HTTP or storage).

The service uses :func:`fit_calibrator` to fit, :func:`load_calibrator` to rebuild a stored
version and :mod:`app.calibration.metrics` for diagnostics. Methods follow
Niculescu-Mizil & Caruana, *Predicting Good Probabilities With Supervised Learning* and
*Obtaining Calibrated Probabilities from Boosting*.
"""

from app.calibration.base import (
    CalibrationError,
    Calibrator,
    FloatArray,
    JSONValue,
    ParamError,
    StateError,
)
from app.calibration.fitting import (
    CALIBRATOR_METHODS,
    METHODS,
    FitOutcome,
    fit_calibrator,
    load_calibrator,
    make_calibrator,
)
from app.calibration.isotonic import IsotonicCalibrator
from app.calibration.logistic import LogisticCorrection
from app.calibration.platt import PlattCalibrator

__all__ = [
    "CALIBRATOR_METHODS",
    "METHODS",
    "CalibrationError",
    "Calibrator",
    "FitOutcome",
    "FloatArray",
    "IsotonicCalibrator",
    "JSONValue",
    "LogisticCorrection",
    "ParamError",
    "PlattCalibrator",
    "StateError",
    "fit_calibrator",
    "load_calibrator",
    "make_calibrator",
]
