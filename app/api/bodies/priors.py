"""The body of ``POST …/versions/{selector}/adjust``: the class priors a version is corrected
to, given (``prior``, ``priors``) or estimated from its logged traffic (``"prior": "traffic"``),
one model that validates and documents; and what it asks, as the service takes it."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    WithJsonSchema,
)

from app.api.bodies.contracts import Moment
from app.api.bodies.fields import MAX_DESCRIPTION, TagKey, TagValue, Text
from app.api.places import invalid
from app.calibration import MAX_CLASSES
from app.service.adjustments import GivenPriors, TrafficPriors
from app.store import MAX_TAGS

SUM_TOLERANCE = 1e-9
"""How far from 1 the priors sent may sum (then they are divided by their sum)."""

_SHARE = {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}


def _share(value: object) -> float:
    """A prior: a finite number strictly inside (0, 1) (an integer never is one)."""
    if isinstance(value, float) and math.isfinite(value) and 0.0 < value < 1.0:
        return value
    if isinstance(value, float):
        shown = repr(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        shown = str(value) if abs(value) < 10**18 else "a larger integer"
    else:
        shown = {str: "a string", bool: "a boolean", list: "an array", dict: "an object"}.get(
            type(value), "null"
        )
    raise ValueError(f"must be a number strictly between 0 and 1, not {shown}")


def _prior(value: object) -> float | Literal["traffic"]:
    """``prior``: P(y = 1) of a binary version, or ``"traffic"``."""
    if value == "traffic":
        return "traffic"
    try:
        return _share(value)
    except ValueError as exc:
        raise ValueError(f'{exc} (or "traffic")') from None


def _to_first_bad(value: object) -> object:
    """Priors cut after their first invalid entry, so that one error is reported and a long
    array of bad entries costs one scan, not one error each."""
    if not isinstance(value, list):
        return value
    for i, entry in enumerate(value):
        try:
            _share(entry)
        except ValueError:
            return value[: max(i + 1, 2)]
    return value


def _sums_to_one(priors: list[float]) -> list[float]:
    total = math.fsum(priors)
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(f"sum to {total!r}; they must sum to 1 (within {SUM_TOLERANCE:g})")
    return priors


Prior = Annotated[
    float | Literal["traffic"],
    PlainValidator(_prior),
    WithJsonSchema({"anyOf": [_SHARE, {"type": "string", "enum": ["traffic"]}]}),
]
Share = Annotated[float, PlainValidator(_share), WithJsonSchema(_SHARE)]
Priors = Annotated[
    list[Share],
    Field(min_length=2, max_length=MAX_CLASSES),
    BeforeValidator(_to_first_bad),
    AfterValidator(_sums_to_one),
]


class AdjustBody(BaseModel):
    """New class priors for a version: one of `prior` and `priors`."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {"prior": 0.08, "description": "base rate of the spring campaign"},
                {"priors": [0.5, 0.3, 0.2]},
                {"prior": "traffic", "since": "2026-11-01T00:00:00Z"},
            ]
        },
    )

    prior: Prior | None = Field(
        default=None,
        description='A binary version\'s new P(y = 1), strictly inside (0, 1); or `"traffic"`: '
        "the EM estimate of the version's logged predictions in [since, until).",
    )
    priors: Priors | None = Field(
        default=None,
        description="One new prior per class, each strictly inside (0, 1), summing to 1 "
        f"within {SUM_TOLERANCE:g} (then divided by their sum); k = 2 for a binary version.",
    )
    since: Moment | None = Field(
        default=None,
        description='With `"prior": "traffic"`: start (default: 30 days before `until`).',
    )
    until: Moment | None = Field(
        default=None,
        description='With `"prior": "traffic"`: end, exclusive (default: the end of today, UTC).',
    )
    description: Text = Field(default="", max_length=MAX_DESCRIPTION)
    tags: dict[TagKey, TagValue] = Field(default_factory=dict, max_length=MAX_TAGS)

    def target(self) -> GivenPriors | TrafficPriors:
        """What the body asks: priors given, or estimated from the traffic of a range (a 422
        naming the field for one of `prior` and `priors` both or neither given, or a range
        without `"prior": "traffic"`)."""
        if self.prior is not None and self.priors is not None:
            raise invalid(("body", "priors"), "is given with prior: send one of them")
        if self.prior == "traffic":
            return TrafficPriors(self.since, self.until)
        for field in ("since", "until"):
            if getattr(self, field) is not None:
                raise invalid(("body", field), 'is read only with "prior": "traffic"')
        if self.prior is not None:
            return GivenPriors((self.prior,), "prior")
        if self.priors is None:
            raise invalid(("body", "prior"), "is required (or priors, one per class)")
        return GivenPriors(tuple(self.priors), "priors")
