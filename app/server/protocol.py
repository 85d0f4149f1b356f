"""uvicorn's httptools protocol with deadlines and limits: what a client may hold is bounded.

uvicorn bounds only the idle time *after* a response, and cancels even that as soon as one
byte arrives. A client that sends nothing, trickles its headers (Slowloris), stalls half-way
through a body, or reads no response holds a socket, a file descriptor and, once routed, a
task for as long as it likes. :class:`DeadlineProtocol` closes those gaps where nginx does
(``client_header_timeout``, ``client_body_timeout``, ``send_timeout``):

- **Headers** must be complete ``CALIBRATION_HEADER_TIMEOUT_SECONDS`` after the connection
  opened, the previous response finished, or (pipelined) the request began; trickling does
  not push the deadline back. Past :data:`~app.server.limits.MAX_HEADER_BYTES` they are
  answered 431.
- **A body** that sends nothing for ``CALIBRATION_BODY_TIMEOUT_SECONDS`` is answered 408.
  Every chunk restarts the clock, and pauses that are ours do not count (uvicorn stops
  reading while the application catches up, or while a pipelined request waits its turn).
  Nor may it trickle: past its first ``CALIBRATION_BODY_TIMEOUT_SECONDS`` it must average
  ``CALIBRATION_BODY_MIN_RATE_BYTES`` a second, else it is answered 408 too. Its deadline is
  that timeout plus a second for every that-many bytes received, as Apache's
  ``mod_reqtimeout`` counts (``body=20,MinRate=500``); a byte every few seconds no longer
  holds a connection for as long as the body limit allows.
  Chunked framing is bounded too (:func:`~app.server.limits.framing_allowed`, else 413). The
  application sees the client leave and finds the status under
  :data:`~app.api.problems.ANSWERED` in the request's state, so its log says 408 or 413.
- **A response** the client takes nothing of for ``CALIBRATION_BODY_TIMEOUT_SECONDS`` while
  the transport's buffer is full is dropped, with a reset so the kernel frees it too.
- **An answer given before the body was read** (401, 413, 503) closes the connection once
  sent, rather than read up to gigabytes that nothing wants.
- **Upgrades** (websocket, h2c) are ordinary requests: the service speaks neither.
- **A pipelined client that leaves** is a client gone for the request being served too
  (uvicorn tells only the latest parsed one).
- **A stop** marks the request being served, for :mod:`app.api.shutdown` to answer.

Limits in the protocol cost a small predict nothing (an ASGI middleware wrapping ``receive``
and ``send`` cost ~7 us of ~40). httptools, which ``uvicorn[standard]`` installs, takes half
the CPU of the pure-Python h11 per one-score predict (62 against 131 us under wrk). The
protocol is chosen explicitly (``http=``), never "auto", and reads its settings from
:func:`~app.settings.get_settings` in the worker process that serves.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from app.api.problem_types import LARGE_HEADERS, MALFORMED_REQUEST
from app.api.problems import ANSWERED
from app.api.shutdown import STOPPING
from app.errors import PayloadTooLarge, RequestTimeout, ServiceError
from app.server.limits import (
    FRAMING_TOO_LARGE,
    HEADERS_TOO_LARGE,
    HeaderScan,
    SendWatch,
    cancel_timer,
    framing_allowed,
    problem_bytes,
)
from app.settings import get_settings

logger = logging.getLogger("app.http")

_PAUSED_RECHECK_SECONDS = 0.1
"""While uvicorn itself has stopped reading, how often the body deadline looks again."""


class DeadlineProtocol(HttpToolsProtocol):
    """httptools with deadlines for request headers and bodies (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = get_settings()
        self.header_timeout = settings.header_timeout_seconds
        self.body_timeout = settings.body_timeout_seconds
        self.body_min_rate = settings.body_min_rate_bytes
        self._header_deadline: asyncio.TimerHandle | None = None
        self._waiting_after: RequestResponseCycle | None = None  # the cycle before the awaited one
        self._in_headers = False  # the parser is inside a request's line and headers
        self._headers = HeaderScan()  # the bytes of the headers awaited
        self._counted_from_start = False  # the scan of this read began at a request's start
        self._body_deadline: asyncio.TimerHandle | None = None
        self._body_cycle: RequestResponseCycle | None = None  # the cycle whose body is awaited
        self._body_arrived = 0.0  # loop time of the latest chunk
        self._body_started = 0.0  # loop time the body's wait began, moved on by our pauses
        self._body_looked = 0.0  # loop time the deadline last looked
        self._body_bytes = 0  # of the current request's body, as the parser delivered it
        self._framing = 0  # bytes received for it that were not body: chunk sizes, trailers
        self._running: RequestResponseCycle | None = None  # the request the application serves
        self._send_watch: SendWatch | None = None
        self.ws_protocol_class = None  # no websockets: an upgrade is an ordinary request

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def data_received(self, data: bytes) -> None:
        awaiting = self._in_headers or self._header_deadline is not None
        self._counted_from_start = awaiting and not self._in_headers
        if awaiting and self._headers.too_large(data):
            self._stop_waiting()
            self._answer_and_close(
                431, LARGE_HEADERS, "Request header fields too large", HEADERS_TOO_LARGE
            )
            return
        cycle = self.cycle
        in_body = cycle is not None and cycle.more_body and not self._in_headers
        if in_body:
            self._framing += len(data)  # on_body takes back what was body
        super().data_received(data)
        if self.cycle is not self._waiting_after:  # a request was parsed: its headers are in
            self._stop_waiting()
        if in_body and self._framing > framing_allowed(self._body_bytes):
            self._answer_for(self.cycle, PayloadTooLarge, FRAMING_TOO_LARGE)
            return
        self._watch_body()

    def send_400_response(self, msg: str) -> None:
        # problem+json, as every answer
        self._answer_and_close(400, MALFORMED_REQUEST, "Malformed request", msg)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_headers = True
        if self._counted_from_start:  # the scan began with this request's first byte
            self._counted_from_start = False
        else:  # begun after another in the same read: the bytes before this one go uncounted
            self._headers.restart()
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
        if self._send_watch is None:  # a client that reads nothing holds the response
            self._send_watch = SendWatch(self.transport, self.body_timeout, self.client)

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

    def shutdown(self) -> None:
        # Stopping: a request unanswered when the grace period ends is answered 503 (STOPPING)
        for cycle in (self._running, self.cycle):
            if cycle is not None and not cycle.response_complete:
                cycle.scope.setdefault("state", {})[STOPPING] = True
        super().shutdown()

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
        if self._send_watch is not None:
            self._send_watch.stop()
            self._send_watch = None

    def _unsupported_upgrade_warning(self) -> None:
        logger.debug("ignored an upgrade request from %s (no websockets here)", self.client)

    # Headers

    def _await_headers(self) -> None:
        self._stop_waiting()
        if self.transport.is_closing():
            return
        self._waiting_after = self.cycle
        self._headers.restart()
        self._header_deadline = self.loop.call_later(self.header_timeout, self._headers_overdue)

    def _stop_waiting(self) -> None:
        cancel_timer(self._header_deadline)
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
        self._body_started = self._body_looked = self._body_arrived
        self._body_deadline = self.loop.call_later(self.body_timeout, self._body_due)

    def _stop_body_deadline(self) -> None:
        cancel_timer(self._body_deadline)
        self._body_deadline = None
        self._body_cycle = None

    def _body_due(self) -> None:
        self._body_deadline = None
        cycle = self._body_cycle
        if cycle is not self.cycle or cycle is None or not cycle.more_body:
            self._stop_body_deadline()
            return
        now = self.loop.time()
        since, self._body_looked = now - self._body_looked, now
        if self.flow.read_paused or self.pipeline:
            # We stopped reading, or the request waits behind earlier ones (pipelined): the
            # time is ours, not the client's idle time, nor counted against its rate (all the
            # time since the last look, which errs on the client's side).
            self._body_arrived = now
            self._body_started += since
            self._body_deadline = self.loop.call_later(_PAUSED_RECHECK_SECONDS, self._body_due)
            return
        idle_left = self._body_arrived + self.body_timeout - now
        rate_left = self._rate_deadline() - now
        if idle_left > 0 and rate_left > 0:
            self._body_deadline = self.loop.call_later(min(idle_left, rate_left), self._body_due)
            return
        self._body_cycle = None
        if cycle.response_started or self.transport.is_closing():
            return  # answered early: the connection closes when that answer is sent
        if idle_left <= 0:
            detail = (
                f"the request body stalled: no part of it arrived for {self.body_timeout:g} s "
                "(the body idle timeout)"
            )
        else:
            detail = (
                f"the request body arrived too slowly: {self._body_bytes} bytes in "
                f"{now - self._body_started:.1f} s, less than the {self.body_min_rate} bytes a "
                f"second it must average after its first {self.body_timeout:g} s (the body "
                "minimum rate)"
            )
        self._answer_for(cycle, RequestTimeout, detail)

    def _rate_deadline(self) -> float:
        """When the body falls below the minimum rate: the idle timeout after it began, and a
        second more for every :attr:`body_min_rate` bytes received (never, at a rate of 0)."""
        if self.body_min_rate <= 0:
            return float("inf")
        return self._body_started + self.body_timeout + self._body_bytes / self.body_min_rate

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
        self._answer_and_close(error.status, error.slug, error.title, detail)

    def _answer_and_close(self, status: int, slug: str, title: str, detail: str) -> None:
        """Write a problem+json answer of the protocol's own, then close the connection."""
        logger.info("answered %d to %s and closed the connection: %s", status, self.client, detail)
        self.transport.write(problem_bytes(status, slug, title, detail))
        self.transport.close()
