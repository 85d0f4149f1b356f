"""Logistic correction of boosting margins: p = 1 / (1 + exp(-2F)).

Niculescu-Mizil & Caruana, *Obtaining Calibrated Probabilities from Boosting*: after Friedman,
Hastie & Tibshirani read AdaBoost as additive logistic regression, the boosted sum F estimates
half the log-odds, so P(y = 1 | x) = 1 / (1 + exp(-2F)). Nothing is fitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np
from scipy.special import expit

from app.calibration.base import (
    Capabilities,
    FloatArray,
    JSONValue,
    WithoutParams,
    check_state_keys,
)

SATURATION = 400.0  # expit(2F) is exactly 0.0 or 1.0 once |2F| > ~745; avoids 2F overflowing


class LogisticCorrection(WithoutParams):
    """p = expit(2F) for a boosting margin F; no parameters, empty state ``{}``."""

    method: ClassVar[str] = "logistic_correction"
    capabilities: ClassVar[Capabilities] = Capabilities(matrix="none")

    def fit(self, scores: FloatArray, labels: FloatArray, sample_weight: FloatArray) -> Self:
        """Nothing to fit: the correction is fixed by the theory. Returns ``self``."""
        return self

    def predict(self, scores: FloatArray) -> FloatArray:
        """expit(2F), the logistic correction."""
        margin = np.clip(np.asarray(scores, dtype=np.float64), -SATURATION, SATURATION)
        p: FloatArray = expit(2.0 * margin)
        return p

    def state(self) -> dict[str, JSONValue]:
        """Nothing fitted: ``{}``."""
        return {}

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild from ``{}``; :class:`StateError` for any other state."""
        calibrator = cls.from_params(params)
        check_state_keys(state, ())
        return calibrator
