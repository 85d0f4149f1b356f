"""AsyncClient: the same calls as Client against the live service, and its retries."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import numpy as np
import pytest
from calibration_client import (
    AsyncClient,
    Client,
    NotFoundError,
    ServiceUnavailableError,
)


def test_the_same_calls_answer_the_same(service_url: str) -> None:
    name = f"async-{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(11)
    scores = rng.normal(size=400)
    labels = (rng.random(400) < 1 / (1 + np.exp(-scores))).astype(int)
    wide = rng.normal(size=12_000)

    async def calls() -> None:
        async with AsyncClient(service_url, timeout=120.0) as client:
            version = await client.fit(name, scores, labels, method="platt")
            assert version.version == 1
            await client.fit(name, scores, labels, method="isotonic")
            await client.set_alias(name, "production", 1)
            assert (await client.version(name, "production")).method == "platt"
            assert [v.version for v in await client.versions(name)] == [2, 1]
            binary = await client.predict(name, wide, version=1)
            as_json = await client.predict(name, wide, version=1, transport="json")
            assert np.array_equal(binary.probabilities, as_json.probabilities)
            logged = await client.predict(name, scores[:2], ids=["x", "y"])
            assert logged.logged == 2
            receipt = await client.outcomes(name, ["x", "y"], [1, 0])
            assert receipt.matched + receipt.pending == 2
            diagnostics = await client.diagnostics(name, 1, n_bins=4, bootstrap=20)
            assert diagnostics.calibrated.count.sum() == 400
            comparison = await client.compare(name, scores, labels, bootstrap=20)
            assert len(comparison.ranking) == 2
            with pytest.raises(NotFoundError):
                await client.version(name, 9)
            # several calls at once on one client
            fits = await asyncio.gather(*(client.version(name, v) for v in (1, 2, 1)))
            assert [f.version for f in fits] == [1, 2, 1]

    asyncio.run(calls())
    with Client(service_url) as sync:  # what the async calls stored, seen by the sync client
        assert sync.version(name, "production").version == 1


def test_async_retries_with_its_own_sleep() -> None:
    attempts: list[httpx.Request] = []
    sleeps: list[float] = []

    def busy(request: httpx.Request) -> httpx.Response:
        attempts.append(request)
        return httpx.Response(503, headers={"Retry-After": "2"})

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def call() -> None:
        http = httpx.AsyncClient(transport=httpx.MockTransport(busy))
        client = AsyncClient("http://calibration.test", retries=2, http_client=http)
        client._sleep = fake_sleep
        client._uniform = lambda: 0.0
        with pytest.raises(ServiceUnavailableError):
            await client.fit("churn", [0.1, 0.9], [0, 1])
        await client.close()
        assert not http.is_closed
        await http.aclose()

    asyncio.run(call())
    assert len(attempts) == 3
    assert sleeps == [2.0, 2.0]
    assert len({r.headers["Idempotency-Key"] for r in attempts}) == 1
