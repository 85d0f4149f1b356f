"""The answer of an estimate: what a version's probabilities of unlabelled scores say."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from app.api.documents.base import Document, Interval


class EstimateOut(Document):
    name: str
    version: int
    n_predictions: int
    threshold: float | None = Field(description="The threshold used (binary calibrators).")
    estimated: dict[str, Any] = Field(
        description="Expected performance if the probabilities are calibrated: binary "
        "`positive_rate`, `accuracy`, `precision`, `recall`, `f1`, `roc_auc`, `log_loss`, "
        "`brier`; k classes `accuracy`, `log_loss`, `brier`; `intervals`: each one's 95% "
        "sampling band (labels drawn from the probabilities). None where a measure has no "
        "expectation (no predicted positives for precision)."
    )
    prior: dict[str, Any] = Field(
        description="`training`: the version's training positive rate (k classes: its class "
        "shares), weighted; `estimated`: the batch's, by Saerens et al.'s EM on its "
        "probabilities (label shift); `interval`: its 95% interval."
    )


class DecisionOut(Document):
    name: str
    version: int
    threshold: float = Field(description="Decide 1 above it: (c_FP + b_TN) / (all four).")
    expected_cost: float = Field(
        description="The mean cost per case of deciding at `threshold` on the version's "
        "out-of-fold predictions and their labels (benefits count negative)."
    )
    intervals: dict[str, Interval] = Field(
        description="`expected_cost`'s 95% interval (normal, of a weighted mean)."
    )
    at_half: dict[str, Any] = Field(description="The same for deciding at 0.5.")
