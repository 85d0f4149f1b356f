"""The fit, predict and diagnostics bodies, from any accepted media type to typed arguments."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import orjson
from fastapi import Request
from numpy.typing import NDArray
from starlette.datastructures import UploadFile

from app.batch import Batch, validate_batch
from app.errors import PayloadTooLarge, invalid
from app.store.records import MAX_TAGS

from .payloads import (
    CSV_TYPES,
    JSON_TYPES,
    MULTIPART,
    check_text,
    number_array,
    optional_number_array,
    parse_csv,
    parse_json_object,
    require_media_type,
)

FIT_FIELDS = ("scores", "labels", "sample_weight", "method", "params", "description", "tags")
MAX_DESCRIPTION = 10_000


@dataclass(frozen=True)
class FitArgs:
    batch: Batch
    method: str
    params: dict[str, Any]
    description: str
    tags: dict[str, str] = field(default_factory=dict)


def check_keys(data: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    for key in data:
        if key not in allowed:
            raise invalid(("body", key), f"is not a known field; expected {', '.join(allowed)}")


@dataclass(frozen=True)
class FitSource:
    """A fit request as received, before parsing: its media type, the bytes to parse (the
    JSON or CSV body, or the uploaded CSV file) and the options given outside them."""

    kind: str
    data: bytes
    options: dict[str, str]


async def read_fit(request: Request, body: bytes) -> FitSource:
    """What a fit request holds, read on the event loop (the multipart form needs it)."""
    kind = require_media_type(
        request.headers.get("content-type"), (*JSON_TYPES, *CSV_TYPES, MULTIPART)
    )
    options = {k: v for k, v in request.query_params.items() if k in _OPTIONS}
    if kind != MULTIPART:
        return FitSource(kind, body, options)
    data, form_options = await _multipart_csv(request)
    return FitSource(kind, data, {**options, **form_options})


_OPTIONS = ("method", "params", "description", "tags")


def parse_fit(source: FitSource, max_rows: int) -> FitArgs:
    """A fit request as JSON, CSV or a multipart upload of CSV, with its options (the
    body's own fields first, then the form's, then the query's). CPU-heavy: run off the loop."""
    options: dict[str, Any] = {}
    if source.kind in JSON_TYPES:
        data = parse_json_object(source.data)
        check_keys(data, FIT_FIELDS)
        options = {k: data[k] for k in _OPTIONS if k in data}
        scores = (
            number_array(data.get("scores"), "scores", matrix=True) if "scores" in data else None
        )
        labels = number_array(data.get("labels"), "labels") if "labels" in data else None
        weights = optional_number_array(data.get("sample_weight"), "sample_weight")
        if scores is None:
            raise invalid(("body", "scores"), "is required")
        if labels is None:
            raise invalid(("body", "labels"), "is required")
    else:
        scores, labels, weights = parse_csv(
            source.data, field="file" if source.kind == MULTIPART else "body"
        )
    for key, raw in source.options.items():
        if key not in options:
            options[key] = _query_option(key, raw)
    batch = validate_batch(scores, labels, weights, max_rows=max_rows)
    return FitArgs(
        batch=batch,
        method=_string(options.get("method", "auto"), "method", 64),
        params=_object(options.get("params", {}), "params"),
        description=_string(options.get("description", ""), "description", MAX_DESCRIPTION),
        tags=_tags(options.get("tags", {})),
    )


async def _multipart_csv(request: Request) -> tuple[bytes, dict[str, str]]:
    form = await request.form()
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise invalid(("body", "file"), "is required: a CSV file field (curl -F file=@batch.csv)")
    options = {key: value for key in _OPTIONS if isinstance(value := form.get(key), str)}
    return await upload.read(), options


def _query_option(key: str, raw: str) -> Any:
    if key not in ("params", "tags"):
        return raw
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise invalid(("query", key), 'must be a JSON object, e.g. {"targets": "hard"}') from None


def _string(value: object, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise invalid(("body", name), "must be a string")
    if len(value) > limit:
        raise invalid(("body", name), f"has {len(value)} characters; the limit is {limit}")
    check_text(value, ("body", name))
    return value


def _object(value: object, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(("body", name), "must be a JSON object")
    return value


def _tags(value: object) -> dict[str, str]:
    tags = _object(value, "tags")
    if len(tags) > MAX_TAGS:
        raise invalid(("body", "tags"), f"has {len(tags)} entries; the limit is {MAX_TAGS}")
    for key, item in tags.items():
        if not isinstance(item, str):
            raise invalid(("body", "tags", key), "must be a string")
        if len(key) > 128 or len(item) > 1024:
            raise invalid(("body", "tags", key), "is too long (keys 128, values 1024 characters)")
        check_text(key + item, ("body", "tags", key))
    return tags


@dataclass(frozen=True)
class PredictArgs:
    scores: NDArray[np.float64]
    version: str | None
    intervals: bool | None


def parse_predict(content_type: str | None, body: bytes, max_rows: int) -> PredictArgs:
    """A predict body: scores (at most ``max_rows``), and the optional selector and flag."""
    require_media_type(content_type, JSON_TYPES)
    data = parse_json_object(body)
    check_keys(data, ("scores", "version", "intervals"))
    if "scores" not in data:
        raise invalid(("body", "scores"), "is required")
    if isinstance(data["scores"], list) and len(data["scores"]) > max_rows:
        raise PayloadTooLarge(f"scores has {len(data['scores'])} rows; the limit is {max_rows}")
    scores = number_array(data["scores"], "scores", matrix=True)
    version = data.get("version")
    if (version is not None and not isinstance(version, int | str)) or isinstance(version, bool):
        raise invalid(("body", "version"), "must be a version number, 'latest' or an alias")
    intervals = data.get("intervals")
    if intervals is not None and not isinstance(intervals, bool):
        raise invalid(("body", "intervals"), "must be true or false")
    return PredictArgs(scores, None if version is None else str(version), intervals)


def labelled_batch(data: Mapping[str, Any], max_rows: int) -> Batch:
    """``scores``, ``labels`` and ``sample_weight`` of a JSON body that judges stored versions
    (diagnostics, compare): one class alone is fine there."""
    for key in ("scores", "labels"):
        if key not in data:
            raise invalid(("body", key), "is required")
    return validate_batch(
        number_array(data["scores"], "scores", matrix=True),
        number_array(data["labels"], "labels"),
        optional_number_array(data.get("sample_weight"), "sample_weight"),
        max_rows=max_rows,
        require_both_classes=False,
    )


@dataclass(frozen=True)
class DiagnosticsArgs:
    batch: Batch
    n_bins: int
    strategy: Literal["uniform", "quantile"]
    class_index: int | None


def parse_diagnostics(content_type: str | None, body: bytes, max_rows: int) -> DiagnosticsArgs:
    require_media_type(content_type, JSON_TYPES)
    data = parse_json_object(body)
    check_keys(data, ("scores", "labels", "sample_weight", "n_bins", "strategy", "class_index"))
    batch = labelled_batch(data, max_rows)
    n_bins = data.get("n_bins", 10)
    if not isinstance(n_bins, int) or isinstance(n_bins, bool) or not 2 <= n_bins <= 100:
        raise invalid(("body", "n_bins"), "must be an integer from 2 to 100")
    strategy = data.get("strategy", "uniform")
    if strategy != "uniform" and strategy != "quantile":
        raise invalid(("body", "strategy"), "must be 'uniform' or 'quantile'")
    class_index = data.get("class_index")
    if class_index is not None and (
        not isinstance(class_index, int) or isinstance(class_index, bool) or class_index < 0
    ):
        raise invalid(("body", "class_index"), "must be a non-negative integer or null")
    return DiagnosticsArgs(batch, n_bins, strategy, class_index)
