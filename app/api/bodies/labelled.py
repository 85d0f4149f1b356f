"""A labelled batch in any media type a route takes it in, with the options given beside it.

Fit, POST diagnostics and compare take one contract: JSON, CSV (``text/csv``), Parquet,
an Arrow IPC stream, or a multipart upload whose ``file`` is any of CSV, Parquet or Arrow
(:func:`upload_kind`: its declared media type, else its name's extension). A JSON body
carries the route's options as its own fields; every body may also give them in the query
string, and an upload in its form. Where several places give one option the
body's own field wins, then the form's, then the query's. Each place answers for its own
errors (``query``, ``form``, ``body``), and is read as what it holds: typed JSON in the body,
text elsewhere (``?n_bins=5``; ``params`` and ``tags`` as JSON objects; a list option as the
parameter repeated, ``?versions=1&versions=latest``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar, get_args, get_origin

import orjson
from pydantic import BaseModel

from app.api.bodies.columnar import ARROW_STREAM, COLUMNAR_TYPES, PARQUET, parse_columnar
from app.api.bodies.contracts import LabelledBody
from app.api.bodies.csv_batches import parse_csv
from app.api.bodies.json_process import parse_json_body
from app.api.bodies.payloads import (
    BATCH_ARRAYS,
    CSV_TYPES,
    JSON_TYPES,
    MULTIPART,
    media_type,
    number_array,
    optional_number_array,
)
from app.api.bodies.validation import validated
from app.api.places import Places, invalid
from app.errors import UnsupportedMediaType
from app.service.batches import Batch, validate_batch

M = TypeVar("M", bound=BaseModel)

BATCH_TYPES = (*JSON_TYPES, *CSV_TYPES, *COLUMNAR_TYPES, MULTIPART)
"""The media types of a labelled batch."""
JSON_OPTIONS = ("params", "tags")
"""Options that are JSON objects, sent as JSON text outside a JSON body."""

UPLOAD_TYPES = {
    **dict.fromkeys(CSV_TYPES, CSV_TYPES[0]),
    PARQUET: PARQUET,
    ARROW_STREAM: ARROW_STREAM,
    "application/vnd.apache.arrow.file": ARROW_STREAM,  # read past its magic: columnar.py
}
"""An uploaded file's declared media types, and the batch type each is parsed as."""
UPLOAD_EXTENSIONS = {
    ".csv": CSV_TYPES[0],
    ".parquet": PARQUET,
    ".arrow": ARROW_STREAM,
    ".arrows": ARROW_STREAM,
}
"""What an upload declared only as bytes (``application/octet-stream``, or nothing) is
parsed as, by its name's extension; CSV for any other name."""
UNDECLARED = ("", "application/octet-stream")


def upload_kind(filename: str | None, content_type: str | None) -> str:
    """The batch type of an uploaded ``file`` part: its declared media type (415 for one that
    is no batch's), else its name's extension (curl and most clients send
    ``application/octet-stream`` for a name they do not know), else CSV."""
    declared = media_type(content_type)
    if declared not in UNDECLARED:
        kind = UPLOAD_TYPES.get(declared)
        if kind is None:
            raise UnsupportedMediaType(
                f"the file part's Content-Type {declared[:64]} is not supported; upload CSV "
                f"(text/csv), Parquet ({PARQUET}) or Arrow ({ARROW_STREAM})"
            )
        return kind
    name = (filename or "").lower()
    extension = name[name.rfind(".") :] if "." in name else ""
    return UPLOAD_EXTENSIONS.get(extension, CSV_TYPES[0])


@dataclass(frozen=True)
class BatchSource:
    """A labelled-batch request as received, before parsing: its media type (an uploaded
    file's: :func:`upload_kind`),
    the bytes to parse (the JSON, CSV, Parquet or Arrow body, or the uploaded file) and the
    options given outside them, by where they were given (``query``, ``form``)."""

    kind: str
    data: bytes
    options: dict[str, dict[str, Any]]


class Given(NamedTuple):
    """What a request gives beside its arrays: the options from the query and the form, typed
    (the form's overriding the query's), where each was given, and the JSON body parsed (None
    for other types)."""

    options: dict[str, Any]
    json: dict[str, Any] | None
    where: dict[str, str]

    def places(self) -> Places:
        """Where each field the request holds came from: a JSON body's own field wins, so it
        is in the body; an option only in the query or the form is there."""
        body = self.json or {}
        return Places({key: at for key, at in self.where.items() if key not in body})


def given_beside(source: BatchSource, options: type[BaseModel]) -> Given:
    """The options ``source`` gives outside its JSON fields, each place validated as
    ``options`` (422 located at that place), and its JSON body."""
    typed: dict[str, Any] = {}
    places: dict[str, str] = {}
    for where, texts in source.options.items():
        these = {key: _from_text(where, key, value) for key, value in texts.items()}
        valid = validated(options, these, source=where, strict=False)  # text: "5" is 5
        typed.update((key, getattr(valid, key)) for key in these)
        places.update(dict.fromkeys(these, where))
    json = parse_json_body(source.data, BATCH_ARRAYS) if source.kind in JSON_TYPES else None
    return Given(typed, json, places)


def labelled_batch(
    source: BatchSource,
    given: Given,
    options: type[M],
    body: type[LabelledBody],
    *,
    max_rows: int,
    require_both_classes: bool,
) -> tuple[Batch, M]:
    """The batch of ``source`` in its media type, and its options: for JSON, the ``body``
    model (which extends ``options``) over the given options and the body's fields; else the
    given options. CPU-heavy: run off the loop."""
    chosen: M
    if given.json is not None:
        data = validated(body, {**given.options, **given.json})
        assert isinstance(data, options)  # each body model extends its options model
        scores = number_array(data.scores, "scores", matrix=True, booleans=False)
        labels = number_array(data.labels, "labels")
        weights = optional_number_array(data.sample_weight, "sample_weight")
        chosen = data
    else:
        chosen = validated(options, given.options)
        field = "file" if "form" in source.options else "body"  # an upload, or the body
        if source.kind in COLUMNAR_TYPES:
            scores, labels, weights = parse_columnar(
                source.data, source.kind, field=field, max_rows=max_rows
            )
        else:
            scores, labels, weights = parse_csv(source.data, field=field)
    batch = validate_batch(
        scores, labels, weights, max_rows=max_rows, require_both_classes=require_both_classes
    )
    return batch, chosen


def judged_batch(
    source: BatchSource, options: type[M], body: type[LabelledBody], max_rows: int
) -> tuple[Batch, M, Places]:
    """The batch of a request that judges stored versions (diagnostics, compare), its options
    (one class alone is fine there) and where they were given."""
    given = given_beside(source, options)
    batch, chosen = labelled_batch(
        source, given, options, body, max_rows=max_rows, require_both_classes=False
    )
    return batch, chosen, given.places()


def is_list_option(annotation: Any) -> bool:
    """Whether a field's type is a list (or a list or None)."""
    return list in (get_origin(annotation), *map(get_origin, get_args(annotation)))


def _from_text(where: str, key: str, value: Any) -> Any:
    """An option as given: ``params`` and ``tags`` are JSON objects in text."""
    if key not in JSON_OPTIONS or not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        raise invalid((where, key), 'must be a JSON object, e.g. {"targets": "hard"}') from None
