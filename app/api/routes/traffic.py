"""Routes of the traffic loop: outcomes of logged predictions, live monitoring (as JSON or as a
figure), and the diagnostics of the labelled traffic."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from app.api.bodies.contracts import OutcomesBody
from app.api.bodies.media import parse_outcomes
from app.api.deps import (
    Flag,
    NameParam,
    ServiceDep,
    in_worker,
    json_response,
    off_loop,
    read_job_body,
)
from app.api.documents import MonitoringOut, OutcomesOut, TrafficDiagnosticsOut
from app.api.monitoring_query import (
    MonitoringQuery,
    VersionFilter,
    WindowsQuery,
    monitored_rows,
    version_selector,
)
from app.api.openapi_docs import ERRORS, add_picture_route, body_doc
from app.api.query_params import given_once
from app.api.report_query import MEDIA_TYPES, ReportQuery
from app.service.reporting import ImageFormat, ReportOptions
from app.service.traffic.cases import (
    MonitoringFigure,
    TrafficDiagnostics,
    monitored_range,
)
from app.service.traffic.monitoring import Window
from app.service.use_cases import CalibrationService
from app.store import Selector

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
        Flag, Query(description="Replace labels that differ instead of answering 409.")
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
    return json_response(OutcomesOut.model_validate(counts))


@router.get(
    "/calibrators/{name}/monitoring",
    response_model=MonitoringOut,
    summary="Live calibration of the logged traffic",
    responses=ERRORS,
    dependencies=[Depends(given_once("threshold"))],
)
async def monitoring(
    name: NameParam, request: Request, service: ServiceDep, query: MonitoringQuery
) -> Response:
    """One row per window and version that answered in it: traffic, calibration on the
    labelled predictions (mean predicted against observed rate, log loss, Brier, ECE, and
    their 95% `intervals` from `bootstrap` draws of the Gaussian with the Poisson bootstrap's
    moments per bin, kept as sums so the cost does not grow with the traffic), and the raw
    scores' shift from the version's fitting batch (PSI, KS). Empty windows have nulls."""
    rows = await monitored_rows(request, service, name, query)
    return json_response(
        MonitoringOut.model_validate(
            {
                "name": name,
                "window": query.window,
                "since": query.since,
                "until": query.until,
                "windows": rows,
            }
        )
    )


def _picture_route(image_format: ImageFormat) -> None:
    """``GET .../monitoring.png`` and ``.svg``: one endpoint, registered once per format."""

    async def monitoring_picture(
        name: NameParam,
        request: Request,
        service: ServiceDep,
        query: WindowsQuery,
        _: Annotated[None, Depends(given_once("threshold"))],
    ) -> Response:
        drawn = await in_worker(
            request,
            _monitoring_figure,
            name,
            query.window,
            query.since,
            query.until,
            version_selector(name, query.version),
            image_format,
            n_bins=query.n_bins,
            threshold=query.threshold,
        )
        return Response(drawn.picture, media_type=MEDIA_TYPES[image_format])

    add_picture_route(
        router,
        "/calibrators/{name}/monitoring",
        monitoring_picture,
        image_format,
        summary="Live calibration of the logged traffic over time",
        description="The monitoring rows drawn on one time axis: ECE and log loss, mean "
        "predicted against observed rate, PSI and KS (a dashed line at PSI 0.25), and the "
        "traffic per window, a line per version; a window without a number is a gap. The "
        "JSON monitoring's query parameters but `bootstrap` (no intervals are drawn); drawn "
        "for each request (live data).",
        what="The figure",
    )


_picture_route("png")
_picture_route("svg")


@router.get(
    "/calibrators/{name}/monitoring/diagnostics",
    response_model=TrafficDiagnosticsOut,
    summary="Reliability data of the labelled traffic",
    responses={
        **ERRORS,
        404: {**ERRORS[404], "description": "Unknown calibrator or version; no labelled traffic"},
        409: {
            **ERRORS[409],
            "description": "The labelled traffic mixes binary and k-class versions, or k-class "
            "versions of different class counts",
        },
        413: {**ERRORS[413], "description": "More labelled traffic than a batch may hold"},
    },
)
async def monitoring_diagnostics(
    name: NameParam,
    request: Request,
    service: ServiceDep,
    query: ReportQuery,
    since: Annotated[
        datetime | None, Query(description="Start (ISO 8601; default: 30 days back).")
    ] = None,
    until: Annotated[
        datetime | None, Query(description="End, exclusive (default: the end of today, UTC).")
    ] = None,
    version: VersionFilter = None,
) -> Response:
    """The diagnostics of a version (reliability bins and metrics of the probabilities
    answered, next to those of the raw scores) on the labelled predictions logged in
    [since, until), by default the last 30 days (whole UTC days, today's included). k-class
    traffic has the top-label report, or `class_index`'s. No labelled traffic in the range is
    a 404; traffic that mixes binary and k-class versions, or k-class versions of different
    class counts, a 409 (choose one with `version`); more labelled traffic than a batch may
    hold, a 413."""
    start, end = monitored_range("1d", since, until)
    found = await in_worker(
        request, _traffic_diagnostics, name, start, end, version_selector(name, version), query
    )
    return json_response(
        TrafficDiagnosticsOut.of(
            name,
            found.version,
            found.n_labelled,
            (found.calibrated, found.raw),
            query,
            n_labelled=found.n_labelled,
            since=start,
            until=end,
        )
    )


def _monitoring_figure(
    service: CalibrationService,
    name: str,
    window: Window,
    since: datetime,
    until: datetime,
    selector: Selector | None,
    image_format: ImageFormat,
    *,
    n_bins: int,
    threshold: float,
) -> MonitoringFigure:
    return service.traffic.monitoring_figure(
        name, window, since, until, selector, image_format, n_bins=n_bins, threshold=threshold
    )


def _traffic_diagnostics(
    service: CalibrationService,
    name: str,
    since: datetime,
    until: datetime,
    selector: Selector | None,
    query: ReportOptions,
) -> TrafficDiagnostics:
    return service.traffic.diagnostics(name, since, until, selector, query)


def _record(
    service: CalibrationService, name: str, content_type: str | None, body: bytes, overwrite: bool
) -> dict[str, Any]:
    outcomes = parse_outcomes(content_type, body, service.settings.max_batch_rows)
    return asdict(service.traffic.record(name, outcomes, overwrite=overwrite))
