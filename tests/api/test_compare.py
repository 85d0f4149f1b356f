"""POST /compare: a deliberately bad version loses, numbers match scikit-learn, nothing stored."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, log_loss

from tests.client import TestClient

from .helpers import FEW_RESAMPLES, assert_problem, sigmoid_batch

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
    r = client.post(f"{BASE}/compare", json=fresh)  # the default bootstrap, as a client asks
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
    few = {**fresh, "bootstrap": FEW_RESAMPLES}
    by_auc = client.post(f"{BASE}/compare?by=auc", json=few).json()
    assert by_auc["versions"][-1]["version"] == 2
    chosen = client.post(
        f"{BASE}/compare", json={**few, "versions": ["production", 1, "latest"]}
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
    assert_problem(
        client.post(f"{BASE}/compare", json={**batch, "versions": []}), 422, "versions", "at least"
    )
    for selector in (-1, 0, "no such/alias"):  # what the path's selector refuses, as it does
        assert_problem(
            client.post(f"{BASE}/compare", json={**batch, "versions": [selector]}),
            422,
            "versions[0]",
        )
    assert_problem(client.post(f"{BASE}/compare", json={"labels": [0, 1]}), 422, "scores")
    assert_problem(
        client.post(f"{BASE}/compare", json={"scores": [[0.2, 0.3, 0.5]], "labels": [1]}),
        422,
        "binary",
    )
    assert_problem(client.post("/v1/calibrators/nope/compare", json=batch), 404, "nope")


def predictions(client: TestClient, scores: list[float], version: int) -> np.ndarray:
    r = client.post(f"{BASE}/predict", json={"scores": scores, "version": version})
    return np.array(r.json()["probabilities"])


def test_paired_differences_match_a_hand_made_paired_bootstrap(client: TestClient) -> None:
    """The difference in log loss from the best, its paired 95% interval against a paired
    multinomial bootstrap made here (numpy, 4000 resamples, each end within 15% of the
    interval's width), and `significant` only when the interval excludes 0."""
    first, second = sigmoid_batch(800, seed=21), sigmoid_batch(800, seed=22)
    assert client.post(f"{BASE}/fit", json={**first, "method": "platt"}).status_code == 201
    assert client.post(f"{BASE}/fit", json={**second, "method": "platt"}).status_code == 201
    # a clearly worse one: too few bins
    worse = {**first, "method": "histogram_binning", "params": {"n_bins": 2}}
    assert client.post(f"{BASE}/fit", json=worse).status_code == 201
    fresh = sigmoid_batch(1500, seed=23)
    r = client.post(f"{BASE}/compare?bootstrap=2000", json=fresh)
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["bootstrap"] == 2000
    rows = result["versions"]
    best = rows[0]
    assert best["difference"] == {"value": 0.0, "interval": [0.0, 0.0]}
    assert best["significant"] is False
    y = np.array(fresh["labels"], dtype=float)

    def losses(version: int) -> np.ndarray:
        p = np.clip(predictions(client, fresh["scores"], version), 1e-15, 1 - 1e-15)
        return -(y * np.log(p) + (1 - y) * np.log(1 - p))

    rng = np.random.default_rng(0)
    draws = rng.integers(0, y.size, size=(4000, y.size))
    base = losses(best["version"])
    for row in rows[1:]:
        gap = losses(row["version"]) - base
        assert row["difference"]["value"] == pytest.approx(gap.mean(), abs=1e-9)
        low, high = np.quantile(gap[draws].mean(axis=1), [0.025, 0.975])
        got_low, got_high = row["difference"]["interval"]
        assert abs(got_low - low) < 0.15 * (high - low), (row, low, high)
        assert abs(got_high - high) < 0.15 * (high - low), (row, low, high)
        assert row["significant"] is (got_low > 0 or got_high < 0)
    by_version = {row["version"]: row for row in rows}
    assert by_version[3]["significant"] is True  # two bins lose, and the data say so
    assert rows[-1]["version"] == 3
    # two Platt fits on samples of one distribution: a gap the resamples cannot tell from 0
    platts = [row for row in rows if row["version"] in (1, 2) and row is not best]
    assert [row["significant"] for row in platts] == [False]
    off = client.post(f"{BASE}/compare?bootstrap=0", json=fresh).json()
    assert off["versions"][1]["difference"]["interval"] is None
    assert off["versions"][1]["significant"] is False


def test_one_row_tells_nothing_significant(client: TestClient) -> None:
    batch = sigmoid_batch(300, seed=31)
    for method in ("platt", "isotonic"):
        assert client.post(f"{BASE}/fit", json={**batch, "method": method}).status_code == 201
    r = client.post(f"{BASE}/compare", json={"scores": [0.1], "labels": [1]})
    assert r.status_code == 200, r.text
    assert [row["significant"] for row in r.json()["versions"]] == [False, False]
    few = client.post(f"{BASE}/compare?bootstrap=5", json=sigmoid_batch(200, seed=32)).json()
    assert few["versions"][1]["difference"]["interval"] is None  # 5 resamples place no 2.5%
    assert few["versions"][1]["significant"] is False
