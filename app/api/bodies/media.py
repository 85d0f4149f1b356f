"""The fit, predict, outcomes, diagnostics and compare bodies, from any accepted media type to
typed arguments: the small fields through their contract (:mod:`app.api.bodies.contracts`), the big
arrays through the numpy path (:mod:`app.api.bodies.payloads`), a labelled batch in any of its media
types through :mod:`app.api.bodies.labelled`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from app.api.bodies.contracts import (
    CompareBody,
    CompareFields,
    DiagnosticsBody,
    EstimateBody,
    FitBody,
    FitOptions,
    OutcomesBody,
    PredictBody,
    ReportFields,
    TrafficFitBody,
    TrafficRange,
)
from app.api.bodies.csv_outcomes import outcomes_csv
from app.api.bodies.json_process import parse_json_body
from app.api.bodies.labelled import BatchSource, given_beside, judged_batch, labelled_batch
from app.api.bodies.payloads import (
    CSV_TYPES,
    JSON_TYPES,
    ParsedArray,
    number_array,
    require_media_type,
)
from app.api.bodies.validation import validated
from app.api.places import Places, invalid
from app.errors import PayloadTooLarge
from app.service.batches import Batch
from app.service.reporting import ReportOptions


@dataclass(frozen=True)
class FitArgs:
    """A posted batch, or the traffic range to read it from (``from_traffic``)."""

    batch: Batch | TrafficRange
    options: FitOptions
    places: Places


def parse_fit(source: BatchSource, max_rows: int) -> FitArgs:
    """A fit request in any media type of :mod:`app.api.bodies.labelled`, with its options, or a
    JSON body naming logged traffic instead of a batch. CPU-heavy: run off the loop."""
    given = given_beside(source, FitOptions)
    if given.json is not None and "from_traffic" in given.json:
        refit = validated(TrafficFitBody, {**given.options, **given.json})
        return FitArgs(refit.from_traffic, refit, given.places())
    batch, options = labelled_batch(
        source, given, FitOptions, FitBody, max_rows=max_rows, require_both_classes=True
    )
    return FitArgs(batch, options, given.places())


class PredictArgs(NamedTuple):  # a tuple: built on every predict, 3x faster than frozen
    scores: NDArray[np.float64]
    version: str | None
    intervals: bool | None
    ids: list[str] | None
    threshold: float | None = None


def parse_predict(content_type: str | None, body: bytes, max_rows: int) -> PredictArgs:
    """A predict body: scores (at most ``max_rows``), and the optional selector and flag."""
    require_media_type(content_type, JSON_TYPES)
    data = validated(PredictBody, parse_json_body(body, {"scores": True}))
    scores = _scores(data.scores, max_rows)
    version = None if data.version is None else str(data.version)
    if data.ids is not None:
        check_ids(data.ids, len(scores), "scores")
    return PredictArgs(scores, version, data.intervals, data.ids, data.threshold)


class EstimateArgs(NamedTuple):
    scores: NDArray[np.float64]
    threshold: float | None


def parse_estimate(content_type: str | None, body: bytes, max_rows: int) -> EstimateArgs:
    """An estimate body: unlabelled scores (at most ``max_rows``) and the threshold."""
    require_media_type(content_type, JSON_TYPES)
    data = validated(EstimateBody, parse_json_body(body, {"scores": True}))
    scores = _scores(data.scores, max_rows)
    return EstimateArgs(scores, data.threshold)


def _scores(scores: Any, max_rows: int) -> NDArray[np.float64]:
    """A body's scores as an array: 413 past ``max_rows``, 422 for what is not numbers."""
    if isinstance(scores, list | ParsedArray) and len(scores) > max_rows:
        raise PayloadTooLarge(f"scores has {len(scores)} rows; the limit is {max_rows}")
    return number_array(scores, "scores", matrix=True, booleans=False)


def chosen_threshold(
    body: float | None, query: float | None, scores: NDArray[np.float64]
) -> float | None:
    """The threshold a request gives, in its body or its query (422 when both give it and
    differ, or beside a matrix of scores: a multiclass calibrator decides by its likeliest
    class); -0.0 read as 0.0."""
    if body is not None and query is not None and body != query:
        raise invalid(("body", "threshold"), f"is {body!r} but the query says {query!r}")
    given = body if body is not None else query
    if given is not None and scores.ndim == 2:
        raise invalid(
            ("body" if body is not None else "query", "threshold"),
            "is for binary calibrators; a multiclass one decides by its likeliest class",
        )
    return None if given is None else given + 0.0


def check_ids(
    ids: list[str], rows: int, of: str, at: tuple[str | int, ...] = ("body", "ids")
) -> None:
    """One id per row of ``of``, each once (else 422 at ``at``, naming the first repeat)."""
    if len(ids) != rows:
        raise invalid(at, f"has {len(ids)} ids for {rows} rows of {of}")
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        for index, client_id in enumerate(ids):
            if client_id in seen:
                raise invalid((*at, index), f"repeats the id {client_id!r}")
            seen.add(client_id)


def parse_outcomes(content_type: str | None, body: bytes, max_rows: int) -> list[tuple[str, int]]:
    """An outcomes body, JSON ``{"ids", "labels"}`` or CSV ``id,label``: (id, label) pairs,
    each id once, at most ``max_rows``."""
    kind = require_media_type(content_type, (*JSON_TYPES, *CSV_TYPES))
    if kind in JSON_TYPES:
        data = validated(OutcomesBody, parse_json_body(body, {}))
        ids, labels = data.ids, data.labels
    else:
        ids, labels = outcomes_csv(body)
    if len(ids) > max_rows:
        raise PayloadTooLarge(f"ids has {len(ids)} rows; the limit is {max_rows}")
    if len(labels) != len(ids):
        raise invalid(("body", "labels"), f"has {len(labels)} labels for {len(ids)} ids")
    check_ids(ids, len(ids), "ids")
    return list(zip(ids, labels, strict=True))


def parse_diagnostics(source: BatchSource, max_rows: int) -> tuple[Batch, ReportOptions, Places]:
    """A POST diagnostics request: the labelled batch, the report it asks for, and where its
    options were given."""
    batch, given, places = judged_batch(source, ReportFields, DiagnosticsBody, max_rows)
    report = ReportOptions(
        given.n_bins, given.strategy, given.class_index, given.bootstrap, given.curve
    )
    return batch, report, places


def parse_compare(source: BatchSource, max_rows: int) -> tuple[Batch, CompareFields, Places]:
    """A compare request: the labelled batch, the selectors to compare (None: every one) and
    the resamples behind the paired intervals, and where they were given."""
    return judged_batch(source, CompareFields, CompareBody, max_rows)
