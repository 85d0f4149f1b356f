"""Pydantic models of what the API answers, for the OpenAPI docs (the request bodies are
in :mod:`app.api.bodies.contracts`, which validates them too)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


class ArtifactInfo(BaseModel):
    sha256: str
    bytes: int


class VersionSummary(BaseModel):
    """A version without its fitted numbers (used in listings)."""

    name: str
    version: int
    method: str
    params: dict[str, Any]
    n_samples: int
    n_positive: int | None = Field(description="Label-1 count (binary versions only).")
    n_classes: int
    class_counts: list[int] = Field(description="How many labels of each class 0..k-1.")
    created_at: datetime
    description: str
    tags: dict[str, str]
    metrics: dict[str, Any]
    selection: dict[str, Any] | None = None
    source: dict[str, Any] | None = Field(
        default=None,
        description="Where the fitting batch came from: null for a posted batch; for a fit "
        "`from_traffic`, the range and version filter (`traffic`), `n_samples`, "
        "`parent_version` (the latest at the time), and the range's counts by version.",
    )
    aliases: list[str] = Field(default_factory=list)
    artifact: ArtifactInfo


class VersionOut(VersionSummary):
    """A version, as ``GET .../versions/{selector}`` and ``POST .../fit`` answer it."""

    fitted: dict[str, Any]


class CalibratorItem(BaseModel):
    name: str
    latest_version: int | None
    method: str | None
    n_versions: int
    updated_at: datetime


class CalibratorList(BaseModel):
    items: list[CalibratorItem]
    total: int


class CalibratorOut(CalibratorItem):
    aliases: dict[str, int] = Field(description="Alias name → the version it points to.")
    versions: list[VersionSummary]
    total: int


class PredictOut(BaseModel):
    name: str
    version: int
    probabilities: list[float] | list[list[float]]
    intervals: list[list[float]] | list[list[list[float]]] | None = Field(
        None,
        description="With `intervals`: each score's Venn-ABERS interval [p0, p1] (n x 2; "
        "n x k x 2 for k classes, one binary interval per class against the rest).",
    )
    logged: int | None = Field(
        None,
        description="With `ids`: how many of the predictions the traffic log took; fewer than "
        "the ids when its buffer was full (the database down, or predicts outrunning its "
        "writer): the rest were dropped, and counted in calibration_traffic_dropped_total.",
    )


class ReliabilityBinOut(BaseModel):
    lower: float
    upper: float
    count: int = Field(description="Points in the bin.")
    weight: float = Field(description="Their summed sample weight (= count when unweighted).")
    mean_predicted: float | None
    fraction_positive: float | None
    ci_low: float | None
    ci_high: float | None


Interval = Annotated[list[float], Field(min_length=2, max_length=2)]


class HeadlineMetricsOut(BaseModel):
    """The headline measures a version stores and a comparison ranks by; null where undefined
    (one class, a separated batch). Multiclass top-label ones have `accuracy`, not `auc`."""

    brier: float | None = Field(None, description="Mean squared error (multiclass: to one-hot).")
    log_loss: float | None = Field(None, description="Mean negative log-likelihood, eps 1e-15.")
    ece: float | None = Field(
        None, description="Binned expected calibration error (L1; 10 uniform bins here)."
    )
    auc: float | None = Field(None, description="ROC AUC, ties counted half (binary).")
    accuracy: float | None = Field(None, description="Share of arg max = label (multiclass).")
    intervals: dict[str, Interval] | None = Field(
        None,
        description="95% intervals [low, high] of each measure above: percentile bootstrap "
        "over rows (`bootstrap` Poisson resamples, seeded, the same for every version); for "
        "ece the basic bootstrap interval, reaching 0 unless a test of perfect calibration "
        "rejects at 5%; it corrects the ECE's upward bias, so it can end below the ECE. "
        "Absent with `bootstrap=0`.",
    )


class MetricsOut(HeadlineMetricsOut):
    """The measures of a report (METHODS.md, Measures); null where undefined (one class, a
    separated batch). Multiclass top-label reports have `accuracy` and no `auc`, Murphy terms
    or binned-only measures of the binary case."""

    ece: float | None = Field(None, description="Binned expected calibration error (L1).")
    mce: float | None = Field(None, description="Largest bin gap |fraction - mean|.")
    reliability: float | None = Field(None, description="Murphy: reliability over the bins.")
    resolution: float | None = Field(None, description="Murphy: resolution over the bins.")
    uncertainty: float | None = Field(None, description="Murphy: base rate (1 - base rate).")
    smooth_ece: float | None = Field(
        None,
        description="Smooth ECE (Błasiok & Nakkiran 2024) at its automatic bandwidth: the mean "
        "|kernel-smoothed p - y| under the smoothed density of p, the bandwidth the fixed point "
        "sigma = smooth ECE(sigma); relplot's numbers.",
    )
    smooth_ece_sigma: float | None = Field(
        None, description="That bandwidth (the smooth diagram's kernel width)."
    )
    ece_debiased: float | None = Field(
        None,
        description="Debiased L2 calibration error on n_bins equal-mass bins (Kumar et al. "
        "2019); null for weighted batches.",
    )
    calibration_slope: float | None = Field(
        None, description="b of logit P(y=1) = a + b logit(p): 1 when calibrated, < 1 too extreme."
    )
    calibration_intercept: float | None = Field(
        None, description="Calibration-in-the-large: a with logit(p) as an offset; 0 is right."
    )
    spiegelhalter_z: float | None = Field(None, description="Spiegelhalter's z (1986).")
    spiegelhalter_p: float | None = Field(None, description="Its two-sided p-value.")
    ici: float | None = Field(
        None,
        description="Integrated calibration index (Austin & Steyerberg 2019): the mean of "
        "|p - LOWESS(y on p)|, span 0.75, local linear (statsmodels' lowess; their R code's "
        "loess is local quadratic); null below three rows or for a single distinct p.",
    )
    ici_e50: float | None = Field(None, description="The median of those distances.")
    ici_e90: float | None = Field(None, description="Their 90th percentile.")
    ici_emax: float | None = Field(None, description="Their largest.")
    intervals: dict[str, Interval] | None = Field(
        None,
        description="95% intervals [low, high] of log_loss, brier, ece, smooth_ece, auc, "
        "accuracy, calibration_slope and calibration_intercept: percentile bootstrap over rows "
        "(`bootstrap` Poisson resamples, seeded), shared by the calibrated and raw reports; "
        "for ece and smooth_ece the basic bootstrap interval, reaching 0 unless a test of "
        "perfect calibration rejects at 5%; it corrects their upward bias, so it can end "
        "below the point estimate. Absent with `bootstrap=0`.",
    )


class SmoothOut(BaseModel):
    """The kernel-smoothed reliability curve (relplot's), on a 200-point mesh of [0, 1]."""

    sigma: float = Field(description="The kernel's bandwidth (smooth ECE's own).")
    x: list[float]
    y: list[float] = Field(description="Smoothed fraction of positives at each x.")
    low: list[float] | None = Field(description="Pointwise 95% band (bootstrap); null without.")
    high: list[float] | None
    density: list[float] = Field(description="Kernel density of the predictions at each x.")


class ReliabilityOut(BaseModel):
    bins: list[ReliabilityBinOut]
    metrics: MetricsOut
    smooth: SmoothOut | None = None


class DiagnosticsOut(BaseModel):
    name: str
    version: int
    n_bins: int
    strategy: Literal["uniform", "quantile"]
    class_index: int | None
    bootstrap: int = Field(description="Resamples behind the intervals (0: none).")
    n_samples: int
    calibrated: ReliabilityOut
    raw: ReliabilityOut


class TrafficDiagnosticsOut(DiagnosticsOut):
    """The diagnostics of the labelled predictions logged in [since, until)."""

    version: int | None = Field(  # type: ignore[assignment]
        description="The version asked for; null: the traffic every version answered."
    )
    n_labelled: int = Field(description="The labelled predictions reported (= n_samples).")
    since: datetime
    until: datetime


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None


class Health(BaseModel):
    status: str


class Difference(BaseModel):
    value: float | None = Field(description="This version's ranking metric minus the best's.")
    interval: Interval | None = Field(
        description="Its paired bootstrap 95% interval (the same resamples for every "
        "version); [0, 0] for the best (with or without resamples); null for the others "
        "without resamples, and for all when the metric is undefined (one class for AUC)."
    )


class ComparedVersion(BaseModel):
    version: int
    method: str
    metrics: HeadlineMetricsOut = Field(description="Its metrics on the batch, with intervals.")
    delta: dict[str, float | None] = Field(description="Each metric minus the best one's.")
    difference: Difference
    significant: bool = Field(
        description="Whether `difference.interval` excludes 0 (on two rows at least: one "
        "row's resamples cannot vary): the gap to the best is real, "
        "not resampling noise. Promote only on a significant improvement. Each version is "
        "judged at 5% on its own: among many versions, some gap will look significant by "
        "chance (1 in 20 of equal ones), so compare a candidate with the one it replaces.",
    )


class CompareOut(BaseModel):
    name: str
    n_samples: int
    by: str
    bootstrap: int = Field(description="Resamples behind the intervals (0: none).")
    versions: list[ComparedVersion] = Field(description="Best first.")
    raw: HeadlineMetricsOut = Field(description="The raw scores' own metrics.")


class WindowIntervalsOut(BaseModel):
    """95% intervals of a window's measures (absent with `bootstrap=0` or fewer than two
    labelled predictions)."""

    log_loss: Interval | None = None
    brier: Interval | None = None
    ece: Interval | None = Field(
        None, description="Basic interval, reaching 0 unless a test of calibration rejects."
    )


class MonitoringWindowOut(BaseModel):
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
    ks: float | None = Field(description="Two-sample Kolmogorov-Smirnov statistic, likewise.")
    intervals: WindowIntervalsOut | None = Field(
        None,
        description="Percentiles of `bootstrap` draws of each bin's sums from the Gaussian "
        "with the Poisson bootstrap's mean and covariance (sums kept per window, so the cost "
        "does not grow with the traffic).",
    )


class MonitoringOut(BaseModel):
    name: str
    window: Literal["1h", "1d", "7d"]
    since: datetime
    until: datetime
    windows: list[MonitoringWindowOut]


class OutcomesOut(BaseModel):
    matched: int = Field(description="Logged predictions labelled now.")
    pending: int = Field(description="Ids not logged yet: joined when their prediction is.")
    duplicates: int = Field(description="Outcomes already stored with the same label.")
    overwritten: int = Field(description="Labels replaced (only with overwrite=true).")
