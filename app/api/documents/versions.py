"""Versions and calibrators as the API writes them, and the shape of a prediction."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self

from pydantic import Field

from app.api.documents.base import Document
from app.service.views import CalibratorView, VersionView
from app.store import CalibratorSummary, VersionRecord


class ArtifactInfo(Document):
    sha256: str
    bytes: int


class VersionSummary(Document):
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
        "`parent_version` (the latest at the time), and the range's counts by version; for a "
        "version corrected to new priors, `adjusted`: `parent_version`, `prior_from`, "
        "`prior_to` (binary: P(y = 1); k classes: vectors) and `estimated_from` (null, or the "
        "traffic range the new priors were estimated on).",
    )
    aliases: list[str] = Field(default_factory=list)
    artifact: ArtifactInfo

    @classmethod
    def of(cls, record: VersionRecord) -> Self:
        """The summary of a stored version: the record's fields of the same names."""
        named = {name: getattr(record, name) for name in _RECORD_FIELDS}
        return cls(
            **named,
            aliases=list(record.aliases),
            artifact=ArtifactInfo(sha256=record.artifact_sha256, bytes=record.artifact_bytes),
        )


class VersionOut(VersionSummary):
    """A version, as ``GET .../versions/{selector}`` and ``POST .../fit`` answer it."""

    fitted: dict[str, Any]

    @classmethod
    def of_view(cls, view: VersionView) -> VersionOut:
        """A version alone, with its fitted numbers."""
        return cls(**dict(VersionSummary.of(view.record)), fitted=view.fitted)


class CalibratorItem(Document):
    name: str
    latest_version: int | None
    method: str | None
    n_versions: int
    updated_at: datetime

    @classmethod
    def of(cls, summary: CalibratorSummary) -> Self:
        """A calibrator as listed."""
        return cls(**{name: getattr(summary, name) for name in CalibratorItem.model_fields})


class CalibratorList(Document):
    items: list[CalibratorItem]
    total: int

    @classmethod
    def of(cls, summaries: list[CalibratorSummary], total: int) -> CalibratorList:
        """One page of the calibrators, of ``total``."""
        return cls(items=[CalibratorItem.of(summary) for summary in summaries], total=total)


class CalibratorOut(CalibratorItem):
    aliases: dict[str, int] = Field(description="Alias name → the version it points to.")
    versions: list[VersionSummary]
    total: int

    @classmethod
    def of_view(cls, view: CalibratorView) -> CalibratorOut:
        """A calibrator, its aliases and one page of its versions."""
        return cls(
            **dict(CalibratorItem.of(view.summary)),
            aliases=view.aliases,
            versions=[VersionSummary.of(record) for record in view.versions],
            total=view.total,
        )


class PredictOut(Document):
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
    decisions: list[int] | None = Field(
        None, description="With `threshold`: 1 where the probability exceeds it, else 0."
    )


_RECORD_FIELDS = tuple(
    name for name in VersionSummary.model_fields if name not in ("aliases", "artifact")
)
