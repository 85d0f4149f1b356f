"""When a failed attempt is tried again, and after how long.

Retried: no answer (refused, reset, dropped, timed out: ``httpx`` network, timeout and remote
protocol errors) and the answers 429 and 503, which the service sends when the condition
should pass (a full queue, the database away), with ``Retry-After``. Never a 4xx other than
429, nor another 5xx: the same request would fail the same way.

A request that is not idempotent (adjust: the service would store a second version) is
retried only when it cannot have been acted on: the connection was never made (refused, a
connect or pool timeout: not a byte was sent), or the service answered 429 or 503 *with*
``Retry-After``, its way of saying it did nothing (a 503 without it may be a proxy's, after
the request reached the service). Not after a dropped connection or a read or write timeout:
the request may have arrived, and the service may have acted on it.

The wait before retry ``n`` (from 0) is exponential backoff with full jitter, uniform in
[0, min(cap, base * 2**n)] (spreads clients that failed together), and at least the answer's
``Retry-After``. One deadline bounds the whole call: a wait that would end past it is not
slept; the last error is raised at once."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

import httpx

from calibration_client._errors import APIConnectionError, CalibrationError

RETRIED_STATUSES = frozenset({429, 503})
RETRIED_TRANSPORT_ERRORS: tuple[type[httpx.TransportError], ...] = (
    httpx.TimeoutException,  # connect, read, write and pool timeouts
    httpx.NetworkError,  # ConnectError, ReadError, WriteError, CloseError
    httpx.RemoteProtocolError,  # the server dropped the connection mid-answer
)
UNSENT_TRANSPORT_ERRORS: tuple[type[httpx.TransportError], ...] = (
    httpx.ConnectError,  # refused, unreachable, TLS handshake failed: no request went
    httpx.ConnectTimeout,
    httpx.PoolTimeout,  # no connection became free to send it on
)
"""Failures before any byte of the request was sent: retried also when it is not
idempotent."""


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``retries`` retries, waits of full-jitter backoff from ``base`` to ``cap``
    seconds."""

    retries: int = 3
    base: float = 0.5
    cap: float = 8.0

    def backoff(self, attempt: int, uniform: Callable[[], float]) -> float:
        """The jittered wait before retry ``attempt`` (0 for the first retry);
        ``uniform()`` draws from [0, 1)."""
        return uniform() * min(self.cap, self.base * 2.0**attempt)

    def wait(
        self,
        error: CalibrationError,
        attempt: int,
        time_left: float,
        uniform: Callable[[], float],
        now: Callable[[], float] = time.time,
        idempotent: bool = True,
    ) -> float | None:
        """Seconds to wait before trying again after ``error`` on attempt ``attempt``
        (0 for the first), or None to raise it now: not a retried failure (for a request
        that is not ``idempotent``, one it may have reached the service in), retries spent,
        or the wait would end at or past the deadline ``time_left`` seconds away. ``now`` is
        the wall clock, for a ``Retry-After`` date."""
        if attempt >= self.retries or not retried(error, idempotent):
            return None
        wait = self.backoff(attempt, uniform)
        if error.response is not None:
            after = retry_after(error.response.headers, now())
            if after is not None:
                wait = max(wait, after)
        return wait if wait < time_left else None


def retried(error: CalibrationError, idempotent: bool = True) -> bool:
    """Whether ``error`` is a failure that trying again may cure, and, for a request that is
    not ``idempotent``, one after which the service cannot have acted on it."""
    if isinstance(error, APIConnectionError):
        kinds = RETRIED_TRANSPORT_ERRORS if idempotent else UNSENT_TRANSPORT_ERRORS
        return isinstance(error.__cause__, kinds)
    if error.status not in RETRIED_STATUSES:
        return False
    return idempotent or (error.response is not None and "retry-after" in error.response.headers)


def may_have_arrived(error: CalibrationError) -> bool:
    """Whether the request may have reached the service although ``error`` came instead of
    its answer: a connection that failed after it was made (dropped, timed out reading)."""
    return isinstance(error, APIConnectionError) and not isinstance(
        error.__cause__, UNSENT_TRANSPORT_ERRORS
    )


def retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """The ``Retry-After`` of an answer in seconds from ``now`` (a Unix time), as delay
    seconds or an HTTP date (RFC 9110 10.2.3); None when absent or unreadable."""
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)
