"""Route: predict with a version (its answer: :mod:`app.api.answers`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from app.api.answers import answer_predict
from app.api.bodies.media import PredictArgs, parse_predict
from app.api.deps import (
    PARSED_BODY,
    Flag,
    NameParam,
    ServiceDep,
    answer_by_size,
)
from app.api.documents import PredictOut
from app.api.openapi_docs import ERRORS, PREDICT_BODY
from app.api.query_params import DecisionThreshold, given_once

router = APIRouter(prefix="/v1", tags=["predictions"])


@router.post(
    "/calibrators/{name}/predict",
    response_model=PredictOut,
    summary="Calibrate scores",
    openapi_extra=PREDICT_BODY,
    responses=ERRORS,
    dependencies=[Depends(given_once("version", "intervals", "threshold"))],
)
async def predict(
    name: NameParam,
    request: Request,
    service: ServiceDep,
    version: Annotated[
        str | None, Query(description="A version number, `latest` or an alias.")
    ] = None,
    intervals: Annotated[
        Flag | None,
        Query(description="Also answer each score's Venn-ABERS interval [p0, p1] (venn_abers)."),
    ] = None,
    threshold: DecisionThreshold = None,
) -> Response:
    """Map raw scores to calibrated probabilities, in input order, with the version used;
    with `intervals`, a `venn_abers` version also answers each score's interval [p0, p1]."""
    content_type = request.headers.get("content-type")
    parsed: PredictArgs | None = request.scope.get("state", {}).pop(PARSED_BODY, None)

    def answer(body: bytes) -> bytes:
        max_rows = service.settings.max_batch_rows
        args = parsed if parsed is not None else parse_predict(content_type, body, max_rows)
        return answer_predict(
            service, name, args, version, intervals, request.scope, threshold=threshold
        )

    return Response(await answer_by_size(request, answer), media_type="application/json")
