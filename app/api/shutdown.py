"""A request still running when a stop's grace period ends is answered 503 ``shutting-down``.

After SIGTERM uvicorn lets requests in flight run for ``CALIBRATION_SHUTDOWN_GRACE_SECONDS``,
then cancels the tasks of those still running. A task cancelled before its answer began would
get uvicorn's own answer: a bare-text 500, which says the service failed, when it was stopped.
:class:`AnswerCancelled` answers it instead with the problem a client can act on
(:class:`~app.errors.ShuttingDown`: retry elsewhere, or here once restarted), and the job
behind it stops at its next checkpoint (:meth:`app.service.work.WorkPool.supervise`).
"""

from __future__ import annotations

import asyncio
import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import error_response
from app.errors import ShuttingDown

logger = logging.getLogger("app.http")


class AnswerCancelled:
    """Pure ASGI middleware: a request cancelled before its response started is answered
    :class:`~app.errors.ShuttingDown` (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except asyncio.CancelledError:
            if started:  # answered in part: uvicorn closes the connection
                raise
            # Only uvicorn cancels a request's task, when the grace period of a stop ends, and
            # nothing awaits the task after that: answered, it may end as any request does.
            # Its end is logged here, once, rather than as uvicorn's "Exception in ASGI
            # application" with a traceback.
            logger.warning(
                "answered 503 to %s %s: the server stopped", scope["method"], scope["path"]
            )
            error = ShuttingDown(
                "the server stopped before this request finished; its job was stopped"
            )
            response = error_response(
                scope["path"],
                error.status,
                str(error),
                slug=error.slug,
                title=error.title,
                headers={"Retry-After": str(error.retry_after_seconds), "Connection": "close"},
                root_path=scope.get("root_path", ""),
            )
            await response(scope, receive, send)
