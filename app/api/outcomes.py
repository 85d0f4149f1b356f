"""Route: outcomes of logged predictions (the traffic loop)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from app.service import CalibrationService

from .bodies import parse_outcomes
from .contracts import OutcomesBody
from .deps import NameParam, ServiceDep, json_response, off_loop, read_job_body
from .openapi_docs import ERRORS, body_doc
from .schemas import OutcomesOut

router = APIRouter(prefix="/v1", tags=["traffic"])


@router.post(
    "/calibrators/{name}/outcomes",
    response_model=OutcomesOut,
    summary="Post outcomes of logged predictions",
    openapi_extra=body_doc(OutcomesBody),
    responses=ERRORS,
)
async def post_outcomes(
    name: NameParam,
    request: Request,
    service: ServiceDep,
    overwrite: Annotated[
        bool, Query(description="Replace labels that differ instead of answering 409.")
    ] = False,
) -> Response:
    """Label the predictions logged under these ids (`predict` with `ids`). An id not logged
    yet waits and is joined when its prediction is; the same outcome twice changes nothing; a
    different label for an id that has one is 409 for the whole request unless
    `overwrite=true`. JSON `{"ids", "labels"}` or CSV `id,label`."""
    body = await read_job_body(request)
    counts = await off_loop(
        request, _record, service, name, request.headers.get("content-type"), body, overwrite
    )
    return json_response(counts)


def _record(
    service: CalibrationService, name: str, content_type: str | None, body: bytes, overwrite: bool
) -> dict[str, int]:
    outcomes = parse_outcomes(content_type, body, service.settings.max_batch_rows)
    counts = service.record_outcomes(name, outcomes, overwrite=overwrite)
    return {
        "matched": counts.matched,
        "pending": counts.pending,
        "duplicates": counts.duplicates,
        "overwritten": counts.overwritten,
    }
