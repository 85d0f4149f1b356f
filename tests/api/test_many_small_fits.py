"""Many cheap fits at once are queued, not refused (issue 25): admission is by the bytes the
waiting jobs hold, so 16 clients sending 32 small fits each get 201, with the versions
numbered without gap or loss, on one name and on many, on SQLite and PostgreSQL."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from app.settings import Settings
from tests.client import TestClient

from .helpers import sigmoid_batch

FITS = 32
CLIENTS = 16


@pytest.fixture
def settings(database_url: str) -> Settings:
    """The service's defaults for admission (the suite's other apps widen the queue)."""
    return Settings(database_url=database_url, cv_folds=5)


def _fit(client: TestClient, name: str, seed: int) -> tuple[int, int | None]:
    batch = sigmoid_batch(n=300, seed=seed)
    r = client.post(f"/v1/calibrators/{name}/fit", json={**batch, "method": "platt"})
    return r.status_code, r.json().get("version") if r.status_code == 201 else None


def test_many_small_fits_on_one_name_are_all_stored_in_order(client: TestClient) -> None:
    with ThreadPoolExecutor(CLIENTS) as clients:
        answers = list(clients.map(lambda i: _fit(client, "many", i), range(FITS)))
    assert [status for status, _ in answers] == [201] * FITS, answers
    assert sorted(version for _, version in answers) == list(range(1, FITS + 1))
    listed = client.get("/v1/calibrators/many", params={"limit": 100}).json()
    assert sorted(v["version"] for v in listed["versions"]) == list(range(1, FITS + 1))


def test_many_small_fits_on_many_names_are_all_stored(client: TestClient) -> None:
    with ThreadPoolExecutor(CLIENTS) as clients:
        answers = list(clients.map(lambda i: _fit(client, f"segment-{i}", i), range(FITS)))
    assert answers == [(201, 1)] * FITS
