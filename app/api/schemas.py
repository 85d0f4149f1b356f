"""Pydantic models of what the API answers (and of the JSON bodies, for the OpenAPI docs).

Request bodies are parsed by :mod:`app.api.payloads` (straight into numpy, with errors that
name the index); the request models below describe the same JSON for ``/docs``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.calibration import METHODS

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
SELECTOR_PATTERN = r"^(latest|[0-9]{1,18}|[A-Za-z0-9][A-Za-z0-9._-]{0,127})$"


class FitRequest(BaseModel):
    """A labelled batch to fit a new version on (also accepted as CSV; see the README)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "scores": [-2.1, -0.4, 0.3, 1.7, 2.2, -1.0],
                    "labels": [0, 0, 1, 1, 1, 0],
                    "method": "platt",
                    "params": {"targets": "platt"},
                    "description": "weekly refit",
                    "tags": {"team": "risk"},
                }
            ]
        },
    )

    scores: list[float] | list[list[float]] = Field(description="Raw model outputs, finite.")
    labels: list[int | bool] = Field(
        description="0/1 or booleans (binary); 0..k-1 (multiclass). Same length as scores."
    )
    sample_weight: list[float] | None = Field(default=None, description="Non-negative weights.")
    method: str = Field(
        default="auto",
        description=f"One of {', '.join(METHODS)}; see the method table below for params.",
    )
    params: dict[str, Any] = Field(default_factory=dict, description="Method parameters.")
    description: str = ""
    tags: dict[str, str] = Field(default_factory=dict)


class PredictRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"scores": [-1.2, 0.0, 0.7], "version": "latest"}]},
    )

    scores: list[float] | list[list[float]] = Field(
        description="Raw scores to calibrate, finite: a vector, or n x k for multiclass."
    )
    version: int | str = Field(default="latest", description="A version number or `latest`.")
    intervals: bool = Field(
        default=False,
        description="Also answer each score's Venn-ABERS interval [p0, p1] (methods that give "
        "intervals: venn_abers); 422 for other methods. Also `?intervals=true`.",
    )


class DiagnosticsRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "scores": [-1.2, 0.1, 0.8, 2.0],
                    "labels": [0, 0, 1, 1],
                    "n_bins": 10,
                    "strategy": "uniform",
                }
            ]
        },
    )

    scores: list[float] | list[list[float]]
    labels: list[int | bool]
    sample_weight: list[float] | None = None
    n_bins: int = Field(default=10, ge=2, le=100)
    strategy: Literal["uniform", "quantile"] = "uniform"
    class_index: int | None = Field(
        default=None, ge=0, description="One class against the rest; default top-label."
    )


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


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None


class Health(BaseModel):
    status: str


class AliasRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"version": 3}]})

    version: int = Field(ge=1, description="The version the alias points to from now on.")


class VersionPatch(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"description": "promoted after review", "tags": {"team": "risk", "stale": None}}
            ]
        },
    )

    description: str | None = Field(default=None, description="Replaces the description.")
    tags: dict[str, str | None] | None = Field(
        default=None, description="Merged into the tags; a null value deletes the key."
    )


class CompareRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "scores": [-1.2, 0.1, 0.8, 2.0],
                    "labels": [0, 0, 1, 1],
                    "versions": ["production", 4],
                }
            ]
        },
    )

    scores: list[float] | list[list[float]]
    labels: list[int | bool]
    sample_weight: list[float] | None = None
    versions: list[int | str] | None = Field(
        default=None, description="Selectors to compare; default every version (at most 50)."
    )


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
