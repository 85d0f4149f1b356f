"""The answer of an estimate: what a version's probabilities of unlabelled scores say."""

from __future__ import annotations

from pydantic import Field

from app.api.documents.base import Document, Interval


class PerformanceOut(Document):
    """Performance measures at a threshold: binary `positive_rate`, `accuracy`, `precision`,
    `recall`, `f1`, `roc_auc`, `log_loss`, `brier`; k classes `accuracy` (of the arg max),
    `log_loss`, `brier`. Null where a measure is undefined (no predicted positives for
    precision)."""

    positive_rate: float | None = None
    accuracy: float | None = None
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    roc_auc: float | None = None
    log_loss: float | None = None
    brier: float | None = None
    intervals: dict[str, Interval] | None = Field(
        None,
        description="Expected measures: each one's 95% sampling band, where its realized "
        "value falls if the labels are drawn from the probabilities.",
    )


class PriorOut(Document):
    """Label shift: the class prior the version was trained under and the one its
    probabilities of the batch imply."""

    training: float | list[float] = Field(
        description="The version's training positive rate (k classes: its class shares), "
        "weighted; for an adjusted version, the prior it was adjusted to."
    )
    estimated: float | list[float] | None = Field(
        description="The batch's, by Saerens et al.'s EM on its probabilities; null without "
        "predictions."
    )
    interval: Interval | list[Interval] | None = Field(
        description="Its 95% interval (the likelihood's observed information)."
    )


class EstimateOut(Document):
    name: str
    version: int
    n_predictions: int
    threshold: float | None = Field(description="The threshold used (binary calibrators).")
    estimated: PerformanceOut = Field(
        description="Expected performance if the probabilities are calibrated (CBPE)."
    )
    prior: PriorOut


class CostAtOut(Document):
    """Deciding at another threshold, for comparison."""

    threshold: float
    expected_cost: float = Field(description="The mean cost per case of deciding at it.")
    intervals: dict[str, Interval] = Field(description="`expected_cost`'s 95% interval.")


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
    at_half: CostAtOut = Field(description="The same for deciding at 0.5.")
