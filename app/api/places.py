"""Where the client put each field, and the errors raised below the API placed there.

Below :mod:`app.api` a failure names its field and index (``("scores", 17)``, ``("tags",)``);
only the HTTP layer knows whether a field came in the body, the query or a form, so it adds the
place: a route that parsed a body wraps the use case in :func:`placing` with the
:class:`Places` its parse found, and the problem handler places whatever is left by the
request's method (:func:`default_place`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from app.errors import InvalidInput

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


@contextmanager
def placing(places: Places) -> Iterator[None]:
    """Run a use case; its :class:`~app.errors.InvalidInput` leaves with every field placed."""
    try:
        yield
    except InvalidInput as exc:
        raise exc.placed(places.of) from None
