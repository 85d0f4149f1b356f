"""What :class:`~calibration_client.Client` and :class:`~calibration_client.AsyncClient`
share besides the operations (``_calls.py``): the configuration, a :class:`Call` and its
deadline, each attempt's request and body, how an answer is read, and the retry decision.
The two differ only in how they send and sleep (openai-python's ``_base_client.py`` shape).

Every operation but one is safe to retry, so each is: GETs and the alias PUT are idempotent;
predict is pure (with ``ids`` the first record of an id wins); outcomes repeated are counted
as duplicates, not stored twice; diagnostics, compare and estimate POSTs store nothing; and a
fit always carries an ``Idempotency-Key`` (generated when not given) and the same bytes, under
which the service answers the version the first attempt created, also after a read
timeout. The exception is adjust, which stores a version and which the service does not
answer under an ``Idempotency-Key``: its call is not ``idempotent``, so it is tried again only
when the request cannot have been acted on (:func:`~calibration_client._retry.retried`)."""

from __future__ import annotations

import random
import re
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx

from calibration_client._batches import BULK_ROWS, CHUNK_BYTES, QueryValue, Stream
from calibration_client._errors import (
    APITimeoutError,
    CalibrationError,
    connection_error,
    error_from_response,
    unreadable_answer,
)
from calibration_client._retry import RetryPolicy, may_have_arrived
from calibration_client._version import __version__

T = TypeVar("T")
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
Progress = Callable[[int, int], None]
"""``progress(sent, total)``, called as a request's body goes, in bytes; a retry starts
again from 0."""
_UNREADABLE = (KeyError, IndexError, TypeError, ValueError, AttributeError)
"""What reading a bad body raises (AttributeError: ``.get`` on what is not an object)."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One operation: its request, how to read a successful answer, and its deadline (a
    time of the client's clock, taken before the body was encoded: encoding is part of the
    call's time). ``idempotent`` is False for a request that must not reach the service
    twice (it would act twice): it is retried only when the first cannot have been acted on."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    deadline: float
    params: Mapping[str, QueryValue] | None = None
    content: bytes | Stream | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    progress: Progress | None = None
    idempotent: bool = True


_PRINTABLE = re.compile(r"[\x20-\x7e]+")
_LONGEST = 365 * 86_400.0
"""The longest ``timeout``: a year (an infinite one would overflow the clocks' arithmetic)."""


class BaseClient:
    """Configuration, requests and the retry decision of a client; no I/O."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        timeout: float = 30.0,
        retries: int = 3,
    ) -> None:
        try:
            url = httpx.URL(base_url)
        except httpx.InvalidURL as exc:
            raise ValueError(f"base_url {base_url!r} is not a URL: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"base_url {base_url!r} is not an http(s) URL")
        if api_key is not None and not _PRINTABLE.fullmatch(api_key):
            raise ValueError("api_key must be printable ASCII (it goes in a header)")
        if not (isinstance(timeout, (int, float)) and 0 < timeout < _LONGEST):
            raise ValueError(
                f"timeout must be a number of seconds in (0, {_LONGEST:g}), not {timeout!r}"
            )
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.bulk_rows = BULK_ROWS
        # clocks and the jitter's draw are attributes so that tests can make them fake
        self._clock: Callable[[], float] = time.monotonic
        self._wall: Callable[[], float] = time.time
        self._uniform: Callable[[], float] = random.random

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    def _deadline(self, timeout: float | None) -> float:
        """When a call started now must have ended (``timeout``, else the client's)."""
        return self._clock() + (self.timeout if timeout is None else timeout)

    def _time_left(self, deadline: float) -> float:
        """Seconds until ``deadline``; APITimeoutError when it has passed."""
        left = deadline - self._clock()
        if left <= 0:
            raise APITimeoutError("the call's timeout passed before an answer came")
        return left

    def _request(
        self,
        http: httpx.Client | httpx.AsyncClient,
        call: Call[Any],
        content: bytes | Iterator[bytes] | AsyncIterator[bytes] | None,
        left: float,
    ) -> httpx.Request:
        """The attempt's request: ``content`` is :meth:`_body`'s (async for an async
        client), httpx's timeouts the ``left`` seconds of the call."""
        headers = {"User-Agent": f"calibration-client/{__version__}", **call.headers}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        if isinstance(call.content, bytes) and not isinstance(content, bytes):
            headers["Content-Length"] = str(len(call.content))  # bytes sent in chunks
        url = self.base_url + call.path
        if call.params is None:  # (httpx merges even an absent query: 50 us a call)
            return http.build_request(
                call.method, url, content=content, headers=headers, timeout=left
            )
        return http.build_request(
            call.method, url, params=call.params, content=content, headers=headers, timeout=left
        )

    def _body(self, call: Call[Any]) -> bytes | Iterator[bytes] | None:
        """The attempt's body: bytes as they are; a stream (fresh for this attempt), or bytes
        whose progress is watched, a chunk at a time, reporting each chunk and stopping
        at the deadline."""
        content = call.content
        if content is None or (isinstance(content, bytes) and call.progress is None):
            return content
        if isinstance(content, bytes):
            total = len(content)
            chunks: Iterable[bytes] = (
                content[i : i + CHUNK_BYTES] for i in range(0, total, CHUNK_BYTES)
            )
        else:
            total = int(call.headers["Content-Length"])
            chunks = content()
        return self._watched(chunks, total, call)

    def _watched(self, chunks: Iterable[bytes], total: int, call: Call[Any]) -> Iterator[bytes]:
        sent = 0
        if call.progress is not None:
            call.progress(sent, total)
        for chunk in chunks:
            self._time_left(call.deadline)  # a slow reader cannot stretch the call
            yield chunk
            sent += len(chunk)
            if call.progress is not None:
                call.progress(sent, total)

    def _read(self, call: Call[T], response: httpx.Response) -> T:
        """The result in a successful answer; APIResponseValidationError (not retried) when
        its body cannot be read."""
        try:
            return call.read(response)
        except _UNREADABLE as exc:
            raise unreadable_answer(response, exc) from exc

    def _answer_error(self, response: httpx.Response) -> CalibrationError:
        return error_from_response(response)

    def _failed(self, exc: httpx.TransportError) -> CalibrationError:
        error = connection_error(exc)
        error.__cause__ = exc  # what the retry policy judges a failure by
        return error

    def _wait(self, error: CalibrationError, attempt: int, call: Call[Any]) -> float | None:
        """Seconds to sleep before the next attempt, or None to raise ``error``; the policy
        of ``retries`` as it is now (it may have been set since the client was made). A
        call that is not idempotent and may have reached the service says so in a note on
        ``error``."""
        left = call.deadline - self._clock()
        policy = RetryPolicy(retries=self.retries)
        wait = policy.wait(error, attempt, left, self._uniform, self._wall, call.idempotent)
        if wait is None and not call.idempotent and may_have_arrived(error):
            error.add_note(
                f"{call.method} {call.path} was not retried: the request may have reached the "
                "service, which may have acted on it; look before sending it again"
            )
        return wait
