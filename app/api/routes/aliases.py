"""Routes: aliases, the movable names of versions (``production``, ``candidate``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import Response

from app.api.bodies.contracts import AliasBody
from app.api.deps import (
    AliasParam,
    NameParam,
    ServiceDep,
    check_alias_name,
    existing_version_number,
    json_response,
    read_small_json,
)
from app.api.documents import VersionOut
from app.api.openapi_docs import ERRORS, body_doc

router = APIRouter(prefix="/v1", tags=["registry"])


@router.put(
    "/calibrators/{name}/aliases/{alias}",
    response_model=VersionOut,
    summary="Point an alias at a version",
    openapi_extra=body_doc(AliasBody),
    responses=ERRORS,
)
async def put_alias(
    name: NameParam, alias: AliasParam, request: Request, service: ServiceDep
) -> Response:
    """Create the alias or move it, atomically; answers the version it now points to."""
    check_alias_name(alias)
    data = await read_small_json(request, AliasBody)
    version = existing_version_number(name, data.version)
    view = await run_in_threadpool(service.versions.set_alias, name, alias, version)
    return json_response(VersionOut.of_view(view))


@router.delete(
    "/calibrators/{name}/aliases/{alias}",
    status_code=204,
    summary="Delete an alias",
    responses=ERRORS,
)
async def delete_alias(name: NameParam, alias: AliasParam, service: ServiceDep) -> Response:
    """The alias no longer selects anything; its version stays."""
    await run_in_threadpool(service.versions.delete_alias, name, alias)
    return Response(status_code=204)
