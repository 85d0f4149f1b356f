"""Aliases as selectors, their life cycle and races; tags, descriptions and the tag filter."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.client import TestClient

from .helpers import FEW_RESAMPLES, assert_problem, sigmoid_batch

BASE = "/v1/calibrators/churn"


def fit(client: TestClient, seed: int, method: str = "platt", name: str = "churn") -> int:
    body = {**sigmoid_batch(120, seed=seed), "method": method}
    r = client.post(f"/v1/calibrators/{name}/fit", json=body)
    assert r.status_code == 201, r.text
    version: int = r.json()["version"]
    return version


def predicted_version(client: TestClient, selector: str) -> int:
    r = client.post(f"{BASE}/predict", json={"scores": [0.3], "version": selector})
    assert r.status_code == 200, r.text
    version: int = r.json()["version"]
    return version


def test_alias_life_cycle(client: TestClient) -> None:
    for seed in range(3):
        fit(client, seed)
    r = client.put(f"{BASE}/aliases/production", json={"version": 2})
    assert r.status_code == 200, r.text
    assert r.json()["version"] == 2
    assert r.json()["aliases"] == ["production"]
    # a selector everywhere a version is
    assert predicted_version(client, "production") == 2
    assert client.get(f"{BASE}/versions/production").json()["version"] == 2
    diagnostics = client.get(f"{BASE}/versions/production/diagnostics?bootstrap={FEW_RESAMPLES}")
    assert diagnostics.json()["version"] == 2
    r = client.post(f"{BASE}/predict?version=production", json={"scores": [0.3]})
    assert r.json()["version"] == 2
    assert client.get(BASE).json()["aliases"] == {"production": 2}
    # promote a candidate, then roll back
    client.put(f"{BASE}/aliases/candidate", json={"version": 3})
    assert client.put(f"{BASE}/aliases/production", json={"version": 3}).status_code == 200
    assert predicted_version(client, "production") == 3
    assert client.get(f"{BASE}/versions/3").json()["aliases"] == ["candidate", "production"]
    assert client.put(f"{BASE}/aliases/production", json={"version": 2}).status_code == 200
    assert predicted_version(client, "production") == 2
    assert client.get(BASE).json()["aliases"] == {"candidate": 3, "production": 2}
    # deleting the alias
    assert client.delete(f"{BASE}/aliases/candidate").status_code == 204
    assert_problem(client.get(f"{BASE}/versions/candidate"), 404, "candidate")
    assert_problem(client.delete(f"{BASE}/aliases/candidate"), 404, "candidate")


def test_deleting_an_aliased_version_is_409_unless_forced(client: TestClient) -> None:
    fit(client, 1)
    fit(client, 2)
    client.put(f"{BASE}/aliases/production", json={"version": 1})
    assert_problem(client.delete(f"{BASE}/versions/1"), 409, "production", "force")
    assert client.get(f"{BASE}/versions/1").status_code == 200
    assert client.delete(f"{BASE}/versions/1?force=true").status_code == 204
    assert_problem(client.get(f"{BASE}/versions/production"), 404, "production")
    assert client.get(BASE).json()["aliases"] == {}


@pytest.mark.parametrize(
    ("alias", "body", "status", "fragment"),
    [
        ("123", {"version": 1}, 422, "digits"),
        ("latest", {"version": 1}, 422, "latest"),
        ("-bad", {"version": 1}, 422, "alias"),
        ("prod", {"version": 9}, 404, "version 9"),
        ("prod", {"version": "1"}, 422, "version"),
        ("prod", {"version": 1, "x": 1}, 422, "x"),
        ("prod", {}, 422, "version"),
    ],
)
def test_bad_alias_requests(
    client: TestClient, alias: str, body: dict[str, object], status: int, fragment: str
) -> None:
    fit(client, 1)
    assert_problem(client.put(f"{BASE}/aliases/{alias}", json=body), status, fragment)
    assert client.get(BASE).json()["aliases"] == {}


def test_two_clients_moving_one_alias_leave_it_at_one_of_their_versions(
    client: TestClient,
) -> None:
    for seed in range(4):
        fit(client, seed)
    targets = [1 + (i % 4) for i in range(40)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(
            pool.map(
                lambda v: client.put(f"{BASE}/aliases/production", json={"version": v}).status_code,
                targets,
            )
        )
    assert statuses == [200] * 40
    aliases = client.get(BASE).json()["aliases"]
    assert set(aliases) == {"production"}
    assert aliases["production"] in set(targets)
    assert predicted_version(client, "production") == aliases["production"]


def test_patch_merges_tags_and_filters_the_list(client: TestClient) -> None:
    fit(client, 1)
    fit(client, 2, name="other")
    r = client.patch(
        f"{BASE}/versions/1", json={"description": "first", "tags": {"team": "risk", "x": "1"}}
    )
    assert r.status_code == 200, r.text
    assert r.json()["description"] == "first"
    assert r.json()["tags"] == {"team": "risk", "x": "1"}
    r = client.patch(f"{BASE}/versions/latest", json={"tags": {"x": None, "stage": "prod"}})
    assert r.json()["tags"] == {"team": "risk", "stage": "prod"}
    assert r.json()["description"] == "first"
    assert client.get(f"{BASE}/versions/1").json()["tags"] == {"team": "risk", "stage": "prod"}
    listing = client.get("/v1/calibrators?tag=team:risk").json()
    assert [i["name"] for i in listing["items"]] == ["churn"]
    assert listing["total"] == 1
    assert client.get("/v1/calibrators?tag=team:ops").json()["total"] == 0
    assert client.get("/v1/calibrators").json()["total"] == 2
    assert_problem(client.get("/v1/calibrators?tag=nocolon"), 422, "tag")
    assert_problem(client.patch(f"{BASE}/versions/1", json={"tags": {"a": 1}}), 422, "tags.a")
    assert_problem(client.patch(f"{BASE}/versions/1", json={"fitted": {}}), 422, "fitted")
    assert_problem(client.patch(f"{BASE}/versions/7", json={}), 404, "7")
    long = "x" * 10_001
    assert_problem(client.patch(f"{BASE}/versions/1", json={"description": long}), 422, "limit")
    assert_problem(client.patch(f"{BASE}/versions/1", json={"tags": {"k": long}}), 422, "too long")
    many = {f"k{i}": "v" for i in range(101)}
    assert_problem(client.patch(f"{BASE}/versions/1", json={"tags": many}), 422, "limit")


def test_a_tag_filter_with_quotes_is_an_empty_page_not_an_outage(client: TestClient) -> None:
    fit(client, 1)
    for tag in ("team%22:x", "team%5C:x", "%22%5D%5B:1"):
        r = client.get(f"/v1/calibrators?tag={tag}")
        assert r.status_code == 200, r.text
        assert r.json()["total"] == 0
    assert client.get("/readyz").status_code == 200
