"""How the web view answers: a page from the data its use case read, or an error page, for
its own errors and for any other error of a request under ``/ui`` (an unknown method, a
missing stylesheet, an unexpected failure) that the API would answer as problem+json."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import orjson
from fastapi import FastAPI, Request
from starlette.responses import Response

from app.access.sessions import Sessions, is_ui_path
from app.api.mounting import root_of, route_path
from app.errors import ServiceError

from .templating import page

ExceptionHandler = Callable[[Request, Exception], Awaitable[Response]]


def sessions_of(request: Request) -> Sessions:
    """The sessions the authentication middleware checks (:mod:`app.api.security`)."""
    sessions: Sessions = request.app.state.ui_sessions
    return sessions


def signed_in(request: Request) -> bool:
    """Whether this request came with a session (keys are configured and one was entered)."""
    return request.scope.get("state", {}).get("api_key") is not None


def fields_of(data: object) -> dict[str, Any]:
    """A page's dataclass as a template's context: its fields, not copied."""
    if not is_dataclass(data) or isinstance(data, type):
        raise TypeError(f"a page's data is a dataclass instance, not {type(data).__name__}")
    return {f.name: getattr(data, f.name) for f in fields(data)}


async def render_page(
    request: Request, template: str, read_page: Callable[[], Awaitable[tuple[object, int]]]
) -> Response:
    """``template`` with the page's data ``read_page`` returns beside its status, or the
    error page of what it raised."""
    try:
        data, status = await read_page()
    except ServiceError as exc:
        return error_page(request, exc)
    context = {**fields_of(data), "signed_in": signed_in(request)}
    return page(template, context, status=status, root=root_of(request.scope))


@dataclass(frozen=True)
class ShownError:
    """An error as its page shows it: what its problem document says."""

    status: int
    title: str
    detail: str
    slug: str


def error_page(
    request: Request, error: ServiceError | ShownError, headers: Mapping[str, str] | None = None
) -> Response:
    """An error as a page with a link to its problem type's page and a way back (a 499 is
    never read: a plain 503 page stands)."""
    status = error.status if 400 <= error.status <= 599 and error.status != 499 else 503
    sent = dict(headers or {})
    if isinstance(error, ServiceError) and error.retry_after_seconds is not None:
        sent["Retry-After"] = str(error.retry_after_seconds)
    context = {"status": status, "problem": error, "signed_in": signed_in(request)}
    return page("error.html", context, status=status, headers=sent, root=root_of(request.scope))


def under_web_view(handler: ExceptionHandler) -> ExceptionHandler:
    """``handler`` (one of :mod:`app.api.problems`'), whose problem document becomes an
    error page for a request under ``/ui``; it still runs there, for its logging."""

    async def answer_error(request: Request, exc: Exception) -> Response:
        problem = await handler(request, exc)
        if not is_ui_path(route_path(request.scope)):
            return problem
        document = orjson.loads(bytes(problem.body))
        shown = ShownError(
            problem.status_code,
            str(document.get("title", "Error")),
            str(document.get("detail", "")),
            str(document.get("type", "")).rsplit("/", 1)[-1],
        )
        kept = {k: v for k, v in problem.headers.items() if k.lower() in ("allow", "retry-after")}
        return error_page(request, shown, headers=kept)

    return answer_error


def install_error_pages(app: FastAPI) -> None:
    """Make every exception handler installed so far answer requests under ``/ui`` with an
    error page (:func:`under_web_view`)."""
    for kind, handler in list(app.exception_handlers.items()):
        app.exception_handlers[kind] = under_web_view(handler)  # type: ignore[arg-type]
