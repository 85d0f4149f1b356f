"""Probability calibration, pure numerics (numpy and scipy; nothing about HTTP or storage).

The rest of ``app`` imports this module only: the service fits a batch it has checked with
:func:`fit_checked_batch` (:func:`fit_calibrator` checks arrays as they come first), rebuilds a
stored version with :func:`load_calibrator`, and measures with :func:`reliability_reports`
and :func:`headline_resampled` (:class:`HeadlineReports`). Methods follow the papers in
docs/methods.md: Niculescu-Mizil & Caruana (*Predicting Good Probabilities With
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
from app.calibration.fitting import (
    FitOutcome,
    Progress,
    fit_calibrator,
    fit_checked_batch,
    load_calibrator,
    make_calibrator,
)
from app.calibration.kernels.bounds import OutputBound
from app.calibration.kernels.budget import (
    Abandoned,
    Budget,
    Flag,
    checkpoint,
    current,
    enter,
)
from app.calibration.kernels.knots import interp_slopes
from app.calibration.measures.bootstrap import (
    MAX_RESAMPLES,
    RESAMPLES,
    calibration_error_interval,
    percentile_interval,
)
from app.calibration.measures.bootstrap import (
    SEED as BOOTSTRAP_SEED,
)
from app.calibration.measures.class_rollups import SAMPLE_ENTRIES as CLASS_SAMPLE_ENTRIES
from app.calibration.measures.class_rollups import ClassRollup, id_keys
from app.calibration.measures.decisions import Costs, decide, expected_cost
from app.calibration.measures.diagnostics import (
    fit_resamples,
    raw_as_probabilities,
    reliability_reports,
    reuses_bin_free,
    with_intervals,
)
from app.calibration.measures.expected import (
    BINARY_KEYS,
    DEFAULT_THRESHOLD,
    BinarySums,
    ClassSums,
    expected_binary,
    expected_multiclass,
)
from app.calibration.measures.expected import (
    EPS as PROBABILITY_EPS,
)
from app.calibration.measures.expected import (
    Z as NORMAL_95,
)
from app.calibration.measures.headline_reports import HeadlineReports, headline_resampled
from app.calibration.measures.label_shift import (
    FLOOR as PRIOR_FLOOR,
)
from app.calibration.measures.label_shift import (
    adjust,
    adjust_interval,
    bayes_bound,
    em_priors,
    prior_intervals,
    prior_ratio,
    rest_ratios,
)
from app.calibration.measures.metrics import log_losses, squared_errors
from app.calibration.measures.multiclass_metrics import (
    MAX_CLASSES,
    brier_distances,
    multiclass_log_losses,
    top_label,
)
from app.calibration.measures.reliability import MAX_BINS, MIN_BINS
from app.calibration.measures.report import BinFree, Report, SmoothCurve
from app.calibration.measures.report_bootstrap import Resampled
from app.calibration.measures.rollup_figures import cell_means, confusion_of, expected_of
from app.calibration.measures.rollups import (
    CELL_FINE,
    CELL_LOWER,
    CELL_UPPER,
    FINE_EDGES,
    FINE_UPPER,
    UNIFORM_BINS,
    BinaryRollup,
)
from app.calibration.measures.rollups import PREDICTED as ROLLUP_PREDICTED
from app.calibration.measures.score_reference import ScoreReference
from app.calibration.methods.beta import (
    EPS as BETA_EPS,
)
from app.calibration.methods.beta import (
    BetaCalibrator,
    beta_features,
    require_open_unit_interval,
)
from app.calibration.methods.binning import HistogramBinning
from app.calibration.methods.bostrom import BostromCalibrator
from app.calibration.methods.catalog import params_markdown
from app.calibration.methods.isotonic import IsotonicCalibrator, overflow_scale
from app.calibration.methods.logistic import SATURATION as LOGISTIC_SATURATION
from app.calibration.methods.logistic import LogisticCorrection
from app.calibration.methods.minmax import MinMaxScaling
from app.calibration.methods.multiclass import MulticlassCalibrator, OneVsRest
from app.calibration.methods.platt import PlattCalibrator
from app.calibration.methods.prior_adjusted import Adjustment, PriorAdjusted
from app.calibration.methods.registry import (
    BINARY_ONLY,
    CALIBRATOR_METHODS,
    CAPABILITIES,
    METHODS,
    MULTICLASS_ONLY,
    PROBABILITY_METHODS,
)
from app.calibration.methods.temperature import FLOOR as TEMPERATURE_FLOOR
from app.calibration.methods.temperature import SMALLEST_P as TEMPERATURE_SMALLEST_P
from app.calibration.methods.temperature import TemperatureScaling
from app.calibration.methods.venn_abers import VennAbersCalibrator

__all__ = [
    "BETA_EPS",
    "BINARY_KEYS",
    "BINARY_ONLY",
    "BOOTSTRAP_SEED",
    "CALIBRATOR_METHODS",
    "CAPABILITIES",
    "CELL_FINE",
    "CELL_LOWER",
    "CELL_UPPER",
    "CLASS_SAMPLE_ENTRIES",
    "DEFAULT_THRESHOLD",
    "FINE_EDGES",
    "FINE_UPPER",
    "LOGISTIC_SATURATION",
    "MAX_BINS",
    "MAX_CLASSES",
    "MAX_RESAMPLES",
    "METHODS",
    "MIN_BINS",
    "MULTICLASS_ONLY",
    "NORMAL_95",
    "PRIOR_FLOOR",
    "PROBABILITY_EPS",
    "PROBABILITY_METHODS",
    "RESAMPLES",
    "ROLLUP_PREDICTED",
    "TEMPERATURE_FLOOR",
    "TEMPERATURE_SMALLEST_P",
    "UNIFORM_BINS",
    "Abandoned",
    "Adjustment",
    "BetaCalibrator",
    "BinFree",
    "BinaryRollup",
    "BinarySums",
    "BostromCalibrator",
    "Budget",
    "CalibrationError",
    "Calibrator",
    "Capabilities",
    "ClassRollup",
    "ClassSums",
    "Costs",
    "FitOutcome",
    "Flag",
    "FloatArray",
    "HeadlineReports",
    "HistogramBinning",
    "IntervalCalibrator",
    "IsotonicCalibrator",
    "JSONValue",
    "LogisticCorrection",
    "MinMaxScaling",
    "MulticlassCalibrator",
    "OneVsRest",
    "OutputBound",
    "ParamError",
    "PlattCalibrator",
    "PriorAdjusted",
    "Progress",
    "Report",
    "Resampled",
    "ScoreReference",
    "SmoothCurve",
    "StateError",
    "TemperatureScaling",
    "VennAbersCalibrator",
    "adjust",
    "adjust_interval",
    "bayes_bound",
    "beta_features",
    "brier_distances",
    "calibration_error_interval",
    "cell_means",
    "checkpoint",
    "confusion_of",
    "current",
    "decide",
    "em_priors",
    "enter",
    "expected_binary",
    "expected_cost",
    "expected_multiclass",
    "expected_of",
    "fit_calibrator",
    "fit_checked_batch",
    "fit_resamples",
    "headline_resampled",
    "id_keys",
    "interp_slopes",
    "load_calibrator",
    "log_losses",
    "make_calibrator",
    "multiclass_log_losses",
    "overflow_scale",
    "params_markdown",
    "percentile_interval",
    "prior_intervals",
    "prior_ratio",
    "raw_as_probabilities",
    "reliability_reports",
    "require_open_unit_interval",
    "rest_ratios",
    "reuses_bin_free",
    "squared_errors",
    "top_label",
    "with_intervals",
]
