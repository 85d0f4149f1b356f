"""Where the client put each field, and the errors raised below the API placed there.

Below :mod:`app.api` a failure names its field and index (``("scores", 17)``, ``("tags",)``);
only the HTTP layer knows whether a field came in the body, the query or a form, so it adds the
place: a route that parsed a body wraps the use case in :func:`placing` with the
:class:`Places` its parse found, and the problem handler places whatever is left by the
request's method (:func:`default_place`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from app.errors import FieldError, InvalidInput, describe_loc

PLACES = ("body", "query", "form", "path", "header")
"""Where in a request a field may be given."""
UNSAID = ("body", "query")
"""Places a detail leaves unsaid (``scores[17] is NaN``, ``n_bins must be ...``): where a field
is unless a form is named (``form.n_bins must be an integer``)."""

BODILESS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})


def default_place(method: str) -> str:
    """Where a request's fields are when nothing else is known: the query of a request without
    a body, else the body."""
    return "query" if method.upper() in BODILESS else "body"


@dataclass(frozen=True)
class Places:
    """The fields a request gave outside its default place (``given``: field to place)."""

    given: Mapping[str, str] = field(default_factory=dict)
    default: str = "body"

    def of(self, name: str | int | None) -> str:
        """The place of the field ``name`` (None: the request's default place)."""
        return self.given.get(name, self.default) if isinstance(name, str) else self.default

    def with_fields(self, place: str, *names: str) -> Places:
        """These places, and ``names`` given at ``place`` (a route's own query parameters)."""
        return Places({**self.given, **dict.fromkeys(names, place)}, self.default)


def describe(loc: Sequence[str | int]) -> str:
    """A located field as a detail names it: ``("body", "scores", 17)`` → ``scores[17]``."""
    return describe_loc([part for part in loc if part not in UNSAID]) or "body"


def invalid(loc: Sequence[str | int], msg: str) -> InvalidInput:
    """A 422 for a field the HTTP layer found at its place (``("query", "tags")``), its detail
    reading ``field[index] msg``."""
    return InvalidInput(f"{describe(loc)} {msg}", errors=(FieldError(tuple(loc), msg),))


def placed(exc: InvalidInput, place_of: Callable[[str | int | None], str]) -> InvalidInput:
    """``exc`` with every ``loc`` starting at its place in the request: a ``loc`` without one
    gets the place of its first field (``place_of(None)``: the request's default place, for a
    failure of the whole body)."""
    errors = tuple(
        error
        if error.loc and error.loc[0] in PLACES
        else FieldError((place_of(error.loc[0] if error.loc else None), *error.loc), error.msg)
        for error in exc.errors
    )
    return type(exc)(exc.detail, errors=errors)


@contextmanager
def placing(places: Places) -> Iterator[None]:
    """Run a use case; its :class:`~app.errors.InvalidInput` leaves with every field placed."""
    try:
        yield
    except InvalidInput as exc:
        raise placed(exc, places.of) from None
