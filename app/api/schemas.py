"""Pydantic models of what the API answers, for the OpenAPI docs (the request bodies are
in :mod:`app.api.contracts`, which validates them too)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

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


class ReliabilityOut(BaseModel):
    bins: list[ReliabilityBinOut]
    metrics: dict[str, float | None]


class DiagnosticsOut(BaseModel):
    name: str
    version: int
    n_bins: int
    strategy: Literal["uniform", "quantile"]
    class_index: int | None
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


class ComparedVersion(BaseModel):
    version: int
    method: str
    metrics: dict[str, float | None]
    delta: dict[str, float | None] = Field(description="Each metric minus the best one's.")


class CompareOut(BaseModel):
    name: str
    n_samples: int
    by: str
    versions: list[ComparedVersion] = Field(description="Best first.")
    raw: dict[str, float | None] = Field(description="The raw scores' own metrics.")


class OutcomesOut(BaseModel):
    matched: int = Field(description="Logged predictions labelled now.")
    pending: int = Field(description="Ids not logged yet: joined when their prediction is.")
    duplicates: int = Field(description="Outcomes already stored with the same label.")
    overwritten: int = Field(description="Labels replaced (only with overwrite=true).")
