"""Predict's ``threshold`` (API.md, Predicting): ``decisions`` 1 where the probability exceeds
it, on the hot path and on the regular route, refused for multiclass calibrators before
anything is logged."""

from __future__ import annotations

import numpy as np
import pytest

from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch, spy_on_regular_predict

BASE = "/v1/calibrators/churn"


def test_decisions_are_the_probabilities_above_the_threshold(
    fitted: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    regular = spy_on_regular_predict(fitted, monkeypatch)
    scores = [-3.0, -0.5, 0.0, 0.2, 0.5, 4.0]
    small = fitted.post(f"{BASE}/predict", json={"scores": scores, "threshold": 0.4}).json()
    assert regular == []  # the hot path answered
    p = np.array(small["probabilities"])
    assert small["decisions"] == (p > 0.4).astype(int).tolist()
    assert 0 < sum(small["decisions"]) < len(scores)
    # a body too large for the hot path: the regular route, the same answer
    many = np.random.default_rng(0).normal(size=20_000).round(6).tolist()
    large = fitted.post(f"{BASE}/predict", json={"scores": many, "threshold": 0.4}).json()
    assert len(regular) == 1
    assert large["decisions"] == (np.array(large["probabilities"]) > 0.4).astype(int).tolist()
    plain = fitted.post(f"{BASE}/predict", json={"scores": scores}).json()
    assert "decisions" not in plain
    assert plain["probabilities"] == small["probabilities"]


def test_a_probability_at_the_threshold_is_not_decided_1(fitted: TestClient) -> None:
    p = fitted.post(f"{BASE}/predict", json={"scores": [0.3]}).json()["probabilities"][0]
    answer = fitted.post(f"{BASE}/predict", json={"scores": [0.3], "threshold": p}).json()
    assert answer["decisions"] == [0]


@pytest.mark.parametrize("threshold", [-0.1, 1.5, "half", None])
def test_a_threshold_out_of_range_is_422(fitted: TestClient, threshold: object) -> None:
    body = {"scores": [0.1], "threshold": threshold}
    r = fitted.post(f"{BASE}/predict", json=body)
    if threshold is None:  # null: not asked
        assert r.status_code == 200
        assert "decisions" not in r.json()
        return
    problem = assert_problem(r, 422, "threshold")
    assert problem["errors"][0]["loc"][:2] == ["body", "threshold"]


def test_a_threshold_for_a_multiclass_calibrator_is_422_and_logs_nothing(
    client: TestClient,
) -> None:
    rng = np.random.default_rng(1)
    z = rng.normal(size=(300, 3))
    y = z.argmax(axis=1)
    fit = client.post(
        "/v1/calibrators/three/fit",
        json={"scores": z.round(6).tolist(), "labels": y.tolist(), "method": "temperature"},
    )
    assert fit.status_code == 201, fit.text
    body = {"scores": z[:2].tolist(), "threshold": 0.5, "ids": ["a", "b"]}
    r = client.post("/v1/calibrators/three/predict", json=body)
    assert_problem(r, 422, "threshold", "binary")
    outcomes = client.post("/v1/calibrators/three/outcomes", json={"ids": ["a"], "labels": [1]})
    assert outcomes.json()["matched"] == 0


def test_threshold_with_ids_logs_and_decides(fitted: TestClient) -> None:
    batch = sigmoid_batch(4)
    body = {"scores": batch["scores"], "threshold": 0.5, "ids": ["a", "b", "c", "d"]}
    answer = fitted.post(f"{BASE}/predict", json=body).json()
    assert answer["logged"] == 4
    assert len(answer["decisions"]) == 4


def test_the_query_may_give_the_threshold_once_and_not_against_the_body(
    fitted: TestClient,
) -> None:
    scores = [-1.0, 0.0, 1.0]
    by_body = fitted.post(f"{BASE}/predict", json={"scores": scores, "threshold": 0.4}).json()
    by_query = fitted.post(f"{BASE}/predict?threshold=0.4", json={"scores": scores}).json()
    assert by_query["decisions"] == by_body["decisions"]
    both = fitted.post(f"{BASE}/predict?threshold=0.4", json={"scores": scores, "threshold": 0.4})
    assert both.json()["decisions"] == by_body["decisions"]
    differ = fitted.post(f"{BASE}/predict?threshold=0.6", json={"scores": scores, "threshold": 0.4})
    assert assert_problem(differ, 422, "0.6")["errors"][0]["loc"] == ["body", "threshold"]
    twice = fitted.post(f"{BASE}/predict?threshold=0.4&threshold=0.6", json={"scores": scores})
    assert assert_problem(twice, 422, "once")["errors"][0]["loc"] == ["query", "threshold"]
    for bad in ("1.5", "nan", "-0.1"):
        r = fitted.post(f"{BASE}/predict?threshold={bad}", json={"scores": scores})
        assert assert_problem(r, 422)["errors"][0]["loc"] == ["query", "threshold"]


def test_a_threshold_of_minus_zero_is_zero(fitted: TestClient) -> None:
    estimate = fitted.post(
        f"{BASE}/versions/latest/estimate", json={"scores": [0.1, 2.0], "threshold": -0.0}
    )
    assert estimate.status_code == 200, estimate.text
    assert str(estimate.json()["threshold"]) == "0.0"
    query = fitted.post(f"{BASE}/versions/latest/estimate?threshold=-0.0", json={"scores": [0.1]})
    assert str(query.json()["threshold"]) == "0.0"
