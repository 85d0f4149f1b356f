"""How the web view's routes answer: a page from what the service read, or an error page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from starlette.responses import Response

from app.errors import ServiceError

from .session import Sessions
from .templating import page


def sessions_of(request: Request) -> Sessions:
    """The sessions the authentication middleware checks (:mod:`app.api.security`)."""
    sessions: Sessions = request.app.state.ui_sessions
    return sessions


def signed_in(request: Request) -> bool:
    """Whether this request came with a session (keys are configured and one was entered)."""
    return request.scope.get("state", {}).get("api_key") is not None


async def answer(
    request: Request, template: str, build: Callable[[], Awaitable[dict[str, Any]]]
) -> Response:
    """``template`` with what ``build`` reads (its ``status`` the answer's, 200 without one),
    or the error page of what it raised."""
    try:
        context = await build()
    except ServiceError as exc:
        return error_page(request, exc)
    status = int(context.pop("status", 200))
    return page(template, {**context, "signed_in": signed_in(request)}, status=status)


def error_page(request: Request, error: ServiceError) -> Response:
    """An error as a page with a way back (a 499 is never read: a plain 503 page stands)."""
    status = error.status if 400 <= error.status <= 599 and error.status != 499 else 503
    headers = {}
    if error.retry_after_seconds is not None:
        headers["Retry-After"] = str(error.retry_after_seconds)
    context = {"status": status, "title": error.title, "detail": error.detail}
    return page(
        "error.html", {**context, "signed_in": signed_in(request)}, status=status, headers=headers
    )
