"""Routes: predict with a version, and its reliability diagnostics."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import Response

from app.batch import invalid
from app.pictures import MEDIA_TYPES, ImageFormat, batch_diagram, stored_diagram
from app.service import CalibrationService

from .deps import NameParam, SelectorParam, ServiceDep, json_response, parse_selector, read_body
from .requests import parse_diagnostics, parse_predict
from .responses import DIAGNOSTICS_BODY, ERRORS, PREDICT_BODY
from .schemas import DiagnosticsOut, PredictOut

router = APIRouter(prefix="/v1", tags=["predictions"])

NBins = Annotated[int, Query(ge=2, le=100, description="Number of bins.")]
StrategyQuery = Annotated[
    Literal["uniform", "quantile"], Query(description="Equal widths or equal counts.")
]
ClassIndex = Annotated[
    int | None,
    Query(ge=0, le=100_000, description="One class against the rest (default: top label)."),
]
IMAGE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "JSON, or the diagram when Accept asks for image/png or image/svg+xml",
        "content": {"image/png": {}, "image/svg+xml": {}},
    }
}


@router.post(
    "/calibrators/{name}/predict",
    response_model=PredictOut,
    summary="Calibrate scores",
    openapi_extra=PREDICT_BODY,
    responses=ERRORS,
)
async def predict(
    name: NameParam,
    request: Request,
    service: ServiceDep,
    version: Annotated[
        str | None, Query(description="A version number, `latest` or an alias.")
    ] = None,
    intervals: Annotated[
        bool | None,
        Query(description="Also answer each score's Venn-ABERS interval [p0, p1] (venn_abers)."),
    ] = None,
) -> Response:
    """Map raw scores to calibrated probabilities, in input order, with the version used;
    with `intervals`, a `venn_abers` version also answers each score's interval [p0, p1]."""
    args = parse_predict(request, await read_body(request))
    if args.version is not None and version is not None and args.version != version:
        raise invalid(("body", "version"), f"is {args.version!r} but the query says {version!r}")
    if args.intervals is not None and intervals is not None and args.intervals != intervals:
        body, query = (str(flag).lower() for flag in (args.intervals, intervals))
        raise invalid(("body", "intervals"), f"is {body} but the query says {query}")
    selector_text = args.version or version or "latest"
    selector = parse_selector(name, selector_text)
    asked = (
        ("body", "intervals") if args.intervals else ("query", "intervals") if intervals else None
    )
    prediction = await run_in_threadpool(
        service.predict, name, selector, args.scores, intervals=asked
    )
    answer: dict[str, Any] = {
        "name": name,
        "version": prediction.version,
        "probabilities": prediction.probabilities,
    }
    if prediction.intervals is not None:
        answer["intervals"] = prediction.intervals
    return json_response(answer)


def _diagnostics(
    name: str,
    version: int,
    n_bins: int,
    strategy: str,
    class_index: int | None,
    n: int,
    cal: Any,
    raw: Any,
) -> Response:
    return json_response(
        {
            "name": name,
            "version": version,
            "n_bins": n_bins,
            "strategy": strategy,
            "class_index": class_index,
            "n_samples": n,
            "calibrated": cal,
            "raw": raw,
        }
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
    service: ServiceDep,
    n_bins: NBins = 10,
    strategy: StrategyQuery = "uniform",
    class_index: ClassIndex = None,
) -> Response:
    """Reliability bins and metrics of the version's cross-validated predictions on its
    fitting batch, next to those of the raw scores. Multiclass versions report the top label
    (confidence = row max, correct = arg max equals the label) unless `class_index` is set."""
    record, cal, raw = await run_in_threadpool(
        service.diagnose_stored,
        name,
        parse_selector(name, selector),
        n_bins=n_bins,
        strategy=strategy,
        class_index=class_index,
    )
    return _diagnostics(
        name, record.version, n_bins, strategy, class_index, record.n_samples, cal, raw
    )


