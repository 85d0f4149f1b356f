"""POST /predict: selectors, input order, freshness, bad input."""

from __future__ import annotations

import numpy as np
from fastapi.testclient import TestClient

from .helpers import assert_problem, sigmoid_batch

BASE = "/v1/calibrators/churn"


def fit(client: TestClient, method: str = "platt", seed: int = 0) -> dict[str, object]:
    r = client.post(f"{BASE}/fit", json={**sigmoid_batch(300, seed=seed), "method": method})
    assert r.status_code == 201, r.text
    body: dict[str, object] = r.json()
    return body


def test_predict_uses_the_fitted_sigmoid_in_input_order(client: TestClient) -> None:
    v = fit(client)
    fitted = v["fitted"]
    assert isinstance(fitted, dict)
    scores = np.array([3.0, -1.0, 0.0, 12.5, -40.0])
    r = client.post(f"{BASE}/predict", json={"scores": scores.tolist()})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["name"] == "churn"
    assert body["version"] == 1
    expected = 1.0 / (1.0 + np.exp(fitted["A"] * scores + fitted["B"]))
    np.testing.assert_allclose(body["probabilities"], expected, rtol=1e-12, atol=1e-300)


def test_latest_moves_with_each_fit_and_pinned_versions_do_not(client: TestClient) -> None:
    fit(client, "platt", seed=1)
    before = client.post(f"{BASE}/predict", json={"scores": [0.5]}).json()
    fit(client, "isotonic", seed=2)
    latest = client.post(f"{BASE}/predict", json={"scores": [0.5]}).json()
    pinned = client.post(f"{BASE}/predict", json={"scores": [0.5], "version": 1}).json()
    by_query = client.post(f"{BASE}/predict?version=1", json={"scores": [0.5]}).json()
    assert latest["version"] == 2
    assert pinned["version"] == 1
    assert pinned["probabilities"] == before["probabilities"] == by_query["probabilities"]
    assert latest["probabilities"] != pinned["probabilities"]


def test_deleted_version_is_no_longer_served(client: TestClient) -> None:
    fit(client, seed=1)
    fit(client, seed=2)
    assert client.post(f"{BASE}/predict", json={"scores": [0.5], "version": 2}).status_code == 200
    assert client.delete(f"{BASE}/versions/2").status_code == 204
    assert_problem(client.post(f"{BASE}/predict", json={"scores": [0.5], "version": 2}), 404, "2")
    assert client.post(f"{BASE}/predict", json={"scores": [0.5]}).json()["version"] == 1


def test_predict_bad_input(client: TestClient) -> None:
    fit(client)
    assert_problem(client.post(f"{BASE}/predict", json={"scores": [0.1, None]}), 422, "scores[1]")
    assert_problem(
        client.post(f"{BASE}/predict", json={"scores": [[0.1, 0.9]]}), 422, "matrix", "binary"
    )
    assert_problem(client.post(f"{BASE}/predict", json={}), 422, "scores", "required")
    assert_problem(
        client.post(f"{BASE}/predict", json={"scores": [1], "version": True}), 422, "version"
    )
    assert_problem(
        client.post(f"{BASE}/predict?version=2", json={"scores": [1], "version": 1}),
        422,
        "version",
    )
    assert_problem(
        client.post(f"{BASE}/predict", json={"scores": [1], "version": "0"}), 404, "version 0"
    )
    r = client.post(f"{BASE}/predict", content=b"scores=1", headers={"content-type": "text/plain"})
    assert_problem(r, 415, "text/plain")


def test_huge_margins_give_finite_probabilities(client: TestClient) -> None:
    fit(client)
    r = client.post(f"{BASE}/predict", json={"scores": [1e300, -1e300, 0.0]})
    p = r.json()["probabilities"]
    assert p[0] == 1.0 or p[0] > 0.999999
    assert 0.0 <= p[1] < 1e-6
    assert all(0.0 <= x <= 1.0 for x in p)


def test_empty_score_list_predicts_nothing(client: TestClient) -> None:
    fit(client)
    r = client.post(f"{BASE}/predict", json={"scores": []})
    assert r.status_code == 200
    assert r.json()["probabilities"] == []


def test_intervals_are_refused_for_methods_without_them(client: TestClient) -> None:
    fit(client, "platt")
    body = assert_problem(
        client.post(f"{BASE}/predict", json={"scores": [0.5], "intervals": True}),
        422,
        "intervals",
        "uses platt",
        "only venn_abers",
    )
    assert body["errors"][0]["loc"] == ["body", "intervals"]
    assert_problem(
        client.post(f"{BASE}/predict?intervals=true", json={"scores": [0.5]}), 422, "uses platt"
    )
    assert_problem(
        client.post(f"{BASE}/predict", json={"scores": [0.5], "intervals": "yes"}),
        422,
        "intervals",
        "true or false",
    )
    assert_problem(
        client.post(f"{BASE}/predict?intervals=false", json={"scores": [0.5], "intervals": True}),
        422,
        "intervals",
        "query says False",
    )
    # false, or absent, changes nothing
    plain = client.post(f"{BASE}/predict", json={"scores": [0.5]}).json()
    off = client.post(f"{BASE}/predict", json={"scores": [0.5], "intervals": False}).json()
    assert off == plain
    assert "intervals" not in off
