"""The freshness contract across replicas: two apps (two services, two caches) on one database.

Their fits run in threads (``work_processes`` off): what is timed is how soon one app sees
what the other wrote, whichever process wrote it, and the serial run then needs no fork
server of its own (seconds of imports). Replicas as they run, fits in worker processes:
``tests/server/test_two_processes.py``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from app.main import create_app
from app.settings import Settings
from app.store import Database
from tests.client import TestClient

from .helpers import sigmoid_batch

WINDOW = 0.4


@pytest.fixture
def replicas(database_url: str, database: Database) -> Iterator[tuple[TestClient, TestClient]]:
    settings = Settings(
        database_url=database_url, latest_refresh_seconds=WINDOW, work_processes=False
    )
    with (
        TestClient(create_app(settings, database=database)) as a,
        TestClient(create_app(settings, database=database)) as b,
    ):
        yield a, b


def predicted(client: TestClient, selector: str = "latest") -> tuple[int, int]:
    r = client.post("/v1/calibrators/m/predict", json={"scores": [0.2], "version": selector})
    return r.status_code, (r.json().get("version", 0) if r.status_code == 200 else 0)


def wait_for(client: TestClient, expected: tuple[int, int], selector: str = "latest") -> float:
    """Seconds until ``client`` answers ``expected``, polling (bounded at 5 s)."""
    start = time.monotonic()
    while time.monotonic() - start < 5:
        if predicted(client, selector) == expected:
            return time.monotonic() - start
        time.sleep(0.02)
    pytest.fail(f"{expected} never answered within 5 s")


def fit(client: TestClient, seed: int) -> int:
    r = client.post("/v1/calibrators/m/fit", json={**sigmoid_batch(60, seed), "method": "platt"})
    assert r.status_code == 201
    version: int = r.json()["version"]
    return version


@pytest.mark.serial  # each change is seen within the window + 0.3 s
def test_latest_alias_and_deletes_propagate_within_the_window(
    replicas: tuple[TestClient, TestClient],
) -> None:
    a, b = replicas
    fit(a, 1)
    assert predicted(b) == (200, 1)
    for _ in range(5):  # steady traffic on b: served from its cache
        assert predicted(b) == (200, 1)
    fit(a, 2)
    assert wait_for(b, (200, 2)) <= WINDOW + 0.3
    assert a.put("/v1/calibrators/m/aliases/production", json={"version": 1}).status_code == 200
    assert predicted(b, "production") == (200, 1)
    assert a.put("/v1/calibrators/m/aliases/production", json={"version": 2}).status_code == 200
    assert wait_for(b, (200, 2), "production") <= WINDOW + 0.3
    assert predicted(b, "1") == (200, 1)
    assert a.delete("/v1/calibrators/m/aliases/production").status_code == 204
    assert a.delete("/v1/calibrators/m/versions/1").status_code == 204
    assert wait_for(b, (404, 0), "1") <= WINDOW + 0.3
    assert wait_for(b, (404, 0), "production") <= WINDOW + 0.3
