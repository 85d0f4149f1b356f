"""Read deadlines for HTTP/1.1 connections: slow headers and stalled bodies are cut off.

uvicorn bounds only the idle time *after* a response (``timeout_keep_alive``), and cancels
even that as soon as one byte arrives. A client that connects and sends nothing, or sends its
headers a byte at a time (Slowloris), or stops half-way through a body, holds a socket, a
file descriptor and, once routed, a task for as long as it likes; enough of them starve the
server. :class:`DeadlineProtocol`, uvicorn's httptools protocol with two deadlines, closes that
gap where nginx does (``client_header_timeout``, ``client_body_timeout``):

- **Headers.** A connection that has not delivered complete request headers
  ``CALIBRATION_HEADER_TIMEOUT_SECONDS`` after it was opened, or after the previous response
  finished, is closed. The deadline is not pushed back by each byte, so trickling headers
  does not help.
- **Header size.** Request headers over :data:`MAX_HEADER_BYTES` are answered 431 and the
  connection is closed (httptools itself sets no limit).
- **Body.** A body that sends nothing for ``CALIBRATION_BODY_TIMEOUT_SECONDS`` is answered
  408 problem+json with ``Connection: close``, and the connection is closed. Every chunk
  restarts the clock, and so does a pause that is ours (uvicorn stops reading while the
  application has not taken the chunks already buffered, or while a pipelined request waits
  for those before it). The application sees the client leave;
  :func:`app.api.deps.read_body` finds :data:`ANSWERED` in the request's state and logs
  the request as the 408 it was.
- **Early answers.** An answer given before the body was read (401, 413, 415, 503) closes
  the connection once it is sent, as uvicorn's own shutdown does, rather than read up to
  gigabytes that nothing wants on the event loop.

The deadlines live in the protocol, not in an ASGI middleware, so a request whose body came
with its headers (every small predict) pays nothing for them: a middleware wrapping
``receive`` and ``send`` cost ~7 us of a ~40 us predict. The protocol builds on httptools,
which ``uvicorn[standard]`` installs: uvicorn's pure-Python h11 protocol spends twice the CPU
on a one-score predict (131 us against 62 us per request, measured under wrk).

The protocol is chosen explicitly (``http=``), never "auto", which would run without it. It
reads its deadlines from :func:`~app.settings.get_settings` in the process that serves:
uvicorn's worker processes import it by name and receive nothing else.
"""

from __future__ import annotations

import asyncio
import logging
from http import HTTPStatus
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from app.api.problems import problem_response
from app.errors import PayloadTooLarge, RequestTimeout, ServiceError
from app.settings import get_settings

logger = logging.getLogger("app.http")

ANSWERED = "answered_by_protocol"
"""The request-state key holding the status the protocol answered (408, 413) while the
application was still reading the body."""

MAX_HEADER_BYTES = 64 * 1024
"""The most a request line and its headers may take before they are routed: twice nginx's
default (4 buffers of 8 KiB), room for long bearer tokens, a bound on what one connection
holds while it has not yet said what it wants."""

_PAUSED_RECHECK_SECONDS = 0.1
"""While uvicorn itself has stopped reading, how often the body deadline looks again."""


