"""POST /compare: a deliberately bad version loses, numbers match scikit-learn, nothing stored."""

from __future__ import annotations

import numpy as np
from fastapi.testclient import TestClient
from sklearn.metrics import brier_score_loss, log_loss

from .helpers import assert_problem, sigmoid_batch

BASE = "/v1/calibrators/churn"


def test_a_bad_version_loses_and_numbers_match_scikit_learn(client: TestClient) -> None:
    good = sigmoid_batch(2000, seed=1)
    # the same scores with flipped labels: a calibrator that maps high scores to low probability
    bad = {**good, "labels": [1 - y for y in good["labels"]]}
    assert client.post(f"{BASE}/fit", json={**good, "method": "platt"}).status_code == 201
    assert client.post(f"{BASE}/fit", json={**bad, "method": "platt"}).status_code == 201
    assert client.post(f"{BASE}/fit", json={**good, "method": "isotonic"}).status_code == 201
    client.put(f"{BASE}/aliases/production", json={"version": 1})
    fresh = sigmoid_batch(3000, seed=2)
    r = client.post(f"{BASE}/compare", json=fresh)
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["by"] == "log_loss"
    order = [v["version"] for v in result["versions"]]
    assert order[-1] == 2  # the flipped one is worst
    assert sorted(order) == [1, 2, 3]
    losses = [v["metrics"]["log_loss"] for v in result["versions"]]
    assert losses == sorted(losses)
    assert result["versions"][0]["delta"]["log_loss"] == 0.0
    worst = result["versions"][-1]
    assert worst["delta"]["log_loss"] > 0.5
    assert worst["metrics"]["auc"] < 0.5
    # independent numbers for version 1
    p = np.array(
        client.post(f"{BASE}/predict", json={"scores": fresh["scores"], "version": 1}).json()[
            "probabilities"
        ]
    )
    v1 = next(v for v in result["versions"] if v["version"] == 1)
    assert abs(v1["metrics"]["brier"] - brier_score_loss(fresh["labels"], p)) < 1e-12
    assert abs(v1["metrics"]["log_loss"] - log_loss(fresh["labels"], p)) < 1e-9
    raw = np.array(fresh["scores"])
    scaled = (raw - raw.min()) / (raw.max() - raw.min())
    assert abs(result["raw"]["brier"] - brier_score_loss(fresh["labels"], scaled)) < 1e-12
    # ranking by AUC puts the highest first; selectors (aliases too) pick and dedupe
    by_auc = client.post(f"{BASE}/compare?by=auc", json=fresh).json()
    assert by_auc["versions"][-1]["version"] == 2
    chosen = client.post(
        f"{BASE}/compare", json={**fresh, "versions": ["production", 1, "latest"]}
    ).json()
    assert sorted(v["version"] for v in chosen["versions"]) == [1, 3]
    assert client.get(BASE).json()["n_versions"] == 3  # nothing stored


def test_compare_bad_input(client: TestClient) -> None:
    batch = sigmoid_batch(100, seed=3)
    assert client.post(f"{BASE}/fit", json={**batch, "method": "platt"}).status_code == 201
    assert_problem(client.post(f"{BASE}/compare?by=speed", json=batch), 422, "by", "speed")
    assert_problem(
        client.post(f"{BASE}/compare", json={**batch, "versions": [9]}), 404, "version 9"
    )
    assert_problem(
        client.post(f"{BASE}/compare", json={**batch, "versions": list(range(1, 60))}),
        422,
        "the limit is 50",
    )
    assert_problem(client.post(f"{BASE}/compare", json={"labels": [0, 1]}), 422, "scores")
    assert_problem(
        client.post(f"{BASE}/compare", json={"scores": [[0.2, 0.3, 0.5]], "labels": [1]}),
        422,
        "binary",
    )
    assert_problem(client.post("/v1/calibrators/nope/compare", json=batch), 404, "nope")
