"""Routes: the Open Inference Protocol (KServe's V2 REST, Triton's HTTP API) beside ``/v1``.

A model is a calibrator and its version a number or an alias, as in ``/v1``; a model's one
input is ``scores`` and its outputs ``probabilities``, with ``p0`` and ``p1`` for
``venn_abers`` versions. Infer runs the very predict ``/v1`` runs
(:meth:`app.service.serving.Serving.predict`), so the probabilities are the same to
the bit, and ``parameters.ids`` logs the predictions as ``/v1``'s ``ids`` do. Tensors come and go
as JSON or with the binary tensor data extension (:mod:`app.api.bodies.tensors`). Errors are the
protocol's ``{"error": "..."}`` (:func:`app.api.problems.protocol_error`); the keys and
scopes are ``/v1``'s (infer reads, as predict does; with ids it logs, which needs ``log``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import Response

from app import __version__
from app.api.answers import Answer, answer_infer, parse_infer_body
from app.api.bodies.tensors import (
    HEADER_LENGTH,
    INPUT,
    InferRequest,
    is_compressed,
)
from app.api.deps import (
    PARSED_BODY,
    NameParam,
    ServiceDep,
    answer_by_size,
    json_response,
    parse_selector,
)
from app.api.documents.inference import (
    ModelMetadata,
    ModelReady,
    ServerLive,
    ServerMetadata,
    ServerReady,
    TensorMetadata,
)
from app.api.openapi_docs import ERRORS
from app.calibration import CAPABILITIES
from app.service.use_cases import CalibrationService

_ERROR = {
    "application/json": {
        "schema": {
            "type": "object",
            "properties": {"error": {"type": "string"}},
            "required": ["error"],
        }
    }
}
PROTOCOL_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "A request to fix; the error names field and index", "content": _ERROR}
}
"""The protocol's errors: ``{"error": "..."}``, 400 where ``/v1`` answers 422, and the
others as ``/v1`` documents them."""
PROTOCOL_ERRORS.update({s: {**ERRORS[s], "content": _ERROR} for s in (401, 404, 413, 415, 503)})

router = APIRouter(prefix="/v2", tags=["open inference protocol"], responses=PROTOCOL_ERRORS)

EXTENSIONS = ["binary_tensor_data"]
MAX_LISTED_VERSIONS = 1000
"""The most version numbers a model's metadata lists (the newest)."""


@router.get("", response_model=ServerMetadata, summary="Server metadata")
async def server_metadata() -> Response:
    """The server's name, version and protocol extensions."""
    return json_response(
        ServerMetadata(name="calibration-service", version=__version__, extensions=EXTENSIONS)
    )


@router.get("/health/live", response_model=ServerLive, summary="Server liveness")
async def live() -> Response:
    """200 while the process runs."""
    return json_response(ServerLive(live=True))


@router.get(
    "/health/ready",
    response_model=ServerReady,
    summary="Server readiness",
    responses={
        200: {"content": {"application/json": {"example": {"ready": True}}}},
        503: {
            "description": "The database does not answer (the protocol's readiness body, "
            "not an error)",
            "content": {"application/json": {"example": {"ready": False}}},
        },
    },
)
async def ready(service: ServiceDep) -> Response:
    """`{"ready": true}` (200) when the database answers, else `{"ready": false}` (503)."""
    answers = await run_in_threadpool(service.ready)
    return json_response(ServerReady(ready=answers), status_code=200 if answers else 503)


@router.get(
    "/models/{name}", response_model=ModelMetadata, summary="Model metadata (the latest version)"
)
async def model_metadata(name: NameParam, service: ServiceDep) -> Response:
    """The latest version's inputs and outputs, and the model's version numbers."""
    return json_response(await run_in_threadpool(_metadata, service, name, "latest"))


@router.get(
    "/models/{name}/versions/{version}",
    response_model=ModelMetadata,
    summary="Model metadata (one version)",
)
async def version_metadata(name: NameParam, version: str, service: ServiceDep) -> Response:
    """One version's inputs and outputs (a number or an alias)."""
    return json_response(await run_in_threadpool(_metadata, service, name, version))


@router.get(
    "/models/{name}/ready",
    response_model=ModelReady,
    summary="Model readiness (the latest version)",
)
async def model_ready(name: NameParam, service: ServiceDep) -> Response:
    """200 when the latest version can be served, 404 when there is none."""
    return await _ready(service, name, "latest")


@router.get(
    "/models/{name}/versions/{version}/ready",
    response_model=ModelReady,
    summary="Model readiness (one version)",
)
async def version_ready(name: NameParam, version: str, service: ServiceDep) -> Response:
    """200 when the version (a number or an alias) can be served, 404 when there is none."""
    return await _ready(service, name, version)


async def _ready(service: CalibrationService, name: str, version: str) -> Response:
    loaded = await run_in_threadpool(service.serving.resolve, name, parse_selector(name, version))
    return json_response(ModelReady(name=name, version=str(loaded.version), ready=True))


@router.post("/models/{name}/infer", summary="Infer (the latest version)")
async def infer(name: NameParam, request: Request, service: ServiceDep) -> Response:
    """Calibrate the ``scores`` tensor with the latest version."""
    return await _infer(request, service, name, "latest")


@router.post("/models/{name}/versions/{version}/infer", summary="Infer (one version)")
async def version_infer(
    name: NameParam, version: str, request: Request, service: ServiceDep
) -> Response:
    """Calibrate the ``scores`` tensor with one version (a number or an alias)."""
    return await _infer(request, service, name, version)


async def _infer(
    request: Request, service: CalibrationService, name: str, version: str
) -> Response:
    encoding = request.headers.get("content-encoding")
    header_length = request.headers.get(HEADER_LENGTH)
    parsed: InferRequest | None = request.scope.get("state", {}).pop(PARSED_BODY, None)

    def answer(body: bytes) -> Answer:
        if parsed is not None:
            return answer_infer(service, name, version, parsed, request.scope)
        parsed_body = parse_infer_body(service, body, encoding, header_length)
        return answer_infer(service, name, version, parsed_body, request.scope)

    inflates = is_compressed(encoding)
    content, headers, media_type = await answer_by_size(request, answer, inflates=inflates)
    return Response(content, media_type=media_type, headers=headers)


def _metadata(service: CalibrationService, name: str, version: str) -> ModelMetadata:
    """A version's model metadata: the input and outputs with their datatypes and shapes
    (-1: any number of rows)."""
    view = service.versions.get(name, parse_selector(name, version))
    record = view.record
    calibrator = service.calibrators.get(name, MAX_LISTED_VERSIONS, 0)
    shape = [-1] if record.n_classes == 2 else [-1, record.n_classes]
    outputs = ["probabilities"]
    if CAPABILITIES[record.method].intervals:
        outputs += ["p0", "p1"]
    return ModelMetadata(
        name=name,
        versions=[str(v) for v in sorted(v.version for v in calibrator.versions)],
        platform="calibration",
        version=str(record.version),
        method=record.method,
        inputs=[TensorMetadata(name=INPUT, datatype="FP64", shape=shape)],
        outputs=[TensorMetadata(name=o, datatype="FP64", shape=shape) for o in outputs],
    )
