"""Decisions from calibrated probabilities: the threshold that minimises the expected cost,
and the cost per case of deciding at a threshold.

For a calibrated probability p, deciding 1 costs (1 - p) c_FP - p b_TP in expectation and
deciding 0 costs p c_FN - (1 - p) b_TN, so 1 is the cheaper decision exactly when
p > (c_FP + b_TN) / (c_FP + b_TN + c_FN + b_TP): Elkan, *The foundations of cost-sensitive
learning* (IJCAI 2001), with benefits as negative costs (METHODS.md, "Decisions").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.calibration.base import FloatArray


@dataclass(frozen=True)
class Costs:
    """What each outcome of a decision costs (benefits: what a right decision earns)."""

    false_positive: float = 1.0
    false_negative: float = 1.0
    true_positive: float = 0.0
    true_negative: float = 0.0

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not np.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
        if self.false_positive + self.true_negative + self.false_negative + self.true_positive <= 0:
            raise ValueError("costs and benefits are all 0: every decision is as good")

    @property
    def threshold(self) -> float:
        """The Bayes-optimal threshold: decide 1 where p exceeds it."""
        against = self.false_positive + self.true_negative
        return against / (against + self.false_negative + self.true_positive)

    def per_case(self, decisions: FloatArray, labels: FloatArray) -> FloatArray:
        """The cost of each decision given its label (benefits counted negative)."""
        d, y = np.asarray(decisions, dtype=np.float64), np.asarray(labels, dtype=np.float64)
        return (
            d * (1 - y) * self.false_positive
            + (1 - d) * y * self.false_negative
            - d * y * self.true_positive
            - (1 - d) * (1 - y) * self.true_negative
        )


def decide(p: FloatArray, threshold: float) -> FloatArray:
    """1 where ``p`` exceeds ``threshold``, else 0 (as predict's ``decisions``)."""
    return (np.asarray(p) > threshold).astype(np.float64)


def expected_cost(p: FloatArray, threshold: float, costs: Costs) -> float:
    """The mean cost per case of deciding at ``threshold`` if ``p`` is calibrated (labels
    Bernoulli(p)): the expectation of :meth:`Costs.per_case`, which is linear in y."""
    p = np.asarray(p, dtype=np.float64)
    d = decide(p, threshold)
    return float(
        np.mean(
            costs.per_case(d, np.zeros_like(p)) * (1 - p) + costs.per_case(d, np.ones_like(p)) * p
        )
    )
