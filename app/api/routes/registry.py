"""Routes: aliases, tags and descriptions, comparing versions, exporting artifacts."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel
from starlette.responses import Response

from app.api.bodies.contracts import VERSIONS_TEXT, AliasBody, CompareFields, PatchBody
from app.api.bodies.labelled import BatchSource
from app.api.bodies.media import parse_compare
from app.api.bodies.payloads import (
    JSON_TYPES,
    parse_json_object,
    require_media_type,
)
from app.api.bodies.validation import validated
from app.api.deps import (
    SMALL_BODY_BYTES,
    AliasParam,
    NameParam,
    SelectorParam,
    ServiceDep,
    check_alias_name,
    existing_version_number,
    get_service,
    json_response,
    off_loop,
    parse_selector,
    read_body,
)
from app.api.documents import CompareOut, VersionOut
from app.api.openapi_docs import BATCH_OPTIONS_TEXT, COMPARE_BODY, ERRORS, body_doc
from app.api.places import placing
from app.api.reading import read_batch
from app.api.report_query import IMAGE_RESPONSES, GivenCurve, GivenResamples, wanted_image
from app.errors import invalid
from app.export import Dtype
from app.service.diagnosis import MEDIA_TYPES, ImageFormat
from app.service.use_cases import CalibrationService
from app.store import Selector

router = APIRouter(prefix="/v1", tags=["registry"])

M = TypeVar("M", bound=BaseModel)


async def _json_body(request: Request, contract: type[M]) -> M:
    require_media_type(request.headers.get("content-type"), JSON_TYPES)
    body = await read_body(
        request, min(SMALL_BODY_BYTES, get_service(request).settings.max_body_bytes)
    )
    return validated(contract, parse_json_object(body))


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
    data = await _json_body(request, AliasBody)
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
    data = await _json_body(request, PatchBody)
    view = await run_in_threadpool(
        service.versions.update,
        name,
        parse_selector(name, selector),
        description=data.description,
        tags=data.tags,
    )
    return json_response(VersionOut.of_view(view))


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
        image = await off_loop(request, _compare_picture, service, name, source, by, picture)
        return Response(image, media_type=MEDIA_TYPES[picture])
    result = await off_loop(request, _compare, service, name, source, by)
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


ONNX_MEDIA_TYPE = "application/onnx"

FormatQuery = Annotated[
    Literal["json", "onnx"],
    Query(
        description="`json`: the stored artifact document. `onnx`: an ONNX model of the "
        "version (standard `ai.onnx` operators, opset 17) mapping `scores` to `probabilities` "
        "(and `p0`, `p1` for venn_abers) as predict does; `X-Parity-Max-Abs-Diff` is its "
        "largest difference from predict, measured at export by the onnx package's "
        "reference evaluator on probes at every knot of the map, beside it, between knots, "
        "outside the fitted range, at +-1e6 and +-inf. A graph past 1e-12 is not served "
        "(501).",
        alias="format",
    ),
]
DtypeQuery = Annotated[
    Dtype | None,
    Query(
        description="With `format=onnx`: `float64` (default, DOUBLE tensors) or `float32`: "
        "FLOAT input and outputs, computed in DOUBLE inside, each output within 2^-25 "
        "(about 3.0e-8) of predict on the same float32 scores."
    ),
]


@router.get(
    "/calibrators/{name}/versions/{selector}/artifact",
    summary="Download a version's artifact, or its ONNX model",
    responses={
        **ERRORS,
        200: {
            "description": "The artifact document, or the ONNX model",
            "content": {"application/json": {}, ONNX_MEDIA_TYPE: {}},
            "headers": {
                "ETag": {"description": "The sha256 of the answer's bytes"},
                "X-Parity-Max-Abs-Diff": {
                    "description": "ONNX only: the largest |graph - predict| at export"
                },
            },
        },
        304: {"description": "Not modified (If-None-Match matched the ETag)"},
        501: {
            "description": "The version's ONNX graph would not answer as predict does (a "
            "defect of ours: nothing is served rather than a wrong model)",
            "content": ERRORS[422]["content"],
        },
    },
)
async def get_artifact(
    name: NameParam,
    selector: SelectorParam,
    request: Request,
    service: ServiceDep,
    answer_format: FormatQuery = "json",
    dtype: DtypeQuery = None,
) -> Response:
    """The stored artifact, byte for byte (its sha256 is the ETag), to archive or load
    offline; docs/api.md (Comparing and exporting) documents its format. With `format=onnx`, the
    version as an ONNX model for ONNX Runtime, Triton or KServe (its sha256 is the ETag), built once
    per version and dtype."""
    found = parse_selector(name, selector)
    if answer_format == "json":
        if dtype is not None:
            raise invalid(("query", "dtype"), "applies to format=onnx only")
        record, data = await run_in_threadpool(service.versions.artifact, name, found)
        return _cacheable(
            request,
            data,
            "application/json",
            record.artifact_sha256,
            {"Content-Disposition": f'attachment; filename="{name}-v{record.version}.json"'},
        )
    wanted: Dtype = dtype or "float64"
    models = service.onnx_models
    record, kept = await run_in_threadpool(models.kept, name, found, wanted)
    if kept is None:  # a build is CPU work: a job of the bounded pool
        record, export = await off_loop(request, models.model, name, found, wanted)
    else:
        export = kept
    suffix = "" if wanted == "float64" else "-float32"
    return _cacheable(
        request,
        export.model,
        ONNX_MEDIA_TYPE,
        export.sha256,
        {
            "Content-Disposition": f'attachment; filename="{name}-v{record.version}{suffix}.onnx"',
            "X-Parity-Max-Abs-Diff": repr(export.parity),
            "X-Parity-Probes": str(export.probes_checked),
        },
    )


def _cacheable(
    request: Request, data: bytes, media_type: str, sha256: str, headers: dict[str, str]
) -> Response:
    """``data`` with its sha256 as ETag, or 304 when If-None-Match holds that tag."""
    etag = f'"{sha256}"'
    headers = {"ETag": etag, "Cache-Control": "private, max-age=0, must-revalidate", **headers}
    wanted = request.headers.get("if-none-match", "")
    # RFC 9110 13.1.2: If-None-Match compares weakly, W/"x" matching "x"
    if etag in (tag.strip().removeprefix("W/") for tag in wanted.split(",")) or (
        wanted.strip() == "*"
    ):
        return Response(status_code=304, headers=headers)
    return Response(data, media_type=media_type, headers=headers)
