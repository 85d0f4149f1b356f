"""Query parameters more than one route reads: a threshold, and the rule that a parameter is
given once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Query, Request

from app.api.places import invalid
from app.service.estimates import MAX_COST


def threshold_query(description: str) -> Any:
    """A threshold in [0, 1] as a query parameter, described for its route."""
    return Query(ge=0.0, le=1.0, allow_inf_nan=False, description=description)


DecisionThreshold = Annotated[
    float | None,
    threshold_query(
        "Also answer `decisions`: 1 where the probability exceeds it (binary calibrators; "
        "the body's `threshold` may say it instead)."
    ),
]
"""Predict's threshold in its query."""
EstimateThreshold = Annotated[
    float | None,
    threshold_query(
        "Where the expected accuracy, precision, recall and F1 decide 1: a probability above "
        "it (binary calibrators; default 0.5; the body's `threshold` may say it instead)."
    ),
]
"""Estimate's threshold in its query."""
WindowThreshold = Annotated[
    float,
    threshold_query("Where `estimated` and `realized` decide 1: a probability above it."),
]
"""Monitoring's threshold."""
Cost = Annotated[
    float,
    Query(
        ge=0,
        le=MAX_COST,
        allow_inf_nan=False,
        description="What a false positive (`cost_fp`) or false negative (`cost_fn`) costs, or "
        "what a true positive (`benefit_tp`) or true negative (`benefit_tn`) earns, per case.",
    ),
]
"""A decision's cost or benefit in its query."""


def given_once(*names: str) -> Callable[[Request], None]:
    """A dependency that refuses each of ``names`` given more than once in the query (422):
    a repeated parameter is a mistake to report, not one value to pick."""

    def check(request: Request) -> None:
        for name in names:
            if len(request.query_params.getlist(name)) > 1:
                raise invalid(("query", name), "was given more than once; give it once")

    return check
