"""Route: a version's artifact, as the stored JSON document or as an ONNX model."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import Response

from app import export
from app.api.deps import (
    NameParam,
    SelectorParam,
    ServiceDep,
    in_worker,
    parse_selector,
)
from app.api.openapi_docs import ERRORS
from app.api.places import invalid
from app.export import Dtype
from app.service.use_cases import CalibrationService
from app.store import VersionRecord

router = APIRouter(prefix="/v1", tags=["registry"])


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
    if kept is None:  # a build is CPU work: a job, built on the number just read
        record, built = await in_worker(request, _model, name, record.version, wanted)
        models.keep(record, wanted, built)
    else:
        built = kept
    suffix = "" if wanted == "float64" else "-float32"
    return _cacheable(
        request,
        built.model,
        ONNX_MEDIA_TYPE,
        built.sha256,
        {
            "Content-Disposition": f'attachment; filename="{name}-v{record.version}{suffix}.onnx"',
            "X-Parity-Max-Abs-Diff": repr(built.parity),
            "X-Parity-Probes": str(built.probes_checked),
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


def _model(
    service: CalibrationService, name: str, version: int, dtype: Dtype
) -> tuple[VersionRecord, export.OnnxExport]:
    return service.onnx_models.model(name, version, dtype)
