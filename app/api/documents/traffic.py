"""The traffic loop's answers: outcomes recorded, and monitoring windows."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from app.api.documents.base import Document, Interval
from app.api.documents.estimates import PerformanceOut, PriorOut


class WindowIntervalsOut(Document):
    """95% intervals of a window's measures (absent with `bootstrap=0` or fewer than two
    labelled predictions)."""

    log_loss: Interval | None = None
    brier: Interval | None = None
    ece: Interval | None = Field(
        None, description="Basic interval, reaching 0 unless a test of calibration rejects."
    )


class MonitoringWindowOut(Document):
    """One window of one version's traffic (or of none: an empty window)."""

    start: datetime
    end: datetime
    version: int | None = Field(description="The version that answered; null: no traffic.")
    n_predictions: int = Field(description="Predictions logged in the window.")
    n_labelled: int = Field(description="Of them, those with an outcome.")
    mean_predicted: float | None = Field(
        description="Mean predicted probability of the labelled ones (k classes: top-label "
        "confidence)."
    )
    observed_rate: float | None = Field(
        description="Their rate of positives (k classes: accuracy)."
    )
    log_loss: float | None
    brier: float | None
    ece: float | None = Field(description="Binned ECE over `n_bins` uniform bins.")
    psi: float | None = Field(
        description="Population stability index of the raw scores against the version's "
        "fitting batch (its deciles); binary versions."
    )
    ks: float | None = Field(
        description="Two-sample Kolmogorov-Smirnov statistic, likewise, read at the batch's "
        "percentiles (at most the rows' own, below it by at most one percentile's share)."
    )
    intervals: WindowIntervalsOut | None = Field(
        None,
        description="Percentiles of `bootstrap` draws of each bin's sums from the Gaussian "
        "with the Poisson bootstrap's mean and covariance (sums kept per window, so the cost "
        "does not grow with the traffic).",
    )
    estimated: PerformanceOut | None = Field(
        None,
        description="Expected performance of all the window's predictions, labelled or not, "
        "at the query's `threshold`, if the version is calibrated (CBPE), with 95% sampling "
        "bands; null without traffic.",
    )
    realized: PerformanceOut | None = Field(
        None,
        description="The same measures over the labelled predictions; null without labels.",
    )
    prior: PriorOut | None = Field(
        None,
        description="The version's training prior and the window's by EM on all its "
        "predictions (label shift); null without traffic or for a deleted version.",
    )


class MonitoringOut(Document):
    name: str
    window: Literal["1h", "1d", "7d"]
    since: datetime
    until: datetime
    windows: list[MonitoringWindowOut]


class OutcomesOut(Document):
    matched: int = Field(description="Logged predictions labelled now.")
    pending: int = Field(description="Ids not logged yet: joined when their prediction is.")
    duplicates: int = Field(description="Outcomes already stored with the same label.")
    overwritten: int = Field(description="Labels replaced (only with overwrite=true).")
