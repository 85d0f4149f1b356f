"""Read deadlines for HTTP/1.1 connections: slow headers and stalled bodies are cut off.

uvicorn bounds only the idle time *after* a response (``timeout_keep_alive``), and cancels
even that as soon as one byte arrives. A client that connects and sends nothing, or sends its
headers a byte at a time (Slowloris), or stops half-way through a body, holds a socket, a
file descriptor and, once routed, a task for as long as it likes; enough of them starve the
server. Two deadlines close that gap:

- :class:`HeaderTimeoutProtocol`, uvicorn's h11 protocol with a deadline: a connection that
  has not delivered complete request headers ``CALIBRATION_HEADER_TIMEOUT_SECONDS`` after it
  was opened, or after the previous response finished, is closed. The deadline is not pushed
  back by each byte, so trickling headers does not help. It also bounds what uvicorn's
  keep-alive leaves open: a body still arriving after an early answer (a 401, a 413).
  It is chosen explicitly (``http=``), never "auto": httptools, which "auto" prefers when it
  is installed, would run without it.
- :class:`BodyIdleTimeout`, a pure ASGI middleware: while the application waits for the
  body, a gap of ``CALIBRATION_BODY_TIMEOUT_SECONDS`` without a chunk answers 408
  problem+json and closes the connection. It wraps ``receive`` for every route and for the
  predict hot path (:mod:`app.api.fast_predict`), which read the body the same way.

The protocol reads its deadline from :func:`~app.settings.get_settings` in the process that
serves: uvicorn's worker processes import it by name and receive nothing else.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from app.api.problems import problem_response
from app.errors import RequestTimeout
from app.settings import get_settings

logger = logging.getLogger("app.http")


class HeaderTimeoutProtocol(H11Protocol):
    """h11 with a deadline for complete request headers (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout = get_settings().header_timeout_seconds
        self._header_deadline: asyncio.TimerHandle | None = None
        self._waiting_after: RequestResponseCycle | None = None  # the cycle before the awaited one

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not self._waiting_after:  # h11 parsed a request: its headers are in
            self._stop_waiting()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start a pipelined request already buffered
        if self.cycle is not None and self.cycle.response_complete:
            self._await_headers()

    def handle_websocket_upgrade(self, event: Any) -> None:
        self._stop_waiting()  # the transport now belongs to the websocket protocol
        super().handle_websocket_upgrade(event)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _await_headers(self) -> None:
        self._stop_waiting()
        if self.transport.is_closing():
            return
        self._waiting_after = self.cycle
        self._header_deadline = self.loop.call_later(self.header_timeout, self._headers_overdue)

    def _stop_waiting(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_overdue(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            logger.debug(
                "closing the connection from %s: no complete request headers within %g s",
                self.client,
                self.header_timeout,
            )
            self.transport.close()


def _has_body(scope: Scope) -> bool:
    for key, value in scope["headers"]:
        if key == b"content-length":
            return value.strip() not in (b"0", b"")
        if key == b"transfer-encoding":
            return True
    return False


class BodyIdleTimeout:
    """Answer 408 when the request body stalls for ``seconds`` (see the module docstring),
    and close the connection after any answer given before the body was read."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds
        self.detail = (
            f"the request body stalled: no part of it arrived for {seconds:g} s "
            "(the body idle timeout)"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_done = False
        stalled = False
        started = False

        async def receive_within() -> Message:
            nonlocal body_done, stalled
            if body_done:  # later calls wait for a disconnect, which may take any time
                return await receive()
            # A bare timer, not asyncio.timeout or wait_for: those cost 6-14 us a call, and
            # every predict on the hot path passes here.
            task = asyncio.current_task()
            assert task is not None  # an ASGI app runs in a task

            def expire() -> None:
                nonlocal stalled
                stalled = True
                task.cancel()

            timer = asyncio.get_running_loop().call_later(self.seconds, expire)
            try:
                message = await receive()
            except asyncio.CancelledError:
                if not stalled:
                    raise
                task.uncancel()
                raise RequestTimeout(self.detail) from None
            finally:
                timer.cancel()
            body_done = message["type"] != "http.request" or not message.get("more_body")
            return message

        async def send_unless_stalled(message: Message) -> None:
            nonlocal started
            if stalled and not started:
                return  # whatever the app makes of the timeout, the 408 below answers it
            if message["type"] == "http.response.start":
                started = True
                if not body_done and _has_body(scope):
                    # Answered before the body was read (401, 413, 415, 503): close, rather
                    # than read up to gigabytes that nothing wants on the event loop.
                    headers = [*message.get("headers", []), (b"connection", b"close")]
                    message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive_within, send_unless_stalled)
        except Exception:
            if not stalled or started:
                raise
        if stalled and not started:
            # Close: the rest of the body may still come, and nothing reads it any more.
            response = problem_response(
                RequestTimeout.status,
                self.detail,
                title=RequestTimeout.title,
                headers={"Connection": "close"},
            )
            await response(scope, receive, send)
