"""Routes: what a version's probabilities of unlabelled scores say before their labels come
(expected performance and label shift), and the threshold its costs call for
(:mod:`app.service.estimates`)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from app.api.bodies.contracts import EstimateBody
from app.api.bodies.media import chosen_threshold, parse_estimate
from app.api.deps import (
    NameParam,
    SelectorParam,
    ServiceDep,
    answer_by_size,
    json_response,
    off_loop,
    parse_selector,
)
from app.api.documents import DecisionOut, EstimateOut
from app.api.openapi_docs import ERRORS, body_doc
from app.api.places import Places, placing
from app.api.query_params import Cost, EstimateThreshold, given_once
from app.calibration import DEFAULT_THRESHOLD, Costs
from app.errors import FieldError, InvalidInput

router = APIRouter(prefix="/v1", tags=["decisions"])


@router.post(
    "/calibrators/{name}/versions/{selector}/estimate",
    response_model=EstimateOut,
    summary="Estimate performance and priors of unlabelled scores",
    openapi_extra=body_doc(EstimateBody),
    responses=ERRORS,
    dependencies=[Depends(given_once("threshold"))],
)
async def estimate(
    name: NameParam,
    selector: SelectorParam,
    request: Request,
    service: ServiceDep,
    threshold: EstimateThreshold = None,
) -> Response:
    """The version's probabilities of `scores` and what they say if calibrated: expected
    accuracy, precision, recall, F1 and ROC AUC at `threshold` (default 0.5), expected log
    loss and Brier, each with its 95% sampling band (CBPE), and the batch's class prior by
    EM beside the version's training prior (label shift). Nothing is stored or logged."""
    content_type = request.headers.get("content-type")
    chosen = parse_selector(name, selector)

    def answer(body: bytes) -> EstimateOut:
        args = parse_estimate(content_type, body, service.settings.max_batch_rows)
        given = chosen_threshold(args.threshold, threshold, args.scores)
        cut = DEFAULT_THRESHOLD if given is None else given
        found = service.estimates.estimate(name, chosen, args.scores, cut)
        return EstimateOut(
            name=found.name,
            version=found.version,
            n_predictions=found.n_predictions,
            threshold=found.threshold,
            estimated=found.estimated,
            prior=found.prior,
        )

    return json_response(await answer_by_size(request, answer))


@router.get(
    "/calibrators/{name}/versions/{selector}/decision",
    response_model=DecisionOut,
    summary="The cost-optimal threshold and its cost",
    responses=ERRORS,
    dependencies=[Depends(given_once("cost_fp", "cost_fn", "benefit_tp", "benefit_tn"))],
)
async def decision(
    name: NameParam,
    selector: SelectorParam,
    request: Request,
    service: ServiceDep,
    cost_fp: Cost = 1.0,
    cost_fn: Cost = 1.0,
    benefit_tp: Cost = 0.0,
    benefit_tn: Cost = 0.0,
) -> Response:
    """For calibrated probabilities, deciding 1 above (c_FP + b_TN) / (c_FP + b_TN + c_FN +
    b_TP) minimises the expected cost (Elkan 2001). Answers that threshold and the mean cost
    per case of deciding at it on the version's out-of-fold predictions and their labels,
    with its 95% interval, beside deciding at 0.5 (`at_half`). Binary versions only."""
    if cost_fp + cost_fn + benefit_tp + benefit_tn == 0:  # each is >= 0 (the query's check)
        reason = "cost_fp, cost_fn, benefit_tp and benefit_tn are all 0: every decision is as good"
        raise InvalidInput(reason, errors=(FieldError(("query",), reason),))
    costs = Costs(cost_fp, cost_fn, benefit_tp, benefit_tn)
    chosen = parse_selector(name, selector)

    def decide() -> DecisionOut:
        with placing(Places({"selector": "path"}, default="query")):
            found = service.estimates.decision(name, chosen, costs)
        return DecisionOut(
            name=found.name,
            version=found.version,
            threshold=found.threshold,
            expected_cost=found.cost,
            intervals={"expected_cost": list(found.interval)},
            at_half={
                "threshold": DEFAULT_THRESHOLD,
                "expected_cost": found.cost_at_half,
                "intervals": {"expected_cost": found.interval_at_half},
            },
        )

    # a job of the bounded pool: it may read and decode a stored batch of millions of rows
    return json_response(await off_loop(request, decide))
