"""OpenAPI fragments: the error responses every route documents and the multi-type bodies of
the routes that take a labelled batch (fit, POST diagnostics, compare)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel
from starlette.responses import Response

from app.api.bodies.columnar import ARROW_STREAM, PARQUET
from app.api.bodies.contracts import (
    CompareBody,
    CompareFields,
    DiagnosticsBody,
    FitBody,
    FitOptions,
    PredictBody,
    ReportFields,
    TrafficFitBody,
)
from app.api.bodies.labelled import JSON_OPTIONS
from app.api.bodies.payloads import MULTIPART
from app.api.documents import Problem
from app.api.report_query import MEDIA_TYPES
from app.calibration import params_markdown
from app.service.reporting import ImageFormat

_PROBLEM = {"application/problem+json": {"schema": Problem.model_json_schema()}}

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Malformed body (not JSON, not an object)", "content": _PROBLEM},
    401: {"description": "No valid API key (with WWW-Authenticate)", "content": _PROBLEM},
    403: {"description": "A read key on a route that writes", "content": _PROBLEM},
    404: {"description": "Unknown calibrator, version or alias", "content": _PROBLEM},
    409: {"description": "A version an alias points to (delete with force)", "content": _PROBLEM},
    413: {"description": "Body or batch too large", "content": _PROBLEM},
    415: {"description": "Unsupported Content-Type", "content": _PROBLEM},
    422: {"description": "Invalid content; the detail names field and index", "content": _PROBLEM},
    503: {"description": "The database is unreachable (with Retry-After)", "content": _PROBLEM},
}

_CSV_EXAMPLE = "score,label,weight\n-2.1,0,1\n-0.4,0,1\n0.3,1,1\n1.7,1,2\n"


def _json_body(model: type[Any]) -> dict[str, Any]:
    schema = model.model_json_schema()
    return {"schema": schema, "example": schema.get("examples", [{}])[0]}


def _inlined(schema: Any, definitions: dict[str, Any]) -> Any:
    """``schema`` with its ``$ref``s to ``definitions`` replaced by what they name (a
    ``#/$defs`` reference would point into the OpenAPI document, where there is none)."""
    if isinstance(schema, list):
        return [_inlined(item, definitions) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return _inlined(definitions[schema["$ref"].rsplit("/", 1)[1]], definitions)
    return {k: _inlined(v, definitions) for k, v in schema.items() if k != "$defs"}


def _json_choice(*models: type[Any]) -> dict[str, Any]:
    """A JSON body that is one of ``models``, with each model's first example."""
    schemas = [model.model_json_schema() for model in models]
    return {
        "schema": {"anyOf": [_inlined(s, s.get("$defs", {})) for s in schemas]},
        "examples": {
            model.__name__: {"summary": (model.__doc__ or "").split("\n")[0], "value": example}
            for model, s in zip(models, schemas, strict=True)
            for example in s.get("examples", [])[:1]
        },
    }


def _batch_body(json: dict[str, Any], options: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` for a route that takes a labelled batch in every media type of
    :mod:`app.api.bodies.labelled`: the JSON body ``json``, CSV, Parquet, an Arrow stream, or a
    multipart upload with the fields of ``options`` beside its file."""
    fields = {key: _form_field(key, schema) for key, schema in _properties(options).items()}
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": json,
                "text/csv": {"schema": {"type": "string"}, "example": _CSV_EXAMPLE},
                PARQUET: {
                    "schema": {
                        "type": "string",
                        "format": "binary",
                        "description": "A Parquet file: columns score (or "
                        "score_0..score_{k-1}), label and optional weight, numbers without "
                        "nulls.",
                    },
                },
                ARROW_STREAM: {
                    "schema": {
                        "type": "string",
                        "format": "binary",
                        "description": "An Arrow IPC stream with the Parquet file's columns.",
                    },
                },
                MULTIPART: {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "file": {
                                "type": "string",
                                "format": "binary",
                                "description": "CSV, or Parquet when the file name ends .parquet",
                            },
                            **fields,
                        },
                        "required": ["file"],
                    },
                },
            },
        }
    }


def _properties(model: type[BaseModel]) -> dict[str, Any]:
    properties: dict[str, Any] = model.model_json_schema()["properties"]
    return properties


def _form_field(key: str, schema: dict[str, Any]) -> dict[str, Any]:
    """An option's schema as a form field: text for a JSON object, and never null (a form
    leaves out what it does not give)."""
    if key in JSON_OPTIONS:
        return {"type": "string", "description": "A JSON object."}
    choices = [choice for choice in schema.get("anyOf", []) if choice != {"type": "null"}]
    if len(choices) != 1:
        return schema
    return {**{k: v for k, v in schema.items() if k != "anyOf"}, **choices[0]}


FIT_BODY = {
    **_batch_body(_json_choice(FitBody, TrafficFitBody), FitOptions),
    "parameters": [
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "description": "1 to 128 printable ASCII characters. The same key on the same "
            "calibrator within 24 hours answers the version its first request made (200, "
            "`Idempotent-Replayed: true`) without fitting again, also while that fit runs; "
            "the key with another batch or other options is 422.",
            "schema": {"type": "string", "pattern": "^[\\x20-\\x7e]{1,128}$"},
        }
    ],
}
DIAGNOSTICS_BODY = _batch_body(_json_body(DiagnosticsBody), ReportFields)
COMPARE_BODY = _batch_body(_json_body(CompareBody), CompareFields)

BATCH_OPTIONS_TEXT = (
    "\n\n**The batch**: JSON, or CSV (`text/csv`), Parquet (`application/vnd.apache.parquet`), "
    "an Arrow IPC stream (`application/vnd.apache.arrow.stream`) or a multipart upload "
    "(`file`: CSV, or Parquet when its name ends `.parquet`) in the columns `score` (or "
    "`score_0..score_{k-1}`), `label` and optional `weight`. **Options**: a "
    "JSON body's own fields win, then the multipart form's fields, then the query's "
    "parameters; a list is one parameter (or form field) per item, repeated."
)
"""How a route that takes a labelled batch takes it and its options (its OpenAPI text)."""


def body_doc(model: type[Any]) -> dict[str, Any]:
    """``openapi_extra`` for a route whose JSON body is parsed by hand but shaped as ``model``."""
    return {"requestBody": {"required": True, "content": {"application/json": _json_body(model)}}}


PREDICT_BODY = body_doc(PredictBody)


FIT_DESCRIPTION = (
    "Fit `method` on a labelled batch and store it as the next version of `name`, creating "
    "`name` on first use. Answers 201 with the version and its `Location`. Binary batches "
    "send one score per row and labels 0/1; multiclass batches send an n x k matrix (k >= 3) "
    "and labels 0..k-1. Every version stores k-fold out-of-fold metrics (`metrics.cv`) and "
    "the raw scores' (`metrics.raw`)."
    + BATCH_OPTIONS_TEXT
    + "\n\n**From traffic**: instead of a batch, a JSON body with `from_traffic` (`since`, "
    "`until`, `version`: all optional) fits on the predictions logged with `ids` that have "
    "outcomes; the version records that range, the counts and its parent in `source`.\n\n"
    "**Methods and their `params`** (an unknown key is 422):\n\n" + params_markdown()
)


def add_picture_route(
    router: APIRouter,
    path: str,
    endpoint: Callable[..., Any],
    image_format: ImageFormat,
    *,
    summary: str,
    description: str,
    what: str,
) -> None:
    """Register ``endpoint`` as ``GET path.{png,svg}``, documented as answering ``what`` in
    the format's media type (the routes are made per format, as their media types differ)."""
    endpoint.__name__ = f"{endpoint.__name__}_{image_format}"
    router.add_api_route(
        f"{path}.{image_format}",
        endpoint,
        methods=["GET"],
        summary=f"{summary} ({image_format.upper()})",
        description=description,
        response_class=Response,
        responses={
            **ERRORS,
            200: {"content": {MEDIA_TYPES[image_format]: {}}, "description": what},
        },
    )