@router.post(
    "/calibrators/{name}/versions/{selector}/diagnostics",
    response_model=DiagnosticsOut,
    summary="Reliability data of a version on a fresh labelled batch",
    openapi_extra=DIAGNOSTICS_BODY,
    responses={**ERRORS, **IMAGE_RESPONSES},
)
async def batch_diagnostics(
    name: NameParam, selector: SelectorParam, request: Request, service: ServiceDep
) -> Response:
    """How the stored version does on today's traffic. Nothing is stored. With
    `Accept: image/png` or `image/svg+xml` the answer is the reliability diagram."""
    args = parse_diagnostics(request, await read_body(request), service.settings.max_batch_rows)
    strategy: Literal["uniform", "quantile"] = (
        "quantile" if args.strategy == "quantile" else "uniform"
    )
    picture = wanted_image(request.headers.get("accept"))
    if picture is not None:
        image = await run_in_threadpool(
            batch_diagram,
            service,
            name,
            parse_selector(name, selector),
            args.batch,
            n_bins=args.n_bins,
            strategy=strategy,
            class_index=args.class_index,
            image_format=picture,
        )
        return Response(image, media_type=MEDIA_TYPES[picture])
    version, cal, raw = await run_in_threadpool(
        service.diagnose_batch,
        name,
        parse_selector(name, selector),
        args.batch,
        n_bins=args.n_bins,
        strategy=strategy,
        class_index=args.class_index,
    )
    return _diagnostics(
        name, version, args.n_bins, strategy, args.class_index, args.batch.n_samples, cal, raw
    )


def wanted_image(accept: str | None) -> ImageFormat | None:
    """The picture format an Accept header asks for, if it prefers one over JSON."""
    for part in (accept or "").split(","):
        media = part.split(";", 1)[0].strip().lower()
        if media == "image/png":
            return "png"
        if media == "image/svg+xml":
            return "svg"
        if media in ("application/json", "*/*", "application/*"):
            return None
    return None


async def _stored_picture(
    image_format: ImageFormat,
    name: str,
    selector: str,
    request: Request,
    service: CalibrationService,
    n_bins: int,
    strategy: Literal["uniform", "quantile"],
    class_index: int | None,
) -> Response:
    image = await run_in_threadpool(
        stored_diagram,
        service,
        request.app.state.pictures,
        name,
        parse_selector(name, selector),
        n_bins=n_bins,
        strategy=strategy,
        class_index=class_index,
        image_format=image_format,
    )
    return Response(image, media_type=MEDIA_TYPES[image_format])


def _picture_route(image_format: ImageFormat) -> None:
    """``GET .../diagnostics.png`` and ``.svg``: one endpoint, registered once per format."""

    async def stored_diagram(
        name: NameParam,
        selector: SelectorParam,
        request: Request,
        service: ServiceDep,
        n_bins: NBins = 10,
        strategy: StrategyQuery = "uniform",
        class_index: ClassIndex = None,
    ) -> Response:
        return await _stored_picture(
            image_format, name, selector, request, service, n_bins, strategy, class_index
        )

    stored_diagram.__name__ = f"stored_diagram_{image_format}"
    router.add_api_route(
        f"/calibrators/{{name}}/versions/{{selector}}/diagnostics.{image_format}",
        stored_diagram,
        methods=["GET"],
        summary=f"Reliability diagram of a version ({image_format.upper()})",
        description="The diagonal, the calibrated and raw curves with their Wilson intervals, "
        "and beneath them the histogram of predicted values (Predicting Good Probabilities, "
        "Figure 1). Same query parameters as the JSON diagnostics; cached per version and query.",
        response_class=Response,
        responses={
            **ERRORS,
            200: {"content": {MEDIA_TYPES[image_format]: {}}, "description": "The diagram"},
        },
    )


_picture_route("png")
_picture_route("svg")
