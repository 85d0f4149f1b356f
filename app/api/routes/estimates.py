"""Route: what a version's probabilities of unlabelled scores say before their labels come
(expected performance and label shift: :mod:`app.service.estimates`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api.bodies.media import parse_estimate
from app.api.deps import (
    NameParam,
    SelectorParam,
    ServiceDep,
    answer_by_size,
    json_response,
    parse_selector,
)
from app.api.documents import EstimateOut
from app.api.openapi_docs import ERRORS

router = APIRouter(prefix="/v1", tags=["decisions"])

DEFAULT_THRESHOLD = 0.5


@router.post(
    "/calibrators/{name}/versions/{selector}/estimate",
    response_model=EstimateOut,
    summary="Estimate performance and priors of unlabelled scores",
    responses=ERRORS,
)
async def estimate(
    name: NameParam, selector: SelectorParam, request: Request, service: ServiceDep
) -> Response:
    """The version's probabilities of `scores` and what they say if calibrated: expected
    accuracy, precision, recall, F1 and ROC AUC at `threshold` (default 0.5), expected log
    loss and Brier, each with its 95% sampling band (CBPE), and the batch's class prior by
    EM beside the version's training prior (label shift). Nothing is stored or logged."""
    content_type = request.headers.get("content-type")
    chosen = parse_selector(name, selector)

    def answer(body: bytes) -> EstimateOut:
        args = parse_estimate(content_type, body, service.settings.max_batch_rows)
        threshold = DEFAULT_THRESHOLD if args.threshold is None else args.threshold
        found = service.estimates.estimate(name, chosen, args.scores, threshold)
        return EstimateOut(
            name=found.name,
            version=found.version,
            n_predictions=found.n_predictions,
            threshold=found.threshold,
            estimated=found.estimated,
            prior=found.prior,
        )

    return json_response(await answer_by_size(request, answer))
