"""The fields the request bodies are built of: typed, bounded and documented once, for the
body models of :mod:`app.api.bodies.contracts` and the query parameters that take the same
options (bins, bootstrap, curve, selectors, tags)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
)

from app.api.bodies.validation import sentence
from app.api.documents import NAME_PATTERN
from app.api.places import invalid
from app.calibration import MAX_BINS, MIN_BINS

MAX_DESCRIPTION = 10_000

MAX_CLASS_INDEX = 100_000
BINS_TEXT = (
    "Number of bins, 2..100, or `auto`: the smallest k with k^3 >= the (effective) number of "
    "rows, clipped to 2..100 (the cube-root rule; Sun et al., NeurIPS 2023)."
)
BOOTSTRAP_TEXT = (
    "Bootstrap resamples behind the 95% intervals (0: no intervals). Seeded: the same request "
    "gives the same intervals."
)
CURVE_TEXT = (
    "What the diagram draws: `binned` (the bins' fractions with their Wilson intervals), "
    "`smooth` (the kernel-smoothed curve of the smooth ECE with its bootstrap band) or `both`. "
    "JSON answers hold both."
)


def _bin_count(value: object) -> int | Literal["auto"]:
    """``n_bins``: an integer in 2..100 (a query's text too) or ``"auto"``; one message for
    anything else, located at the field itself (a union's errors would name its members)."""
    if value == "auto":
        return "auto"
    digits = value.strip().lstrip("+-") if isinstance(value, str) else ""
    text = isinstance(value, str) and digits.isascii() and digits.isdigit() and len(digits) < 10
    whole = isinstance(value, float) and value.is_integer()  # 10.0 in JSON, as before
    if text or whole:
        value = int(value)  # type: ignore[call-overload]
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_BINS <= value <= MAX_BINS:
        raise ValueError(f"must be an integer in {MIN_BINS}..{MAX_BINS} or auto, not {value!r}")
    return value


BinCount = Annotated[
    int | Literal["auto"],
    PlainValidator(_bin_count),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": MIN_BINS, "maximum": MAX_BINS},
                {"type": "string", "enum": ["auto"]},
            ]
        }
    ),
]
STRATEGY_TEXT = "Equal widths or equal counts."
CLASS_INDEX_TEXT = "One class against the rest (default: top label)."
"""The options of a reliability report, the same in a query (GET) as in a body (POST)."""

_VECTOR = {"type": "array", "items": {"type": "number"}}
_MATRIX = {"type": "array", "items": _VECTOR}
Numbers = Annotated[Any, WithJsonSchema({"anyOf": [_VECTOR, _MATRIX]})]
"""Scores: a vector, or n x k for multiclass (converted and checked by the numpy path)."""
Labels = Annotated[Any, WithJsonSchema({"type": "array", "items": {"type": "integer"}})]
Weights = Annotated[Any, WithJsonSchema({"anyOf": [_VECTOR, {"type": "null"}]})]


def _boolean_as_class(value: object) -> object:
    return int(value) if isinstance(value, bool) else value


OutcomeLabel = Annotated[
    int,
    Field(ge=0),
    BeforeValidator(_boolean_as_class),
    WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 0}, {"type": "boolean"}]}),
]
"""An outcome's class index, or ``true``/``false`` as 1/0, as a batch's labels take them."""


def _no_nul(text: str) -> str:
    if "\x00" in text:
        raise ValueError("holds the character U+0000 (NUL), which no text may contain")
    return text


Text = Annotated[str, AfterValidator(_no_nul)]
# In the bounded texts below the lengths come before the NUL check: pydantic then checks them
# in its core, where after a Python validator a predict body with ids validates a third slower.
MAX_CLIENT_ID = 128
ClientId = Annotated[str, Field(min_length=1, max_length=MAX_CLIENT_ID), AfterValidator(_no_nul)]
"""A client's id of a prediction."""
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 1024
TagKey = Annotated[str, Field(min_length=1, max_length=MAX_TAG_KEY), AfterValidator(_no_nul)]


_NAME = re.compile(NAME_PATTERN)


def _selector(value: object) -> object:
    """A version number (1 or more), ``latest`` or an alias: what the path accepts."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("must be a version number, 'latest' or an alias")
    if isinstance(value, int) and value < 1:
        raise ValueError(f"must be a version number (1 or more), not {value}")
    if isinstance(value, str) and not _NAME.match(value):
        raise ValueError(f"must be a version number, 'latest' or an alias ({NAME_PATTERN})")
    return value


Selector = Annotated[int | str, BeforeValidator(_selector)]


def _tag_value(value: object, *, deletes: bool) -> object:
    if value is None and deletes:
        return None
    if not isinstance(value, str):
        raise ValueError("must be a string or null" if deletes else "must be a string")
    if len(value) > MAX_TAG_VALUE:
        raise ValueError(f"has {len(value)} characters; the limit is {MAX_TAG_VALUE} (too long)")
    return _no_nul(value)


TagValue = Annotated[str, BeforeValidator(lambda v: _tag_value(v, deletes=False))]
TagPatch = Annotated[str | None, BeforeValidator(lambda v: _tag_value(v, deletes=True))]


class _TagFilter(BaseModel):
    key: TagKey
    value: TagValue


def tag_filter(tag: str) -> tuple[str, str]:
    """``key:value`` as a (key, value) pair, the key and value held to the limits of a tag."""
    key, colon, value = tag.partition(":")
    if not colon:
        raise invalid(("query", "tag"), "must be key:value, e.g. team:risk")
    try:
        _TagFilter.model_validate({"key": key, "value": value})
    except ValidationError as exc:
        error = exc.errors()[0]
        part = error["loc"][0]
        raise invalid(("query", "tag"), f"{part} {sentence(_TagFilter, error)}") from None
    return key, value
