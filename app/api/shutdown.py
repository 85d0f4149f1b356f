"""A request still running when a stop's grace period ends is answered 503 ``shutting-down``.

After SIGTERM uvicorn tells each connection to shut down, lets requests in flight run for
``CALIBRATION_SHUTDOWN_GRACE_SECONDS``, then cancels the tasks of those still running. A task
cancelled before its answer began would get uvicorn's own answer: a bare-text 500, which says
the service failed, when it was stopped. :class:`AnswerCancelled` answers it instead with the
problem a client can act on (:class:`~app.errors.ShuttingDown`: retry elsewhere, or here once
restarted), and the job behind it stops at its next checkpoint
(:meth:`app.service.work.WorkPool.supervise`).

Only a request whose connection was told to shut down is answered so: the server's protocol
marks it (:data:`STOPPING` in the request's state, :mod:`app.server.protocol`). Any other
cancellation goes on as it came.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import service_error_response
from app.errors import ShuttingDown

STOPPING = "server_stopping"
"""The key in a request's state (``scope["state"]``) that the server's protocol sets when
the request's connection is told to shut down."""

logger = logging.getLogger("app.http")


class AnswerCancelled:
    """Pure ASGI middleware: a request of a stopping server cancelled before its response
    started is answered :class:`~app.errors.ShuttingDown` (see the module docstring)."""

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
            if started or not scope.get("state", {}).get(STOPPING):
                raise  # answered in part (uvicorn closes the connection), or not a stop's
            # uvicorn cancels the task and does not wait for it: answered, it ends as any
            # request does, the cancellation taken back as asyncio asks of one suppressed.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            logger.warning(
                "answered 503 to %s %s: the server stopped", scope["method"], scope["path"]
            )
            error = ShuttingDown(
                "the server stopped before this request finished; any job it started was stopped"
            )
            await service_error_response(Request(scope, receive), error)(scope, receive, send)
