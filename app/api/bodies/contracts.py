"""The JSON request bodies: one pydantic model each, which both validates and documents.

The limits ``/docs`` shows are the limits enforced, because they are the same model. Only the
big arrays (``scores``, ``labels``, ``sample_weight``) are left to the numpy path of
:mod:`app.api.bodies.payloads`, which converts millions of numbers at once and names the index of
the first bad one; here they are documented (:data:`Numbers`) and passed through as parsed.
Validation errors become one 422 whose ``errors`` carry each failure's location and a
sentence (:func:`validated`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
)

from app.api.bodies.fields import (
    BINS_TEXT,
    BOOTSTRAP_TEXT,
    CLASS_INDEX_TEXT,
    CURVE_TEXT,
    MAX_CLASS_INDEX,
    MAX_DESCRIPTION,
    STRATEGY_TEXT,
    BinCount,
    ClientId,
    Labels,
    Numbers,
    OutcomeLabel,
    Selector,
    TagKey,
    TagPatch,
    TagValue,
    Text,
    Weights,
)
from app.calibration import MAX_RESAMPLES, METHODS
from app.service.comparison import MAX_COMPARED
from app.service.reporting import DEFAULT_REPORT, Curve, Strategy
from app.store import MAX_TAGS


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class FitOptions(_Body):
    """What a fit is asked to do, in any media type (CSV takes them from the query or form)."""

    method: Text = Field(
        default="auto",
        max_length=64,
        description=f"One of {', '.join(METHODS)}; see the method table below for params.",
    )
    params: dict[str, Any] = Field(default_factory=dict, description="Method parameters.")
    description: Text = Field(default="", max_length=MAX_DESCRIPTION)
    tags: dict[TagKey, TagValue] = Field(default_factory=dict, max_length=MAX_TAGS)


class LabelledBody(_Body):
    """A labelled batch: what a fit is made on and stored versions are judged on. Each body
    that carries one adds the options of its route (the fields of another media type's query
    or form)."""

    scores: Numbers = Field(description="Raw model outputs, finite.")
    labels: Labels = Field(
        description="0/1 or booleans (binary); 0..k-1 (multiclass). Same length as scores."
    )
    sample_weight: Weights = Field(default=None, description="Non-negative weights.")


class FitBody(FitOptions, LabelledBody):
    """A labelled batch to fit a new version on (also accepted as CSV, Parquet or Arrow;
    docs/api.md, Fitting)."""

    model_config = ConfigDict(
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


Moment = Annotated[datetime, Field(strict=False)]
"""A time as ISO 8601 text (a time without a zone is read as UTC)."""


class TrafficRange(_Body):
    """Which logged predictions a fit ``from_traffic`` is made on: those with an outcome,
    logged in [since, until), answered by one ``version`` or by any."""

    since: Moment | None = Field(default=None, description="Start (default: all logged).")
    until: Moment | None = Field(default=None, description="End, exclusive (default: now).")
    version: Selector | None = Field(
        default=None, description="Only the traffic this version (number or alias) answered."
    )


class TrafficFitBody(FitOptions):
    """A fit on the logged predictions that have outcomes, instead of a posted batch."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "from_traffic": {"since": "2026-11-01T00:00:00Z", "version": "production"},
                    "method": "auto",
                    "description": "refit on November's traffic",
                }
            ]
        },
    )

    from_traffic: TrafficRange


class PredictBody(_Body):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"scores": [0.12, 0.5, 0.87], "version": "latest"}]},
    )

    scores: Numbers = Field(
        description="Raw scores to calibrate, finite: a vector, or n x k for multiclass."
    )
    version: Selector | None = Field(
        default=None, description="A version number, `latest` (the default) or an alias."
    )
    intervals: Annotated[bool | None, WithJsonSchema({"type": "boolean", "default": False})] = (
        Field(
            default=None,
            description="Also answer each score's Venn-ABERS interval [p0, p1] (methods that give "
            "intervals: venn_abers); 422 for other methods. Also `?intervals=true`.",
        )
    )
    ids: list[ClientId] | None = Field(
        default=None,
        description="Your id of each score (row), unique within the request: each prediction "
        "is logged under it, for outcomes posted later (`POST .../outcomes`).",
    )
    threshold: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Binary calibrators: also answer `decisions`, 1 where the probability "
        "exceeds this threshold, else 0 (with calibrated probabilities, c_FP / (c_FP + c_FN) "
        "minimises the expected cost: `GET .../decision`).",
    )


