"""Retries against a real service that is busy: one fit at a time and none waiting, so
fits sent together are refused with 503 and Retry-After until their turn. Each is retried
under its key and each makes exactly one version."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from calibration_client import Client

from demo.server import LocalService


@pytest.fixture(scope="module")
def busy_url() -> Iterator[str]:
    service = LocalService(CALIBRATION_MAX_CONCURRENT_FITS="1", CALIBRATION_MAX_QUEUED_FITS="0")
    try:
        service.wait_until_ready()
        yield service.base_url
    finally:
        service.stop()


def batch(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=20_000)
    return scores, (rng.random(20_000) < 1 / (1 + np.exp(-scores))).astype(int)


def test_fits_refused_while_busy_are_retried_into_one_version_each(busy_url: str) -> None:
    batches = [batch(seed) for seed in range(4)]
    refused: list[httpx.Response] = []

    def count_refusals(response: httpx.Response) -> None:
        if response.status_code == 503:
            refused.append(response)

    http = httpx.Client(event_hooks={"response": [count_refusals]})
    with http, Client(busy_url, timeout=120.0, retries=30, http_client=http) as client:

        def fit(index: int) -> int:
            scores, labels = batches[index]
            return client.fit("busy", scores, labels, method="isotonic").version

        with ThreadPoolExecutor(4) as pool:
            made = sorted(pool.map(fit, range(4)))
        assert made == [1, 2, 3, 4]
        assert [v.version for v in client.versions("busy")] == [4, 3, 2, 1]
    assert refused  # the service was busy, and the client waited its turn
    assert all("Retry-After" in r.headers for r in refused)
