"""Routes: a version corrected to new class priors, stored as the next version
(:mod:`app.service.adjustments`)."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import Response

from app.api.bodies.priors import AdjustBody
from app.api.deps import (
    NameParam,
    SelectorParam,
    ServiceDep,
    in_worker,
    json_response,
    parse_selector,
    read_small_json,
)
from app.api.documents import VersionOut
from app.api.openapi_docs import ERRORS, body_doc
from app.api.places import Places, placing
from app.service.adjustments import GivenPriors, TrafficPriors
from app.service.use_cases import CalibrationService
from app.service.views import VersionView
from app.store import Selector

router = APIRouter(prefix="/v1", tags=["decisions"])


@router.post(
    "/calibrators/{name}/versions/{selector}/adjust",
    status_code=201,
    response_model=VersionOut,
    summary="Correct a version to new class priors",
    openapi_extra=body_doc(AdjustBody),
    responses=ERRORS,
)
async def adjust(
    name: NameParam, selector: SelectorParam, request: Request, service: ServiceDep
) -> Response:
    """Label shift, corrected: the base rate has moved, p(score | class) has not. Stores the
    next version of `name`, whose probabilities are the selected version's corrected to the
    new priors by Bayes' rule, q_c ∝ p_c · prior_to_c / prior_from_c (Saerens et al. 2002),
    and answers 201 with it and its `Location`, as a fit does. `prior_from` is what the
    version computes under: its fitting batch's weighted class shares, or the priors it was
    itself adjusted to. Give `prior` (binary: the new P(y = 1)), or `priors` (one per class,
    summing to 1 within 1e-9), or `"prior": "traffic"` with an optional `since` and `until`
    (default: the last 30 days) to use the EM estimate of the version's logged predictions
    there. Nothing is refitted. The new version's `source` is `{"adjusted": {"parent_version",
    "prior_from", "prior_to", "estimated_from"}}`; its batch is the parent's fitting batch
    with the out-of-fold predictions adjusted and the weights times prior_to / prior_from of
    each row's class, and its metrics are measured on that. Venn-ABERS intervals are
    corrected too: binary, each end by the same increasing Bayes map; k classes, each
    class's p0 with the largest and p1 with the smallest ratio of the other classes, which
    bounds its corrected probability whatever their mix. Aliases stay where they were."""
    body = await read_small_json(request, AdjustBody)
    target = body.target()
    chosen = parse_selector(name, selector)
    generation = service.versions.generation(name)
    view = await in_worker(request, _adjust, name, chosen, target, body.description, body.tags)
    # stored, maybe by a worker: this process serves it from now (a calibrator is rebuilt)
    await run_in_threadpool(service.versions.remember, view, generation)
    headers = {"Location": f"/v1/calibrators/{name}/versions/{view.record.version}"}
    return json_response(VersionOut.of_view(view), 201, headers=headers)


def _adjust(
    service: CalibrationService,
    name: str,
    selector: Selector,
    target: GivenPriors | TrafficPriors,
    description: str,
    tags: Mapping[str, str],
) -> VersionView:
    with placing(Places({"selector": "path"})):
        return service.adjustments.adjust(
            name, selector, target, description=description, tags=tags
        )
