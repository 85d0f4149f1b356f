"""Request data validated by a pydantic model, its failures worded as the service words 422s."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from app.api.places import describe
from app.errors import FieldError, InvalidInput

M = TypeVar("M", bound=BaseModel)


def validated(
    model: type[M], data: dict[str, Any], source: str = "body", *, strict: bool | None = None
) -> M:
    """``data`` as ``model``, or one 422 naming every failure (located under ``source``);
    ``strict=False`` reads text as the type it spells (a query's ``"5"`` as 5)."""
    try:
        return model.model_validate(data, strict=strict)
    except ValidationError as exc:
        errors = [
            FieldError((source, *error["loc"]), sentence(model, error)) for error in exc.errors()
        ]
        detail = "; ".join(f"{describe(e.loc)} {e.msg}" for e in errors[:5])
        raise InvalidInput(detail, errors=errors) from None


def sentence(model: type[BaseModel], error: ErrorDetails) -> str:
    """A pydantic error as the service words its 422s."""
    kind, context, given = error["type"], error.get("ctx", {}), error.get("input")
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return f"is not a known field; expected {', '.join(model.model_fields)}"
    if kind in ("string_too_long", "too_long") and isinstance(given, str | list | dict):
        unit = "characters" if isinstance(given, str) else "entries"
        return f"has {len(given)} {unit}; the limit is {context.get('max_length')}"
    if kind == "string_too_short" or (kind == "too_short" and given == ""):
        return "must not be empty"
    if kind == "value_error":
        return str(context.get("error", error["msg"]))
    words = {
        "string_type": "must be a string",
        "int_type": "must be an integer",
        "int_parsing": "must be an integer",
        "bool_type": "must be true or false",
        "dict_type": "must be a JSON object",
        "list_type": "must be an array",
        "literal_error": f"must be {context.get('expected')}",
        "greater_than_equal": f"must be >= {context.get('ge')}",
        "less_than_equal": f"must be <= {context.get('le')}",
    }
    return words.get(kind, error["msg"])
