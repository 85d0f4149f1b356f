"""Listing, paginating and deleting calibrators and versions; numbers are never reused."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.client import TestClient

from .helpers import FEW_RESAMPLES, assert_problem, sigmoid_batch


def fit(client: TestClient, name: str, seed: int = 0) -> int:
    r = client.post(
        f"/v1/calibrators/{name}/fit", json={**sigmoid_batch(80, seed), "method": "platt"}
    )
    assert r.status_code == 201, r.text
    version: int = r.json()["version"]
    return version


def test_listing_and_pagination(client: TestClient) -> None:
    for name in ("b-model", "a-model", "c.model"):
        fit(client, name)
    fit(client, "a-model", 1)
    listing = client.get("/v1/calibrators").json()
    assert listing["total"] == 3
    assert [i["name"] for i in listing["items"]] == ["a-model", "b-model", "c.model"]
    first = listing["items"][0]
    assert first["latest_version"] == 2
    assert first["n_versions"] == 2
    assert first["method"] == "platt"
    page = client.get("/v1/calibrators?limit=1&offset=1").json()
    assert page["total"] == 3
    assert [i["name"] for i in page["items"]] == ["b-model"]
    one = client.get("/v1/calibrators/a-model?limit=1").json()
    assert one["total"] == 2
    assert [v["version"] for v in one["versions"]] == [2]
    assert "fitted" not in one["versions"][0]


def test_numbers_are_never_reused_after_deletes(client: TestClient) -> None:
    assert [fit(client, "m", s) for s in range(3)] == [1, 2, 3]
    assert client.delete("/v1/calibrators/m/versions/3").status_code == 204
    assert fit(client, "m") == 4
    assert client.delete("/v1/calibrators/m").status_code == 204
    assert_problem(client.get("/v1/calibrators/m"), 404, "m")
    assert client.get("/v1/calibrators").json()["total"] == 0
    assert fit(client, "m") == 5
    assert [v["version"] for v in client.get("/v1/calibrators/m").json()["versions"]] == [5]


def test_24_concurrent_fits_get_versions_1_to_24(client: TestClient) -> None:
    with ThreadPoolExecutor(max_workers=24) as pool:
        versions = list(pool.map(lambda s: fit(client, "race", s), range(24)))
    assert sorted(versions) == list(range(1, 25))
    stored = client.get("/v1/calibrators/race?limit=100").json()
    assert [v["version"] for v in stored["versions"]] == list(range(24, 0, -1))
    for v in (1, 12, 24):
        url = f"/v1/calibrators/race/versions/{v}/diagnostics?bootstrap={FEW_RESAMPLES}"
        assert client.get(url).status_code == 200


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
