"""Min-max scaling of raw scores to [0, 1]: the baseline for SVM margins.

Niculescu-Mizil & Caruana, *Predicting Good Probabilities With Supervised Learning*, section 4:
uncalibrated SVM predictions are turned into [0, 1] values by scaling them linearly by the
smallest and largest training score. Labels play no part; this is a baseline, not a calibration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np

from app.calibration.base import (
    Capabilities,
    FloatArray,
    JSONValue,
    StateError,
    WithoutParams,
    check_state_keys,
    state_float,
)


class MinMaxScaling(WithoutParams):
    """p(f) = (f - min) / (max - min), clipped to [0, 1]; 0.5 everywhere when max = min.

    No parameters. ``min`` and ``max`` are taken over the points of positive weight (a point
    of zero weight is not part of the batch). The state is ``{"min": min, "max": max}``.
    Computed without overflow for any finite scores: when max - min would overflow (a spread
    beyond ~1.8e308) both the score and the bounds are halved first, which is exact.
    """

    method: ClassVar[str] = "minmax"
    capabilities: ClassVar[Capabilities] = Capabilities(matrix="none")

    def __init__(self) -> None:
        self.low = 0.0
        self.high = 1.0

    def fit(self, scores: FloatArray, labels: FloatArray, sample_weight: FloatArray) -> Self:
        """Record the smallest and largest score of positive weight; return ``self``."""
        kept = scores[sample_weight > 0]
        self.low, self.high = float(kept.min()), float(kept.max())
        return self

    def predict(self, scores: FloatArray) -> FloatArray:
        """(f - min) / (max - min) clipped to [0, 1]; 0.5 for a constant training batch."""
        f = np.asarray(scores, dtype=np.float64)
        if not self.high > self.low:
            return np.full(f.shape, 0.5)
        scale = self.scale
        width = self.high * scale - self.low * scale
        with np.errstate(over="ignore"):  # a quotient past 1.8e308 is inf, clipped to 1
            p: FloatArray = np.clip((f * scale - self.low * scale) / width, 0.0, 1.0)
        return p

    @property
    def scale(self) -> float:
        """0.5 when max - min overflows (halving is exact for numbers this large, and keeps
        f - min and max - min finite), else 1."""
        return 0.5 if math.isinf(self.high - self.low) else 1.0  # Python floats: no warning

    def state(self) -> dict[str, JSONValue]:
        """``{"min", "max"}``."""
        return {"min": self.low, "max": self.high}

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild a fitted scaling; :class:`StateError` unless min <= max are finite."""
        calibrator = cls.from_params(params)
        check_state_keys(state, ("min", "max"))
        low, high = state_float(state, "min"), state_float(state, "max")
        if low > high:
            raise StateError(f"state.min: {low!r} exceeds state.max {high!r}")
        calibrator.low, calibrator.high = low, high
        return calibrator
