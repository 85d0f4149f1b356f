"""A fitted calibrator corrected to new class priors: its probabilities moved by Bayes' rule.

Under label shift (the class shares move, p(score | class) stays), a calibrator fitted where
the classes had priors pi answers, where they have pi', q_c proportional to p_c pi'_c / pi_c
(Saerens, Latinne & Decaestecker, *Adjusting the outputs of a classifier to new a priori
probabilities*, Neural Computation 2002, eq. 2.4; :func:`~app.calibration.measures.
label_shift.adjust`). Nothing is refitted: the wrapped calibrator's map runs, then the
Bayes step, so its predictions are exactly ``adjust(base.predict(scores), pi, pi')``.

Adjusting an adjusted calibrator appends one more step: its state keeps the wrapped method's
state as it was, plus ``"adjustments": [{"prior_from": [...], "prior_to": [...]}, ...]``,
applied in order (k-vectors, P(y = 0) and P(y = 1) for a binary one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self, cast

import numpy as np

from app.calibration.base import (
    CalibrationError,
    Calibrator,
    FloatArray,
    IntervalCalibrator,
    JSONValue,
    StateError,
)
from app.calibration.measures.label_shift import adjust, adjust_interval
from app.calibration.measures.multiclass_metrics import IntArray
from app.calibration.methods.multiclass import MulticlassCalibrator

ADJUSTMENTS = "adjustments"
"""The key of a state that holds its Bayes steps; the rest is the wrapped method's state."""


@dataclass(frozen=True)
class Adjustment:
    """One Bayes step: probabilities computed under ``prior_from`` corrected to ``prior_to``
    (k-vectors, each inside (0, 1); Bayes' rule reads only their ratios, so a sum off 1
    by rounding changes nothing)."""

    prior_from: FloatArray
    prior_to: FloatArray

    def state(self) -> dict[str, JSONValue]:
        """``{"prior_from": [...], "prior_to": [...]}``."""
        return {"prior_from": self.prior_from.tolist(), "prior_to": self.prior_to.tolist()}

    @classmethod
    def from_state(cls, state: object, k: int, where: str) -> Adjustment:
        """Rebuild one step of a stored state (:class:`StateError` unless both priors are
        k-vectors of numbers strictly inside (0, 1))."""
        if not isinstance(state, Mapping) or set(state) != {"prior_from", "prior_to"}:
            raise StateError(f"{where}: must be an object with prior_from and prior_to")
        priors = [_priors(state[key], k, f"{where}.{key}") for key in ("prior_from", "prior_to")]
        return cls(*priors)


class PriorAdjusted:
    """A fitted calibrator (binary or k-class) whose probabilities go through Bayes steps.

    ``predict`` is the wrapped calibrator's, then each :class:`Adjustment` in turn by
    :func:`~app.calibration.measures.label_shift.adjust`. ``predict_interval`` (a wrapped
    Venn-ABERS calibrator) maps p0 and p1 by
    :func:`~app.calibration.measures.label_shift.adjust_interval`: for a binary one, each end
    by the same Bayes step as the point, which is increasing in p, so p0 <= p <= p1 still
    holds. ``method`` and ``params`` are the wrapped method's.
    """

    def __init__(
        self, base: Calibrator | MulticlassCalibrator, adjustments: Sequence[Adjustment]
    ) -> None:
        if not adjustments:
            raise ValueError("an adjusted calibrator needs at least one adjustment")
        self.base = base
        self.adjustments = tuple(adjustments)

    @classmethod
    def of(cls, calibrator: Calibrator | MulticlassCalibrator, adjustment: Adjustment) -> Self:
        """``calibrator`` followed by one more Bayes step (appended to an adjusted one's)."""
        if isinstance(calibrator, PriorAdjusted):
            return cls(calibrator.base, (*calibrator.adjustments, adjustment))
        return cls(calibrator, (adjustment,))

    @property
    def method(self) -> str:
        """The wrapped method's name."""
        return self.base.method

    @property
    def params(self) -> dict[str, JSONValue]:
        """The wrapped method's parameters."""
        return self.base.params

    def fit(self, scores: FloatArray, labels: IntArray, sample_weight: FloatArray) -> Self:
        """Not done: an adjusted calibrator is made from a fitted one, never fitted."""
        raise CalibrationError("an adjusted calibrator is not fitted; fit its method instead")

    def predict(self, scores: FloatArray) -> FloatArray:
        """The wrapped calibrator's probabilities, through each Bayes step in turn."""
        p = self.base.predict(scores)
        for step in self.adjustments:
            p = adjust(p, step.prior_from, step.prior_to)
        return p

    def predict_interval(self, scores: FloatArray) -> tuple[FloatArray, FloatArray]:
        """The wrapped calibrator's intervals (p0, p1), through each Bayes step in turn."""
        p0, p1 = cast(IntervalCalibrator, self.base).predict_interval(scores)
        for step in self.adjustments:
            p0, p1 = adjust_interval(p0, p1, step.prior_from, step.prior_to)
        return p0, p1

    def state(self) -> dict[str, JSONValue]:
        """The wrapped method's state and ``"adjustments"``, the Bayes steps in order."""
        return {**self.base.state(), ADJUSTMENTS: [step.state() for step in self.adjustments]}


def split_state(state: Mapping[str, Any], k: int) -> tuple[dict[str, Any], list[Adjustment]]:
    """A stored state as the wrapped method's state and its Bayes steps (none without
    ``"adjustments"``); :class:`StateError` for steps that are not k-class priors."""
    if ADJUSTMENTS not in state:
        return dict(state), []
    base = {key: value for key, value in state.items() if key != ADJUSTMENTS}
    steps = state[ADJUSTMENTS]
    if not isinstance(steps, list) or not steps:
        raise StateError(f"state.{ADJUSTMENTS}: must be a non-empty list")
    where = f"state.{ADJUSTMENTS}"
    return base, [Adjustment.from_state(s, k, f"{where}[{i}]") for i, s in enumerate(steps)]


def _priors(value: object, k: int, where: str) -> FloatArray:
    if not isinstance(value, list) or len(value) != k or not set(map(type, value)) <= {int, float}:
        raise StateError(f"{where}: must list {k} numbers")
    priors = np.asarray(value, dtype=np.float64)
    if not np.all((priors > 0.0) & (priors < 1.0)):
        raise StateError(f"{where}: every prior must be strictly inside (0, 1)")
    return priors
