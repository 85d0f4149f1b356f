"""Routes: liveness, readiness and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import PlainTextResponse, Response

from app.api.deps import ServiceDep, json_response
from app.api.documents import Health
from app.api.mounting import root_of
from app.api.openapi_docs import ERRORS
from app.api.problems import problem_response
from app.errors import DatabaseUnavailable, ObjectStoreUnavailable
from app.observability import CONTENT_TYPE_LATEST, exposition

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Response:
    """200 while the process runs."""
    return json_response(Health(status="ok"))


@router.get("/readyz", response_model=Health, summary="Readiness", responses={503: ERRORS[503]})
async def readyz(request: Request, service: ServiceDep) -> Response:
    """200 when the database (and the object store, with ``CALIBRATION_BLOB_URL``) answers,
    else 503 with Retry-After naming which does not."""
    failing = await run_in_threadpool(service.unready)
    if not failing:
        return json_response(Health(status="ready"))
    error = DatabaseUnavailable if "database" in failing else ObjectStoreUnavailable
    return problem_response(
        503,
        f"the {' and the '.join(failing)} {'do' if len(failing) > 1 else 'does'} not answer",
        slug=error.slug,
        headers={"Retry-After": "5"},
        root_path=root_of(request.scope),
    )


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    summary="Prometheus metrics",
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
def metrics() -> Response:
    """Requests, latencies, fits, predictions and cache lookups, summed over every worker."""
    return Response(exposition(), media_type=CONTENT_TYPE_LATEST)
