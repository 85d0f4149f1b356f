"""Route: compare versions on a fresh labelled batch (nothing is stored)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from app.api.bodies.contracts import VERSIONS_TEXT, CompareFields
from app.api.bodies.labelled import BatchSource
from app.api.bodies.media import parse_compare
from app.api.deps import (
    NameParam,
    ServiceDep,
    in_worker,
    json_response,
    parse_selector,
)
from app.api.documents import CompareOut
from app.api.openapi_docs import BATCH_OPTIONS_TEXT, COMPARE_BODY, ERRORS
from app.api.places import placing
from app.api.reading import read_batch
from app.api.report_query import (
    IMAGE_RESPONSES,
    MEDIA_TYPES,
    GivenCurve,
    GivenResamples,
    wanted_image,
)
from app.service.reporting import ImageFormat
from app.service.use_cases import CalibrationService
from app.store import Selector

router = APIRouter(prefix="/v1", tags=["registry"])


@router.post(
    "/calibrators/{name}/compare",
    response_model=CompareOut,
    summary="Compare versions on a labelled batch",
    description="Every selected version (default: all, newest first, at most 50) predicts the "
    "batch; answers their metrics with 95% intervals, best first, with each metric's gap to "
    "the best, and the paired bootstrap interval of the gap in the ranking metric "
    "(`difference`: the same resamples for every version) and whether it is `significant` "
    "(the interval excludes 0): promote a version only on a significant improvement. Nothing "
    "is stored. With `Accept: image/png` or `image/svg+xml` the answer is a picture: the "
    "versions' reliability curves on the batch, overlaid, best first (`curve`)."
    + BATCH_OPTIONS_TEXT,
    openapi_extra=COMPARE_BODY,
    responses={**ERRORS, **IMAGE_RESPONSES},
)
async def compare(
    name: NameParam,
    request: Request,
    service: ServiceDep,
    by: Annotated[
        str, Query(description="Metric to rank by: log_loss, brier, ece, auc or accuracy.")
    ] = "log_loss",
    versions: Annotated[
        list[str] | None,
        Query(
            description=f"{VERSIONS_TEXT} One selector a parameter, repeated: "
            "`?versions=1&versions=production`. A JSON body's `versions` field wins.",
        ),
    ] = None,
    bootstrap: GivenResamples = None,
    curve: GivenCurve = None,
) -> Response:
    """Rank the selected versions on a labelled batch in any media type a fit takes, the
    selectors from the body's field, the form or the query. Nothing is stored."""
    picture = wanted_image(request.headers.get("accept"))
    source = await read_batch(
        request, {"versions": versions, "bootstrap": bootstrap, "curve": curve}, CompareFields
    )
    if picture is not None:
        image = await in_worker(request, _compare_picture, name, source, by, picture)
        return Response(image, media_type=MEDIA_TYPES[picture])
    result = await in_worker(request, _compare, name, source, by)
    return json_response(CompareOut.model_validate(result))


def _compare(
    service: CalibrationService, name: str, source: BatchSource, by: str
) -> dict[str, Any]:
    batch, given, places = parse_compare(source, service.settings.max_batch_rows)
    selectors = _selectors(name, given)
    with placing(places.with_fields("query", "by")):
        return service.comparison.compare(name, batch, selectors, by=by, resamples=given.bootstrap)


def _compare_picture(
    service: CalibrationService,
    name: str,
    source: BatchSource,
    by: str,
    image_format: ImageFormat,
) -> bytes:
    batch, given, places = parse_compare(source, service.settings.max_batch_rows)
    with placing(places.with_fields("query", "by")):
        return service.comparison.compare_picture(
            name,
            batch,
            _selectors(name, given),
            by=by,
            image_format=image_format,
            curve=given.curve,
            resamples=given.bootstrap,
        )


def _selectors(name: str, given: CompareFields) -> list[Selector] | None:
    versions = given.versions
    return None if versions is None else [parse_selector(name, str(s)) for s in versions]
