"""Reliability reports and comparisons as the API writes them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Self

from pydantic import Field

from app.api.documents.base import Document, Interval
from app.calibration import Report
from app.service.reporting import ReportOptions


class ReliabilityBinOut(Document):
    lower: float
    upper: float
    count: int = Field(description="Points in the bin.")
    weight: float = Field(description="Their summed sample weight (= count when unweighted).")
    mean_predicted: float | None
    fraction_positive: float | None
    ci_low: float | None
    ci_high: float | None


class HeadlineMetricsOut(Document):
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
    """The measures of a report (docs/methods.md, Measures); null where undefined (one class, a
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


class SmoothOut(Document):
    """The kernel-smoothed reliability curve (relplot's), on a 200-point mesh of [0, 1]."""

    sigma: float = Field(description="The kernel's bandwidth (smooth ECE's own).")
    x: list[float]
    y: list[float] = Field(description="Smoothed fraction of positives at each x.")
    low: list[float] | None = Field(description="Pointwise 95% band (bootstrap); null without.")
    high: list[float] | None
    density: list[float] = Field(description="Kernel density of the predictions at each x.")


class ReliabilityOut(Document):
    bins: list[ReliabilityBinOut]
    metrics: MetricsOut
    smooth: SmoothOut | None = None


class DiagnosticsOut(Document):
    name: str
    version: int
    n_bins: int
    strategy: Literal["uniform", "quantile"]
    class_index: int | None
    bootstrap: int = Field(description="Resamples behind the intervals (0: none).")
    n_samples: int
    calibrated: ReliabilityOut
    raw: ReliabilityOut

    @classmethod
    def of(
        cls,
        name: str,
        version: int | None,
        n_samples: int,
        reports: tuple[Report, Report],
        query: ReportOptions,
        **beside: object,
    ) -> Self:
        """The shape every reliability report answers in (a stored version's, a posted
        batch's, the logged traffic's, with what a subclass adds ``beside``): the calibrated
        and raw reports, and ``n_bins`` as used (``auto`` resolved)."""
        calibrated, raw = reports
        return cls.model_validate(
            {
                "name": name,
                "version": version,
                "n_bins": calibrated.bins.lower.size,
                "strategy": query.strategy,
                "class_index": query.class_index,
                "bootstrap": query.bootstrap,
                "n_samples": n_samples,
                "calibrated": calibrated.as_json(),
                "raw": raw.as_json(),
                **beside,
            }
        )


class TrafficDiagnosticsOut(DiagnosticsOut):
    """The diagnostics of the labelled predictions logged in [since, until)."""

    version: int | None = Field(  # type: ignore[assignment]
        description="The version asked for; null: the traffic every version answered."
    )
    n_labelled: int = Field(description="The labelled predictions reported (= n_samples).")
    since: datetime
    until: datetime


class Difference(Document):
    value: float | None = Field(description="This version's ranking metric minus the best's.")
    interval: Interval | None = Field(
        description="Its paired bootstrap 95% interval (the same resamples for every "
        "version); [0, 0] for the best (with or without resamples); null for the others "
        "without resamples, and for all when the metric is undefined (one class for AUC)."
    )


class ComparedVersion(Document):
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


class CompareOut(Document):
    name: str
    n_samples: int
    by: str
    bootstrap: int = Field(description="Resamples behind the intervals (0: none).")
    versions: list[ComparedVersion] = Field(description="Best first.")
    raw: HeadlineMetricsOut = Field(description="The raw scores' own metrics.")