class EstimateBody(_Body):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"scores": [0.12, 0.5, 0.87], "threshold": 0.5}]},
    )

    scores: Numbers = Field(
        description="Raw scores of unlabelled cases, finite: a vector, or n x k for multiclass."
    )
    threshold: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Binary calibrators: decide 1 above it (default 0.5) for the expected "
        "accuracy, precision, recall and F1; 422 for a multiclass one (argmax).",
    )


class OutcomesBody(_Body):
    """Outcomes of logged predictions, by the ids they were logged under."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"ids": ["req-1", "req-2"], "labels": [1, 0]}]},
    )

    ids: list[ClientId] = Field(min_length=1, description="Ids given to predict, each once.")
    labels: list[OutcomeLabel] = Field(
        description="The outcome of each id: 0/1 or booleans (binary), 0..k-1 (multiclass)."
    )


class ReportFields(_Body):
    """What a reliability report on a posted batch is asked for (a CSV, Parquet or Arrow
    body gives it in the query or the multipart form)."""

    n_bins: BinCount = Field(default=DEFAULT_REPORT.n_bins, description=BINS_TEXT)
    strategy: Strategy = Field(default=DEFAULT_REPORT.strategy, description=STRATEGY_TEXT)
    bootstrap: int = Field(
        default=DEFAULT_REPORT.bootstrap, ge=0, le=MAX_RESAMPLES, description=BOOTSTRAP_TEXT
    )
    class_index: int | None = Field(
        default=DEFAULT_REPORT.class_index, ge=0, le=MAX_CLASS_INDEX, description=CLASS_INDEX_TEXT
    )
    curve: Curve = Field(default=DEFAULT_REPORT.curve, description=CURVE_TEXT)


class DiagnosticsBody(ReportFields, LabelledBody):
    """A fresh labelled batch to report a stored version's reliability on."""

    model_config = ConfigDict(
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


VERSIONS_TEXT = (
    "Selectors to compare, at least one (default: every version, newest first, at most 50)."
)


class CompareFields(_Body):
    """Which versions a comparison ranks (a CSV, Parquet or Arrow body gives them in the
    query or the multipart form, one selector a parameter: ``versions=1&versions=latest``)."""

    versions: list[Selector] | None = Field(
        default=None, min_length=1, max_length=MAX_COMPARED, description=VERSIONS_TEXT
    )
    bootstrap: int = Field(
        default=DEFAULT_REPORT.bootstrap, ge=0, le=MAX_RESAMPLES, description=BOOTSTRAP_TEXT
    )
    curve: Curve = Field(default=DEFAULT_REPORT.curve, description=CURVE_TEXT)


class CompareBody(CompareFields, LabelledBody):
    """A fresh labelled batch to rank stored versions on."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "scores": [-1.2, 0.1, 0.8, 2.0],
                    "labels": [0, 0, 1, 1],
                    "versions": [1, "production", "latest"],
                }
            ]
        },
    )


class AliasBody(_Body):
    model_config = ConfigDict(json_schema_extra={"examples": [{"version": 3}]})

    version: int = Field(ge=1, description="The version the alias points to from now on.")


class PatchBody(_Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"description": "promoted after review", "tags": {"stage": "prod"}}]
        },
    )

    description: Text | None = Field(
        default=None, max_length=MAX_DESCRIPTION, description="Replaces the description."
    )
    tags: dict[TagKey, TagPatch] | None = Field(
        default=None,
        max_length=MAX_TAGS,
        description="Merged into the tags; a null value deletes its key.",
    )
