"""Fakes for the tests that need no service: a fake server (``httpx.MockTransport``) behind a
:class:`Client` or an :class:`AsyncClient`, a fake clock, and the documents they answer."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import httpx
from calibration_client import AsyncClient, Client

VERSION = {
    "name": "churn", "version": 1, "method": "platt", "params": {}, "n_samples": 4,
    "n_positive": 2, "n_classes": 2, "created_at": "2026-11-21T22:00:00Z", "description": "",
    "tags": {}, "fitted": {"A": -1.0, "B": 0.0}, "metrics": {}, "selection": None,
    "aliases": [], "source": None,
}  # fmt: skip
URL = "http://calibration.test"
PROBLEM = {"type": "/problems/busy", "title": "Busy", "status": 503, "detail": "queue full"}


class FakeTime:
    """A monotonic clock that only sleeps move, plus a record of the sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


Handler = Callable[[httpx.Request], httpx.Response]


class Harness:
    """A :class:`Client` or an :class:`AsyncClient` (``kind``) whose requests go to
    ``handler`` (each one recorded), timed by ``fake``, with the largest jitter draw (waits
    are the backoff's cap at each step). :meth:`call` runs a method to its result either
    way."""

    def __init__(self, kind: str, handler: Handler, fake: FakeTime, **options: Any) -> None:
        self.seen: list[httpx.Request] = []

        def recording(request: httpx.Request) -> httpx.Response:
            self.seen.append(request)
            return handler(request)

        transport = httpx.MockTransport(recording)
        self.client: Client | AsyncClient
        if kind == "sync":
            self.client = Client(URL, http_client=httpx.Client(transport=transport), **options)
            self.client._sleep = fake.sleep
        else:
            http = httpx.AsyncClient(transport=transport)
            self.client = AsyncClient(URL, http_client=http, **options)
            self.client._sleep = fake.async_sleep
        self.client._clock = fake.clock
        self.client._uniform = lambda: 1.0

    def call(self, operation: str, /, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.client, operation)(*args, **kwargs)
        return asyncio.run(result) if inspect.iscoroutine(result) else result


Serve = Callable[..., Harness]
"""``serve(handler, fake, **options)``: the conftest's fixture, a Harness of the run's kind."""


def busy(headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(503, json=PROBLEM, headers=headers or {})
