"""What every response shape stands on: :class:`Document`, and the small shapes.

A document is a pydantic model that is both the OpenAPI schema of a response and its writer:
a route builds the model (validated, so a writer that drifts from its schema fails in the
tests, never silently) and :meth:`Document.content` gives the plain values orjson writes.
Only the big arrays of a prediction take a numpy path of their own (:mod:`app.api.fast_predict`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field


class Document(BaseModel):
    """A response shape: its fields are the schema, :meth:`content` is the JSON."""

    model_config = ConfigDict(extra="forbid")

    def content(self) -> dict[str, Any]:
        """The fields the writer set, in the schema's order, nested documents as dicts: a
        field left unset is absent from the JSON, as the schema's optional fields are."""
        fields_set = self.model_fields_set
        return {
            name: _plain(getattr(self, name))
            for name in type(self).model_fields
            if name in fields_set
        }


def _plain(value: Any) -> Any:
    if isinstance(value, Document):
        return value.content()
    if isinstance(value, list) and value and isinstance(value[0], Document):
        return [item.content() for item in value]
    if isinstance(value, dict) and value and isinstance(next(iter(value.values())), Document):
        return {key: item.content() for key, item in value.items()}
    return value


NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


Interval = Annotated[list[float], Field(min_length=2, max_length=2)]


class Problem(Document):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None


class Health(Document):
    status: str
