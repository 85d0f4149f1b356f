"""A lost answer, against the live service behind a proxy that drops the first answer (what a
client sees when a load balancer or the network fails after the service did its work): an
adjust, which the service answers no Idempotency-Key for, is sent once and stores one version;
a fit is retried under its key into one version too."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import numpy as np
import pytest
from calibration_client import APIConnectionError, AsyncClient, Client, Version


class DropsFirstAnswer(httpx.BaseTransport):
    """Sends each request on to the service and waits for its answer, but drops the connection
    instead of passing the first answer back: what a client sees when a load balancer or the
    network fails after the service did its work."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.forwarded = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        response.read()
        self.forwarded += 1
        if self.forwarded == 1:
            raise httpx.RemoteProtocolError("Server disconnected", request=request)
        return response


class AsyncDropsFirstAnswer(httpx.AsyncBaseTransport):
    """:class:`DropsFirstAnswer` for an AsyncClient."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.forwarded = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        await response.aread()
        self.forwarded += 1
        if self.forwarded == 1:
            raise httpx.RemoteProtocolError("Server disconnected", request=request)
        return response


def _through_a_dropping_proxy(kind: str, url: str, operation: str, *args: Any, **kw: Any) -> Any:
    """``operation`` on a client of ``kind`` behind a fresh proxy (retries without waits);
    its result or error, and how many requests reached the service."""

    async def run_async() -> Any:
        proxy = AsyncDropsFirstAnswer()
        async with httpx.AsyncClient(transport=proxy) as http:
            client = AsyncClient(url, http_client=http, retries=3)
            client._uniform = lambda: 0.0
            try:
                return await getattr(client, operation)(*args, **kw), proxy.forwarded
            except APIConnectionError as error:
                return error, proxy.forwarded

    if kind == "async":
        return asyncio.run(run_async())
    proxy = DropsFirstAnswer()
    with httpx.Client(transport=proxy) as http:
        client = Client(url, http_client=http, retries=3)
        client._uniform = lambda: 0.0
        try:
            return getattr(client, operation)(*args, **kw), proxy.forwarded
        except APIConnectionError as error:
            return error, proxy.forwarded


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_lost_answer_live_adjust_once_and_fit_once(service_url: str, kind: str) -> None:
    name = f"adjust-retry-{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(12)
    scores = rng.normal(size=400)
    labels = (rng.random(400) < 1 / (1 + np.exp(-scores))).astype(int)
    with Client(service_url) as plain:
        plain.fit(name, scores, labels, method="platt")

        error, sent = _through_a_dropping_proxy(kind, service_url, "adjust", name, 1, prior=0.2)
        assert isinstance(error, APIConnectionError)
        assert sent == 1  # not sent again
        assert "was not retried" in "\n".join(error.__notes__)
        assert [v.version for v in plain.versions(name)] == [2, 1]  # the service did adjust

        fitted, sent = _through_a_dropping_proxy(kind, service_url, "fit", name, scores, labels)
        assert isinstance(fitted, Version)
        assert sent == 2  # retried under its key ...
        assert fitted.version == 3
        assert [v.version for v in plain.versions(name)] == [3, 2, 1]  # ... into one version
