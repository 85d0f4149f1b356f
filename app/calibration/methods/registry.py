"""Every calibration method, and the catalogues built from what each class declares.

A method class says once what it accepts (:class:`~app.calibration.base.Capabilities`): a
binary batch, a k-class batch natively or one-vs-rest, probabilities only. Everything that
asks "which methods can do X" reads the tuples below, so adding a method is adding its class
to :data:`CLASSES`.
"""

from __future__ import annotations

from typing import Any

from app.calibration.base import Calibrator, Capabilities
from app.calibration.methods.beta import BetaCalibrator
from app.calibration.methods.binning import HistogramBinning
from app.calibration.methods.bostrom import BostromCalibrator
from app.calibration.methods.isotonic import IsotonicCalibrator
from app.calibration.methods.logistic import LogisticCorrection
from app.calibration.methods.minmax import MinMaxScaling
from app.calibration.methods.platt import PlattCalibrator
from app.calibration.methods.temperature import TemperatureScaling
from app.calibration.methods.venn_abers import VennAbersCalibrator

CLASSES: tuple[Any, ...] = (
    PlattCalibrator,
    IsotonicCalibrator,
    LogisticCorrection,
    BetaCalibrator,
    HistogramBinning,
    MinMaxScaling,
    VennAbersCalibrator,
    TemperatureScaling,
    BostromCalibrator,
)
"""Every method class, in the order the documentation lists them."""

CAPABILITIES: dict[str, Capabilities] = {cls.method: cls.capabilities for cls in CLASSES}
BINARY: dict[str, type[Calibrator]] = {
    cls.method: cls for cls in CLASSES if cls.capabilities.vector
}
"""Methods that fit a binary batch; also the binary calibrators a stored version can hold."""
ONE_VS_REST: dict[str, type[Calibrator]] = {
    name: cls for name, cls in BINARY.items() if cls.capabilities.matrix == "one_vs_rest"
}
"""Binary methods that calibrate a k-class batch one class against the rest."""
NATIVE_MULTICLASS: dict[str, Any] = {
    cls.method: cls for cls in CLASSES if cls.capabilities.matrix == "native"
}
"""Methods that exist only for k classes (temperature, bostrom)."""

CALIBRATOR_METHODS: tuple[str, ...] = tuple(CAPABILITIES)
"""Methods with a calibrator class of their own: what a stored version's ``method`` can be."""
METHODS: tuple[str, ...] = (*CALIBRATOR_METHODS, "auto")
"""What a fit accepts; ``auto`` resolves to one of its candidates."""
BINARY_ONLY: tuple[str, ...] = tuple(
    name for name, c in CAPABILITIES.items() if c.vector and c.matrix == "none"
)
MULTICLASS_ONLY: tuple[str, ...] = tuple(name for name, c in CAPABILITIES.items() if not c.vector)
PROBABILITY_METHODS: tuple[str, ...] = tuple(
    name for name, c in CAPABILITIES.items() if c.vector and c.probabilities
)
"""Binary methods (also one-vs-rest) whose scores must lie strictly between 0 and 1."""
