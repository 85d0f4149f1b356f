"""Routes: liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from starlette.responses import Response

from .deps import ServiceDep, json_response
from .problems import problem_response
from .schemas import Health

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Response:
    """200 while the process runs."""
    return json_response({"status": "ok"})


@router.get("/readyz", response_model=Health, summary="Readiness")
async def readyz(service: ServiceDep) -> Response:
    """200 when the database answers, else 503 with Retry-After."""
    if await run_in_threadpool(service.ready):
        return json_response({"status": "ready"})
    return problem_response(503, "the database does not answer", headers={"Retry-After": "5"})