class DeadlineProtocol(HttpToolsProtocol):
    """httptools with deadlines for request headers and bodies (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = get_settings()
        self.header_timeout = settings.header_timeout_seconds
        self.body_timeout = settings.body_timeout_seconds
        self._header_deadline: asyncio.TimerHandle | None = None
        self._waiting_after: RequestResponseCycle | None = None  # the cycle before the awaited one
        self._in_headers = False  # the parser is inside a request's line and headers
        self._header_bytes = 0  # received since the wait for headers began
        self._header_tail = b""  # the last bytes of them, where a blank line may begin
        self._body_deadline: asyncio.TimerHandle | None = None
        self._body_cycle: RequestResponseCycle | None = None  # the cycle whose body is awaited
        self._body_arrived = 0.0  # loop time of the latest chunk
        self._body_bytes = 0  # of the current request's body, as the parser delivered it
        self._framing = 0  # bytes received for it that were not body: chunk sizes, trailers
        self._running: RequestResponseCycle | None = None  # the request the application serves
        self._send_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def data_received(self, data: bytes) -> None:
        awaiting = self._in_headers or self._header_deadline is not None
        if awaiting and self._headers_too_large(data):
            self._stop_waiting()
            detail = f"the request line and headers exceed {MAX_HEADER_BYTES} bytes"
            self._answer_and_close(431, "Request header fields too large", detail)
            return
        cycle = self.cycle
        in_body = cycle is not None and cycle.more_body and not self._in_headers
        if in_body:
            self._framing += len(data)  # on_body takes back what was body
        super().data_received(data)
        if self.cycle is not self._waiting_after:  # a request was parsed: its headers are in
            self._stop_waiting()
        if in_body and self._framing > MAX_HEADER_BYTES + self._body_bytes // 8:
            detail = (
                f"the body's framing (chunk sizes, extensions, trailers) exceeds "
                f"{MAX_HEADER_BYTES} bytes and an eighth of the body"
            )
            self._answer_for(self.cycle, PayloadTooLarge, detail)
            return
        self._watch_body()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_headers = True
        self._header_bytes, self._header_tail = 0, b""
        if self._header_deadline is None:  # pipelined behind a request still being served
            self._await_headers()

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._body_bytes = self._framing = 0
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        self._framing -= len(body)
        super().on_body(body)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        self._running = cycle  # uvicorn keeps only the latest parsed, maybe still queued
        super()._start_asgi_task(cycle, app)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_deadline is None:  # a client that reads nothing holds the response
            self._send_deadline = self.loop.call_later(self.body_timeout, self._send_overdue)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stop_send_deadline()

    def on_response_complete(self) -> None:
        cycle = self.cycle  # the one answered, unless a later request waits in the pipeline
        if not self.pipeline and cycle is not None and cycle.more_body:
            self.transport.close()  # answered early: the rest of the body is not read
        super().on_response_complete()  # may start a pipelined request already buffered
        if self.cycle is not None and self.cycle.response_complete:
            self._await_headers()
        self._watch_body()

    def handle_websocket_upgrade(self) -> None:
        self._stop_waiting()  # the transport now belongs to the websocket protocol
        self._stop_body_deadline()
        super().handle_websocket_upgrade()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        self._stop_body_deadline()
        self._stop_send_deadline()
        running = self._running
        if running is not None and running is not self.cycle and not running.response_complete:
            # Pipelined: uvicorn tells only the latest parsed request; the one being served
            # would write to a closed transport (an ERROR) instead of seeing the client leave.
            running.disconnected = True
            running.message_event.set()
        super().connection_lost(exc)

    def _stop_send_deadline(self) -> None:
        if self._send_deadline is not None:
            self._send_deadline.cancel()
            self._send_deadline = None

    def _send_overdue(self) -> None:
        self._send_deadline = None
        logger.info(
            "closing the connection to %s: it read nothing of the response for %g s",
            self.client,
            self.body_timeout,
        )
        self.transport.abort()  # close() would wait for the unread response to be sent

    # Headers

    def _await_headers(self) -> None:
        self._stop_waiting()
        if self.transport.is_closing():
            return
        self._waiting_after = self.cycle
        self._header_bytes, self._header_tail = 0, b""
        self._header_deadline = self.loop.call_later(self.header_timeout, self._headers_overdue)

    def _stop_waiting(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_large(self, data: bytes) -> bool:
        """Whether ``data`` takes the headers awaited past :data:`MAX_HEADER_BYTES` before
        the blank line that ends them (looked for before the parser sees the bytes)."""
        room = MAX_HEADER_BYTES - self._header_bytes
        window = self._header_tail + data[: room + 1]
        if b"\r\n\r\n" in window or b"\n\n" in window:
            return False  # the headers end within the limit
        self._header_bytes += len(data)
        self._header_tail = window[-3:]
        return self._header_bytes > MAX_HEADER_BYTES

    def _headers_overdue(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            logger.debug(
                "closing the connection from %s: no complete request headers within %g s",
                self.client,
                self.header_timeout,
            )
            self.transport.close()

    # Body

    def _watch_body(self) -> None:
        """After the parser took in data: start, restart or end the wait for the current body."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete or not cycle.more_body:
            if self._body_cycle is not None:
                self._stop_body_deadline()
            return
        self._body_arrived = self.loop.time()
        if self._body_cycle is cycle:
            return  # the deadline looks at _body_arrived when it falls due
        self._stop_body_deadline()
        self._body_cycle = cycle
        self._body_deadline = self.loop.call_later(self.body_timeout, self._body_due)

    def _stop_body_deadline(self) -> None:
        if self._body_deadline is not None:
            self._body_deadline.cancel()
            self._body_deadline = None
        self._body_cycle = None

    def _body_due(self) -> None:
        self._body_deadline = None
        cycle = self._body_cycle
        if cycle is not self.cycle or cycle is None or not cycle.more_body:
            self._stop_body_deadline()
            return
        now = self.loop.time()
        if self.flow.read_paused or self.pipeline:
            # We stopped reading, or the request waits behind earlier ones (pipelined): the
            # time is ours, not the client's idle time.
            self._body_arrived = now
            self._body_deadline = self.loop.call_later(_PAUSED_RECHECK_SECONDS, self._body_due)
            return
        left = self._body_arrived + self.body_timeout - now
        if left > 0:
            self._body_deadline = self.loop.call_later(left, self._body_due)
            return
        self._body_cycle = None
        if cycle.response_started or self.transport.is_closing():
            return  # answered early: the connection closes when that answer is sent
        detail = (
            f"the request body stalled: no part of it arrived for {self.body_timeout:g} s "
            "(the body idle timeout)"
        )
        self._answer_for(cycle, RequestTimeout, detail)

    def _answer_for(
        self, cycle: RequestResponseCycle, error: type[ServiceError], detail: str
    ) -> None:
        """Answer ``error`` for ``cycle`` and close; the application sees the client leave and
        finds the status in the request's state (module docstring)."""
        if cycle.response_started:  # answered already: just end the connection
            self.transport.close()
            return
        cycle.scope.setdefault("state", {})[ANSWERED] = error.status
        cycle.disconnected = True  # whatever the application still sends goes nowhere
        cycle.message_event.set()
        self._answer_and_close(error.status, error.title, detail)

    def _answer_and_close(self, status: int, title: str, detail: str) -> None:
        """Write a problem+json answer of the protocol's own, then close the connection."""
        logger.info("answered %d to %s and closed the connection: %s", status, self.client, detail)
        response = problem_response(status, detail, title=title)
        head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}".encode()]
        head += [name + b": " + value for name, value in response.raw_headers]
        head.append(b"connection: close")
        self.transport.write(b"\r\n".join(head) + b"\r\n\r\n" + bytes(response.body))
        self.transport.close()
