"""Route: the monitoring rows as CSV (:mod:`app.api.monitoring_csv`), with the JSON
monitoring's query (:mod:`app.api.routes.traffic`)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from app.api.deps import NameParam, ServiceDep
from app.api.monitoring_csv import monitoring_csv
from app.api.monitoring_query import MonitoringQuery, monitored_rows
from app.api.openapi_docs import ERRORS
from app.api.query_params import given_once

router = APIRouter(prefix="/v1", tags=["traffic"])


@router.get(
    "/calibrators/{name}/monitoring.csv",
    response_class=Response,
    summary="Live calibration of the logged traffic as CSV",
    responses={**ERRORS, 200: {"content": {"text/csv": {}}, "description": "The rows"}},
    dependencies=[Depends(given_once("threshold"))],
)
async def monitoring_table(
    name: NameParam, request: Request, service: ServiceDep, query: MonitoringQuery
) -> Response:
    """The JSON monitoring's rows, one line per window and version, with the same query:
    its nested `estimated`, `realized` and `prior` as columns of their own (a band's ends as
    `_low` and `_high`; a k-class prior's entries joined with `;`); an empty cell is null."""
    rows = await monitored_rows(request, service, name, query)
    filename = f"{name}-monitoring-{query.window}.csv"
    return Response(
        monitoring_csv(rows),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
