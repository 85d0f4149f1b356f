"""Routes: fit a version; read, describe and delete versions; list, read and delete
calibrators."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import Response

from app.api.bodies.contracts import FitOptions, PatchBody, TrafficRange
from app.api.bodies.fields import tag_filter
from app.api.bodies.labelled import BatchSource
from app.api.bodies.media import parse_fit
from app.api.deps import (
    Flag,
    NameParam,
    SelectorParam,
    ServiceDep,
    existing_version_number,
    in_worker,
    json_response,
    parse_selector,
    read_small_json,
)
from app.api.documents import CalibratorList, CalibratorOut, VersionOut
from app.api.idempotency import (
    content_fingerprint,
    fingerprint,
    holding,
    idempotency_key,
    replayed,
    settle,
)
from app.api.openapi_docs import ERRORS, FIT_BODY, FIT_DESCRIPTION, body_doc
from app.api.places import placing
from app.api.reading import read_batch
from app.service.fit_keys import Claim
from app.service.use_cases import CalibrationService
from app.service.views import VersionView

router = APIRouter(prefix="/v1", tags=["calibrators"])

Limit = Annotated[int, Query(ge=1, le=1000, description="Page size.")]
Offset = Annotated[int, Query(ge=0, le=2**62, description="Items to skip.")]


@router.post(
    "/calibrators/{name}/fit",
    status_code=201,
    response_model=VersionOut,
    summary="Fit a new version",
    description=FIT_DESCRIPTION,
    openapi_extra=FIT_BODY,
    responses={
        200: {
            "model": VersionOut,
            "description": "The version an Idempotency-Key's first request made",
            "headers": {
                "Location": {"schema": {"type": "string"}},
                "Idempotent-Replayed": {"schema": {"type": "string", "enum": ["true"]}},
            },
        },
        **ERRORS,
    },
)
async def fit(
    name: NameParam,
    request: Request,
    service: ServiceDep,
    method: Annotated[str | None, Query(description="Method, for a body that is not JSON.")] = None,
    params: Annotated[str | None, Query(description="Method parameters as JSON.")] = None,
    description: Annotated[str | None, Query(description="Free text.")] = None,
    tags: Annotated[str | None, Query(description="Tags as a JSON object.")] = None,
) -> Response:
    """Fit `method` on a labelled batch in any of its media types and store it as the next
    version of `name`, creating `name` on first use."""
    query = {"method": method, "params": params, "description": description, "tags": tags}
    key = idempotency_key(request)
    source = await read_batch(request, query, FitOptions)
    claim = None
    if key is not None:
        payload = await fingerprint(source)
        settled = await settle(request, service, name, key, payload, _content_of(request, source))
        if isinstance(settled, int):
            view = await replayed(service, name, key, settled)
            headers = {"Location": _location(name, settled), "Idempotent-Replayed": "true"}
            return json_response(VersionOut.of_view(view), 200, headers=headers)
        claim = settled
    generation = service.versions.generation(name)
    async with holding(service, claim):
        view = await in_worker(request, _fit, name, source, claim)
    # stored, maybe by a worker: this process serves it from now (a calibrator is rebuilt)
    await run_in_threadpool(service.versions.remember, view, generation)
    headers = {"Location": _location(name, view.record.version)}
    return json_response(VersionOut.of_view(view), 201, headers=headers)


def _content_of(request: Request, source: BatchSource) -> Callable[[], Awaitable[str]]:
    """The fingerprint of the request's batch as parsed, computed (in a worker: it parses the
    batch) the first time it is asked for."""
    known: list[str] = []

    async def content() -> str:
        if not known:
            known.append(await in_worker(request, _parsed_content, source))
        return known[0]

    return content


def _parsed_content(service: CalibrationService, source: BatchSource) -> str:
    return content_fingerprint(parse_fit(source, service.settings.max_batch_rows))


def _location(name: str, version: int) -> str:
    return f"/v1/calibrators/{name}/versions/{version}"


def _fit(
    service: CalibrationService, name: str, source: BatchSource, claim: Claim | None
) -> VersionView:
    args = parse_fit(source, service.settings.max_batch_rows)
    options = args.options
    if claim is not None:
        claim = replace(claim, content=content_fingerprint(args))
    with placing(args.places):
        if not isinstance(args.batch, TrafficRange):
            return service.versions.fit(
                name,
                args.batch,
                method=options.method,
                params=options.params,
                description=options.description,
                tags=options.tags,
                claim=claim,
            )
        wanted = args.batch
        return service.versions.fit_from_traffic(
            name,
            wanted.since,
            wanted.until,
            None if wanted.version is None else parse_selector(name, str(wanted.version)),
            method=options.method,
            params=options.params,
            description=options.description,
            tags=options.tags,
            claim=claim,
        )


@router.get(
    "/calibrators/{name}/versions/{selector}",
    response_model=VersionOut,
    summary="Get a version",
    responses=ERRORS,
)
async def get_version(name: NameParam, selector: SelectorParam, service: ServiceDep) -> Response:
    """One version with its fitted numbers, metrics and artifact checksum."""
    view = await run_in_threadpool(service.versions.get, name, parse_selector(name, selector))
    return json_response(VersionOut.of_view(view))


@router.get(
    "/calibrators", response_model=CalibratorList, summary="List calibrators", responses=ERRORS
)
async def list_calibrators(
    service: ServiceDep,
    limit: Limit = 100,
    offset: Offset = 0,
    tag: Annotated[
        str | None,
        Query(
            description="Only calibrators with a version tagged `key:value` (the first `:` "
            "ends the key).",
            examples=["team:risk"],
        ),
    ] = None,
) -> Response:
    """Every calibrator with its latest version, by name."""
    wanted = None if tag is None else tag_filter(tag)
    items, total = await run_in_threadpool(service.calibrators.list, limit, offset, wanted)
    return json_response(CalibratorList.of(items, total))


@router.get(
    "/calibrators/{name}",
    response_model=CalibratorOut,
    summary="Get a calibrator and its versions",
    responses=ERRORS,
)
async def get_calibrator(
    name: NameParam, service: ServiceDep, limit: Limit = 100, offset: Offset = 0
) -> Response:
    """The calibrator with its versions, newest first, paginated."""
    view = await run_in_threadpool(service.calibrators.get, name, limit, offset)
    return json_response(CalibratorOut.of_view(view))


@router.patch(
    "/calibrators/{name}/versions/{selector}",
    response_model=VersionOut,
    summary="Change a version's description and tags",
    openapi_extra=body_doc(PatchBody),
    responses=ERRORS,
)
async def patch_version(
    name: NameParam, selector: SelectorParam, request: Request, service: ServiceDep
) -> Response:
    """`description` replaces; `tags` merge, a null value deleting its key. The fitted
    numbers of a version never change."""
    data = await read_small_json(request, PatchBody)
    view = await run_in_threadpool(
        service.versions.update,
        name,
        parse_selector(name, selector),
        description=data.description,
        tags=data.tags,
    )
    return json_response(VersionOut.of_view(view))


@router.delete(
    "/calibrators/{name}/versions/{version}",
    status_code=204,
    summary="Delete a version",
    responses=ERRORS,
)
async def delete_version(
    name: NameParam,
    version: Annotated[int, Path(ge=1, description="Version number.")],
    service: ServiceDep,
    force: Annotated[
        Flag, Query(description="Also delete the aliases that point to this version.")
    ] = False,
) -> Response:
    """The version is no longer served; its number is never given out again. A version that
    an alias points to is 409 unless `force=true`."""
    version = existing_version_number(name, version)
    await run_in_threadpool(service.versions.delete, name, version, force=force)
    return Response(status_code=204)


@router.delete(
    "/calibrators/{name}", status_code=204, summary="Delete a calibrator", responses=ERRORS
)
async def delete_calibrator(name: NameParam, service: ServiceDep) -> Response:
    """All its versions go; fitting the name again continues the numbering."""
    await run_in_threadpool(service.calibrators.delete, name)
    return Response(status_code=204)
