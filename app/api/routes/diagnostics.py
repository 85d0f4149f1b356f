"""Routes: reliability diagnostics of a version, as JSON or as a diagram."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from app.api.bodies.contracts import (
    BINS_TEXT,
    BOOTSTRAP_TEXT,
    CLASS_INDEX_TEXT,
    CURVE_TEXT,
    MAX_CLASS_INDEX,
    STRATEGY_TEXT,
    BinCount,
    ReportFields,
)
from app.api.bodies.labelled import BatchSource, read_batch
from app.api.bodies.media import parse_diagnostics
from app.api.deps import (
    NameParam,
    SelectorParam,
    ServiceDep,
    json_response,
    off_loop,
    parse_selector,
)
from app.api.documents import DiagnosticsOut
from app.api.openapi_docs import BATCH_OPTIONS_TEXT, DIAGNOSTICS_BODY, ERRORS, add_picture_route
from app.calibration import MAX_BINS, MAX_RESAMPLES, MIN_BINS, Report
from app.service.calibrators import CalibrationService
from app.service.diagnosis import (
    DEFAULT_REPORT,
    MEDIA_TYPES,
    Curve,
    ImageFormat,
    ReportOptions,
    Reports,
    Strategy,
)
from app.store import Selector

router = APIRouter(prefix="/v1", tags=["predictions"])

NBins = Annotated[BinCount, Query(description=BINS_TEXT)]
FixedBins = Annotated[int, Query(ge=MIN_BINS, le=MAX_BINS, description="Number of bins.")]
StrategyQuery = Annotated[Strategy, Query(description=STRATEGY_TEXT)]
ClassIndex = Annotated[int | None, Query(ge=0, le=MAX_CLASS_INDEX, description=CLASS_INDEX_TEXT)]
Resamples = Annotated[int, Query(ge=0, le=MAX_RESAMPLES, description=BOOTSTRAP_TEXT)]
CurveQuery = Annotated[Curve, Query(description=CURVE_TEXT)]
# The same options of a POST, None where not given (a JSON body's own fields win).
GivenBins = Annotated[BinCount | None, Query(description=BINS_TEXT)]
GivenStrategy = Annotated[Strategy | None, Query(description=STRATEGY_TEXT)]
GivenResamples = Annotated[int | None, Query(ge=0, le=MAX_RESAMPLES, description=BOOTSTRAP_TEXT)]
GivenCurve = Annotated[Curve | None, Query(description=CURVE_TEXT)]


def report_query(
    n_bins: NBins = DEFAULT_REPORT.n_bins,
    strategy: StrategyQuery = DEFAULT_REPORT.strategy,
    class_index: ClassIndex = DEFAULT_REPORT.class_index,
    bootstrap: Resamples = DEFAULT_REPORT.bootstrap,
    curve: CurveQuery = DEFAULT_REPORT.curve,
) -> ReportOptions:
    """The report a GET asks for, from its query parameters."""
    return ReportOptions(n_bins, strategy, class_index, bootstrap, curve)


ReportQuery = Annotated[ReportOptions, Depends(report_query)]
IMAGE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "JSON, or the diagram when Accept asks for image/png or image/svg+xml",
        "content": {"image/png": {}, "image/svg+xml": {}},
    }
}


def diagnostics_document(
    name: str,
    version: int | None,
    n_samples: int,
    calibrated: Report,
    raw: Report,
    query: ReportOptions,
) -> dict[str, Any]:
    """The diagnostics shape (:class:`DiagnosticsOut`) every reliability report answers in:
    a stored version's, a posted batch's, the logged traffic's. ``n_bins`` is the count
    used (``auto`` resolved)."""
    return {
        "name": name,
        "version": version,
        "n_bins": calibrated.bins.lower.size,
        "strategy": query.strategy,
        "class_index": query.class_index,
        "bootstrap": query.bootstrap,
        "n_samples": n_samples,
        "calibrated": calibrated.as_json(),
        "raw": raw.as_json(),
    }


def _diagnostics(reports: Reports, query: ReportOptions) -> Response:
    return json_response(
        diagnostics_document(
            reports.name,
            reports.version,
            reports.n_samples,
            reports.calibrated,
            reports.raw,
            query,
        )
    )


@router.get(
    "/calibrators/{name}/versions/{selector}/diagnostics",
    response_model=DiagnosticsOut,
    summary="Reliability data of a version (out of sample)",
    responses=ERRORS,
)
async def stored_diagnostics(
    name: NameParam,
    selector: SelectorParam,
    request: Request,
    service: ServiceDep,
    query: ReportQuery,
) -> Response:
    """Reliability bins and metrics of the version's cross-validated predictions on its
    fitting batch, next to those of the raw scores. Multiclass versions report the top label
    (confidence = row max, correct = arg max equals the label) unless `class_index` is set.
    Computed once per version and query, then kept."""
    found = parse_selector(name, selector)
    reports = await off_loop(request, service.diagnosis.stored, name, found, query)
    return _diagnostics(reports, query)


@router.post(
    "/calibrators/{name}/versions/{selector}/diagnostics",
    response_model=DiagnosticsOut,
    summary="Reliability data of a version on a fresh labelled batch",
    description="How the stored version does on today's traffic. Nothing is stored. With "
    "`Accept: image/png` or `image/svg+xml` the answer is the reliability diagram."
    + BATCH_OPTIONS_TEXT,
    openapi_extra=DIAGNOSTICS_BODY,
    responses={**ERRORS, **IMAGE_RESPONSES},
)
async def batch_diagnostics(
    name: NameParam,
    selector: SelectorParam,
    request: Request,
    service: ServiceDep,
    n_bins: GivenBins = None,
    strategy: GivenStrategy = None,
    class_index: ClassIndex = None,
    bootstrap: GivenResamples = None,
    curve: GivenCurve = None,
) -> Response:
    """How the stored version does on a labelled batch in any media type a fit takes; the
    report's options from the body's fields, the form or the query. Nothing is stored."""
    picture = wanted_image(request.headers.get("accept"))
    found = parse_selector(name, selector)
    query = {
        "n_bins": n_bins,
        "strategy": strategy,
        "class_index": class_index,
        "bootstrap": bootstrap,
        "curve": curve,
    }
    source = await read_batch(request, query, ReportFields)
    if picture is not None:
        image = await off_loop(request, _batch_picture, service, name, found, source, picture)
        return Response(image, media_type=MEDIA_TYPES[picture])
    reports, report = await off_loop(request, _batch_reports, service, name, found, source)
    return _diagnostics(reports, report)


def _batch_reports(
    service: CalibrationService, name: str, selector: Selector, source: BatchSource
) -> tuple[Reports, ReportOptions]:
    batch, report = parse_diagnostics(source, service.settings.max_batch_rows)
    return service.diagnosis.on_batch(name, selector, batch, report), report


def _batch_picture(
    service: CalibrationService,
    name: str,
    selector: Selector,
    source: BatchSource,
    image_format: ImageFormat,
) -> bytes:
    batch, report = parse_diagnostics(source, service.settings.max_batch_rows)
    return service.diagnosis.batch_picture(name, selector, batch, report, image_format)


def wanted_image(accept: str | None) -> ImageFormat | None:
    """The picture format an Accept header prefers over JSON, if any (RFC 9110 12.5.1):
    the highest ``q`` wins, the earlier entry on a tie, and ``q=0`` means "not this"."""
    best: tuple[float, ImageFormat | None] = (0.0, None)
    for part in (accept or "").split(","):
        media, *parameters = (piece.strip().lower() for piece in part.split(";"))
        quality = 1.0
        for parameter in parameters:
            key, _, value = parameter.partition("=")
            if key.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if not 0.0 < quality <= 1.0 or quality <= best[0]:
            continue
        if media in ("image/png", "image/*", "image/svg+xml"):
            best = (quality, "svg" if media == "image/svg+xml" else "png")
        elif media in ("application/json", "*/*", "application/*", "application/problem+json"):
            best = (quality, None)
    return best[1]


def _picture_route(image_format: ImageFormat) -> None:
    """``GET .../diagnostics.png`` and ``.svg``: one endpoint, registered once per format."""

    async def stored_diagram(
        name: NameParam,
        selector: SelectorParam,
        request: Request,
        service: ServiceDep,
        query: ReportQuery,
    ) -> Response:
        found = parse_selector(name, selector)
        image = await off_loop(
            request, service.diagnosis.stored_picture, name, found, query, image_format
        )
        return Response(image, media_type=MEDIA_TYPES[image_format])

    add_picture_route(
        router,
        "/calibrators/{name}/versions/{selector}/diagnostics",
        stored_diagram,
        image_format,
        summary="Reliability diagram of a version",
        description="The diagonal, the calibrated and raw curves with their Wilson intervals, "
        "and beneath them the histogram of predicted values (Predicting Good Probabilities, "
        "Figure 1). Same query parameters as the JSON diagnostics; cached per version and query.",
        what="The diagram",
    )


_picture_route("png")
_picture_route("svg")
