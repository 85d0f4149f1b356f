"""Routes: reliability diagnostics of a version, as JSON or as a diagram."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import Response

from app.api.bodies.contracts import (
    ReportFields,
)
from app.api.bodies.labelled import BatchSource
from app.api.bodies.media import parse_diagnostics
from app.api.deps import (
    NameParam,
    SelectorParam,
    ServiceDep,
    client_gone,
    in_worker,
    json_response,
    parse_selector,
    shared_in_worker,
)
from app.api.documents import DiagnosticsOut
from app.api.openapi_docs import BATCH_OPTIONS_TEXT, DIAGNOSTICS_BODY, ERRORS, add_picture_route
from app.api.places import placing
from app.api.reading import read_batch
from app.api.report_query import (
    IMAGE_RESPONSES,
    MEDIA_TYPES,
    ClassIndex,
    GivenBins,
    GivenCurve,
    GivenResamples,
    GivenStrategy,
    ReportQuery,
    wanted_image,
)
from app.service.diagnosis import Located, Reports
from app.service.inflight import Gone
from app.service.reporting import BinFreeParts, ImageFormat, ReportOptions
from app.service.use_cases import CalibrationService
from app.store import Selector

router = APIRouter(prefix="/v1", tags=["predictions"])


def _diagnostics(reports: Reports, query: ReportOptions) -> Response:
    return json_response(
        DiagnosticsOut.of(
            reports.name,
            reports.version,
            reports.n_samples,
            (reports.calibrated, reports.raw),
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
    Computed once per version and query, then kept; another `n_bins` or `strategy` reuses
    all that the bins do not change."""
    diagnosis = service.diagnosis
    located = await run_in_threadpool(diagnosis.locate, name, parse_selector(name, selector))
    return _diagnostics(await _stored_reports(request, service, name, located, query), query)


async def _stored_reports(
    request: Request, service: CalibrationService, name: str, located: Located, query: ReportOptions
) -> Reports:
    """The reports of the ``located`` version for ``query``: kept, else computed in a worker,
    from the parts another ``n_bins`` or ``strategy`` of its class and resamples shares with
    it where :meth:`~app.service.diagnosis.Diagnosis.shares_bin_free`. Then the first request
    for them computes its reports whole, and those for other bins that come meanwhile wait for
    it (and fail as it fails) and then bin theirs: a dashboard's eight bin counts of a
    6 x 10^6-row version cost one report and seven binnings, not eight reports."""
    diagnosis, version = service.diagnosis, located.version
    key = diagnosis.key(name, version, query)
    shared = diagnosis.shares_bin_free(located, query)
    if (
        shared
        and diagnosis.reports.get(key) is None
        and not diagnosis.bin_free(name, version, query)
    ):

        async def whole(gone: Gone) -> None:
            answer = await service.work.run_job(
                gone, service, _stored, 0, name, version, query, None
            )
            diagnosis.remember(located, name, query, answer)

        first = diagnosis.bin_free_key(name, version, query)
        await service.work.in_flight.run(first, lambda: client_gone(request), whole)
    known = diagnosis.bin_free(name, version, query) if shared else None
    reports = await shared_in_worker(
        request, diagnosis.reports, key, _stored, name, version, query, known
    )
    if shared and known is None:  # its parts were not kept, or no longer
        diagnosis.remember(located, name, query, reports)
    return reports


def _stored(
    service: CalibrationService,
    name: str,
    version: int,
    query: ReportOptions,
    known: BinFreeParts | None,
) -> Reports:
    return service.diagnosis.stored(name, version, query, known)


def _stored_picture(
    service: CalibrationService,
    name: str,
    version: int,
    query: ReportOptions,
    image_format: ImageFormat,
    known: BinFreeParts | None,
) -> bytes:
    return service.diagnosis.stored_picture(name, version, query, image_format, known)


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
        image = await in_worker(request, _batch_picture, name, found, source, picture)
        return Response(image, media_type=MEDIA_TYPES[picture])
    reports, report = await in_worker(request, _batch_reports, name, found, source)
    return _diagnostics(reports, report)


def _batch_reports(
    service: CalibrationService, name: str, selector: Selector, source: BatchSource
) -> tuple[Reports, ReportOptions]:
    batch, report, places = parse_diagnostics(source, service.settings.max_batch_rows)
    with placing(places):
        return service.diagnosis.on_batch(name, selector, batch, report), report


def _batch_picture(
    service: CalibrationService,
    name: str,
    selector: Selector,
    source: BatchSource,
    image_format: ImageFormat,
) -> bytes:
    batch, report, places = parse_diagnostics(source, service.settings.max_batch_rows)
    with placing(places):
        return service.diagnosis.batch_picture(name, selector, batch, report, image_format)


def _picture_route(image_format: ImageFormat) -> None:
    """``GET .../diagnostics.png`` and ``.svg``: one endpoint, registered once per format."""

    async def stored_diagram(
        name: NameParam,
        selector: SelectorParam,
        request: Request,
        service: ServiceDep,
        query: ReportQuery,
    ) -> Response:
        diagnosis = service.diagnosis
        located = await run_in_threadpool(diagnosis.locate, name, parse_selector(name, selector))
        version = located.version
        key = diagnosis.key(name, version, query, image_format)
        # what the JSON's reports of other bins left, if kept (a picture waits for none)
        kept = diagnosis.bin_free(name, version, query)
        known = kept if diagnosis.shares_bin_free(located, query) else None
        image = await shared_in_worker(
            request,
            diagnosis.pictures,
            key,
            _stored_picture,
            name,
            version,
            query,
            image_format,
            known,
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
