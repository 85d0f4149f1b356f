"""Query parameters more than one route reads: a threshold, and the rule that a parameter is
given once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Query, Request

from app.api.places import invalid

Threshold = Annotated[
    float | None,
    Query(
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="Also answer `decisions`: 1 where the probability exceeds it (binary "
        "calibrators; the body's `threshold` may say it instead).",
    ),
]
"""A threshold in a query, as a predict or estimate body may give it."""


def given_once(*names: str) -> Callable[[Request], None]:
    """A dependency that refuses each of ``names`` given more than once in the query (422):
    a repeated parameter is a mistake to report, not one value to pick."""

    def check(request: Request) -> None:
        for name in names:
            if len(request.query_params.getlist(name)) > 1:
                raise invalid(("query", name), "was given more than once; give it once")

    return check
