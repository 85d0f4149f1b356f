"""A labelled batch's request read on the event loop: its media type checked, its body (or
uploaded file) and the options given in its query and form, as a
:class:`~app.api.bodies.labelled.BatchSource` that :mod:`app.api.bodies` parses off the loop.
The one place a batch's ``Request`` is awaited."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import Request
from pydantic import BaseModel
from starlette.datastructures import FormData, UploadFile

from app.api.bodies.labelled import BATCH_TYPES, BatchSource, is_list_option, upload_kind
from app.api.bodies.payloads import MULTIPART, require_media_type
from app.api.deps import read_job_body
from app.api.places import invalid


async def read_batch(
    request: Request, query: Mapping[str, object], options: type[BaseModel]
) -> BatchSource:
    """What a labelled-batch request holds, read on the event loop (the multipart form needs
    it): 415 for another media type before the body is read; ``query`` holds the options the
    route declares (None where not given), ``options`` is their model."""
    kind = require_media_type(request.headers.get("content-type"), BATCH_TYPES)
    body = await read_job_body(request)
    given = {"query": {key: value for key, value in query.items() if value is not None}}
    if kind != MULTIPART:
        return BatchSource(kind, body, given)
    form = await request.form()
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise invalid(
            ("body", "file"),
            "is required: a CSV, Parquet or Arrow file field (curl -F file=@batch.csv)",
        )
    kind = upload_kind(upload.filename, upload.content_type)  # 415 before the file is read
    given["form"] = _form_options(form, options)
    return BatchSource(kind, await upload.read(), given)


def _form_options(form: FormData, options: type[BaseModel]) -> dict[str, Any]:
    """The form's fields that are options: a list option from all its fields, another from
    its last."""
    found: dict[str, Any] = {}
    for key, field in options.model_fields.items():
        values = [value for value in form.getlist(key) if isinstance(value, str)]
        if values:
            found[key] = values if is_list_option(field.annotation) else values[-1]
    return found
