"""Route: predict with a version (and the one function both predict paths run)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, overload

import orjson
from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from app.api.bodies.media import PredictArgs, parse_predict
from app.api.deps import PARSED_BODY, NameParam, ServiceDep, answer_by_size, parse_selector
from app.api.documents import PredictOut
from app.api.openapi_docs import ERRORS, PREDICT_BODY
from app.errors import invalid
from app.service.use_cases import CalibrationService

router = APIRouter(prefix="/v1", tags=["predictions"])


@router.post(
    "/calibrators/{name}/predict",
    response_model=PredictOut,
    summary="Calibrate scores",
    openapi_extra=PREDICT_BODY,
    responses=ERRORS,
)
async def predict(
    name: NameParam,
    request: Request,
    service: ServiceDep,
    version: Annotated[
        str | None, Query(description="A version number, `latest` or an alias.")
    ] = None,
    intervals: Annotated[
        bool | None,
        Query(description="Also answer each score's Venn-ABERS interval [p0, p1] (venn_abers)."),
    ] = None,
) -> Response:
    """Map raw scores to calibrated probabilities, in input order, with the version used;
    with `intervals`, a `venn_abers` version also answers each score's interval [p0, p1]."""
    content_type = request.headers.get("content-type")
    parsed: PredictArgs | None = request.scope.get("state", {}).pop(PARSED_BODY, None)

    def answer(body: bytes) -> bytes:
        max_rows = service.settings.max_batch_rows
        args = parsed if parsed is not None else parse_predict(content_type, body, max_rows)
        return answer_predict(service, name, args, version, intervals)

    return Response(await answer_by_size(request, answer), media_type="application/json")


@overload
def answer_predict(
    service: CalibrationService,
    name: str,
    args: PredictArgs,
    version: str | None,
    intervals: bool | None,
    *,
    cached_only: Literal[False] = False,
) -> bytes: ...
@overload
def answer_predict(
    service: CalibrationService,
    name: str,
    args: PredictArgs,
    version: str | None,
    intervals: bool | None,
    *,
    cached_only: Literal[True],
) -> bytes | None: ...
def answer_predict(
    service: CalibrationService,
    name: str,
    args: PredictArgs,
    version: str | None,
    intervals: bool | None,
    *,
    cached_only: bool = False,
) -> bytes | None:
    """The answer to a parsed predict request (``version`` and ``intervals`` from its
    query): checked against its query, predicted, written as JSON.

    The one predict path: the route runs it off the event loop (a body may hold millions of
    scores); the hot path (:mod:`app.api.fast_predict`) runs it inline for small bodies with
    ``cached_only``, and hands the request to the route when it gives None (with the body as
    parsed, :data:`~app.api.deps.PARSED_BODY`) or raises.
    """
    if args.version is not None and version is not None and args.version != version:
        raise invalid(("body", "version"), f"is {args.version!r} but the query says {version!r}")
    if args.intervals is not None and intervals is not None and args.intervals != intervals:
        flags = (str(flag).lower() for flag in (args.intervals, intervals))
        raise invalid(("body", "intervals"), "is {} but the query says {}".format(*flags))
    if version == "":  # as the body's version may not be
        raise invalid(("query", "version"), "must be a version number, 'latest' or an alias")
    given = args.version if args.version is not None else version
    selector = parse_selector(name, "latest" if given is None else given)
    asked = (
        ("body", "intervals") if args.intervals else ("query", "intervals") if intervals else None
    )
    prediction = service.serving.predict(
        name, selector, args.scores, intervals=asked, ids=args.ids, cached_only=cached_only
    )
    if prediction is None:
        return None
    answer: dict[str, Any] = {
        "name": name,
        "version": prediction.version,
        "probabilities": prediction.probabilities,
    }
    if prediction.intervals is not None:
        answer["intervals"] = prediction.intervals
    if prediction.logged is not None:
        answer["logged"] = prediction.logged
    return orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY)
