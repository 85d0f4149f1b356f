"""Probability calibration, pure numerics (numpy and scipy; nothing about HTTP or storage).

The service uses :func:`fit_calibrator` to fit, :func:`load_calibrator` to rebuild a stored
version and :mod:`app.calibration.diagnostics` for the measures. Methods follow the papers in
the README's method table: Niculescu-Mizil & Caruana (*Predicting Good Probabilities With
Supervised Learning*; *Obtaining Calibrated Probabilities from Boosting*), Rüping (*Robust
Probabilistic Calibration*), Kull et al. (beta), Zadrozny & Elkan (binning, one-vs-rest),
Boström (*Calibrating Random Forests*), Guo et al. (temperature) and Vovk, Petej & Fedorova
(Venn-ABERS predictors). ``auto``'s candidates were chosen on real data (``make bench-quality``).
"""

from app.calibration.base import (
    CalibrationError,
    Calibrator,
    Capabilities,
    FloatArray,
    IntervalCalibrator,
    JSONValue,
    ParamError,
    StateError,
)
from app.calibration.beta import BetaCalibrator, require_open_unit_interval
from app.calibration.binning import HistogramBinning
from app.calibration.bostrom import BostromCalibrator
from app.calibration.fitting import (
    FitOutcome,
    fit_calibrator,
    load_calibrator,
    make_calibrator,
)
from app.calibration.isotonic import IsotonicCalibrator
from app.calibration.logistic import LogisticCorrection
from app.calibration.methods import (
    BINARY_ONLY,
    CALIBRATOR_METHODS,
    METHODS,
    MULTICLASS_ONLY,
    PROBABILITY_METHODS,
)
from app.calibration.minmax import MinMaxScaling
from app.calibration.multiclass import MulticlassCalibrator
from app.calibration.platt import PlattCalibrator
from app.calibration.temperature import TemperatureScaling
from app.calibration.venn_abers import VennAbersCalibrator

__all__ = [
    "BINARY_ONLY",
    "CALIBRATOR_METHODS",
    "METHODS",
    "MULTICLASS_ONLY",
    "PROBABILITY_METHODS",
    "BetaCalibrator",
    "BostromCalibrator",
    "CalibrationError",
    "Calibrator",
    "Capabilities",
    "FitOutcome",
    "FloatArray",
    "HistogramBinning",
    "IntervalCalibrator",
    "IsotonicCalibrator",
    "JSONValue",
    "LogisticCorrection",
    "MinMaxScaling",
    "MulticlassCalibrator",
    "ParamError",
    "PlattCalibrator",
    "StateError",
    "TemperatureScaling",
    "VennAbersCalibrator",
    "fit_calibrator",
    "load_calibrator",
    "make_calibrator",
    "require_open_unit_interval",
]
