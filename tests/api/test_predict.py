"""POST /predict: selectors, input order, freshness, bad input."""

from __future__ import annotations

import numpy as np

from app.calibration.methods.venn_abers import VennAbersCalibrator
from tests.client import TestClient

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
    by_query = assert_problem(
        client.post(f"{BASE}/predict?intervals=true", json={"scores": [0.5]}), 422, "uses platt"
    )
    assert by_query["errors"][0]["loc"] == ["query", "intervals"]
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
        "query says false",
    )
    # false, or absent, changes nothing
    plain = client.post(f"{BASE}/predict", json={"scores": [0.5]}).json()
    off = client.post(f"{BASE}/predict", json={"scores": [0.5], "intervals": False}).json()
    assert off == plain
    assert "intervals" not in off


def test_venn_abers_answers_its_interval_bit_for_bit(client: TestClient) -> None:
    batch = sigmoid_batch(300, seed=3)
    r = client.post(f"{BASE}/fit", json={**batch, "method": "venn_abers"})
    assert r.status_code == 201, r.text
    v = r.json()
    assert v["params"] == {"mode": "inductive"}
    reference = VennAbersCalibrator().fit(
        np.array(batch["scores"]), np.array(batch["labels"], dtype=float), np.ones(300)
    )
    scores = [-40.0, *batch["scores"][:5], 0.123, 40.0]
    for body, query in (
        ({"scores": scores, "intervals": True}, ""),
        ({"scores": scores}, "?intervals=true"),
    ):
        answer = client.post(f"{BASE}/predict{query}", json=body).json()
        p0, p1 = reference.predict_interval(np.array(scores))
        assert answer["probabilities"] == reference.predict(np.array(scores)).tolist()
        assert answer["intervals"] == np.stack([p0, p1], axis=1).tolist()
    p = np.array(answer["probabilities"])
    assert np.all((p0 <= p) & (p <= p1) & (p > 0) & (p < 1))


def test_one_vs_rest_venn_abers_intervals_are_n_by_k_by_2(client: TestClient) -> None:
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(90, 3)) * 2
    labels = np.argmax(logits + rng.gumbel(size=(90, 3)), axis=1)
    r = client.post(
        "/v1/calibrators/three/fit",
        json={"scores": logits.tolist(), "labels": labels.tolist(), "method": "venn_abers"},
    )
    assert r.status_code == 201, r.text
    answer = client.post(
        "/v1/calibrators/three/predict", json={"scores": logits[:4].tolist(), "intervals": True}
    ).json()
    intervals = np.array(answer["intervals"])
    assert intervals.shape == (4, 3, 2)
    assert np.all(intervals[..., 0] < intervals[..., 1])
    np.testing.assert_allclose(np.array(answer["probabilities"]).sum(axis=1), 1.0)


def test_bostrom_refuses_rows_that_are_not_probabilities_with_a_422(client: TestClient) -> None:
    rng = np.random.default_rng(8)
    p = rng.dirichlet(np.ones(3), size=120)
    labels = np.array([rng.choice(3, p=row) for row in p])
    r = client.post(
        "/v1/calibrators/forest/fit",
        json={"scores": p.tolist(), "labels": labels.tolist(), "method": "bostrom"},
    )
    assert r.status_code == 201, r.text
    for rows in ([[0.5, 0.5, 0.5]], [[0.0, 0.0, 0.0]], [[2.0, 0.0, 0.0]]):
        body = assert_problem(
            client.post("/v1/calibrators/forest/predict", json={"scores": rows}),
            422,
            "scores[0] is not a probability vector",
        )
        assert body["errors"][0]["loc"] == ["body", "scores", 0]
    batch = {"scores": [[0.5, 0.5, 0.5]], "labels": [0]}
    assert_problem(
        client.post("/v1/calibrators/forest/versions/1/diagnostics", json=batch), 422, "scores"
    )
    assert_problem(client.post("/v1/calibrators/forest/compare", json=batch), 422, "scores")


def test_an_auto_version_that_chose_venn_abers_gives_intervals(client: TestClient) -> None:
    # naive-Bayes-like scores: no sigmoid fits them, so auto picks the Venn-ABERS candidate
    rng = np.random.default_rng(11)
    z = rng.normal(size=2000) * 2
    y = (rng.random(2000) < 1 / (1 + np.exp(-(z**3) / 4 - 0.5 * z))).astype(int)
    scores = (1 / (1 + np.exp(-z))).tolist()
    r = client.post("/v1/calibrators/nb/fit", json={"scores": scores, "labels": y.tolist()})
    assert r.status_code == 201, r.text
    assert r.json()["method"] == "venn_abers"
    answer = client.post(
        "/v1/calibrators/nb/predict", json={"scores": scores[:50], "intervals": True}
    ).json()
    p, bounds = np.array(answer["probabilities"]), np.array(answer["intervals"])
    assert bounds.shape == (50, 2)
    assert np.all((bounds[:, 0] <= p) & (p <= bounds[:, 1]))
