"""Multiclass over HTTP: n x k scores in, n x k probabilities out, top-label diagnostics."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.calibration import calibration_curve
from sklearn.metrics import log_loss

from app.calibration import MAX_CLASSES
from tests.client import TestClient

from .helpers import FEW_RESAMPLES, assert_problem

BASE = "/v1/calibrators/digits"


def logits_batch(
    n: int = 600, k: int = 3, seed: int = 0, temperature: float = 2.5
) -> dict[str, Any]:
    """Logits z and labels drawn from softmax(z / temperature): overconfident logits."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 3.0, size=(n, k))
    p = np.exp(z / temperature)
    p /= p.sum(axis=1, keepdims=True)
    y = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    return {"scores": z.round(6).tolist(), "labels": y.tolist()}


def test_temperature_fit_predict_and_diagnostics(client: TestClient) -> None:
    batch = logits_batch()
    r = client.post(f"{BASE}/fit", json={**batch, "method": "temperature"})
    assert r.status_code == 201, r.text
    v = r.json()
    assert v["n_classes"] == 3
    assert v["n_positive"] is None
    assert v["class_counts"] == np.bincount(batch["labels"], minlength=3).tolist()
    # labels were drawn at temperature 2.5: the fitted T recovers it roughly
    temperature = v["fitted"]["T"]
    assert temperature > 1.8
    assert temperature < 3.5
    assert v["metrics"]["cv"]["log_loss"] < v["metrics"]["raw"]["log_loss"]
    z = np.array(batch["scores"][:5])
    p = np.array(
        client.post(f"{BASE}/predict", json={"scores": z.tolist()}).json()["probabilities"]
    )
    expected = np.exp(z / v["fitted"]["T"] - (z / v["fitted"]["T"]).max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(p, expected, rtol=1e-10)
    few = {"bootstrap": FEW_RESAMPLES}
    d = client.get(f"{BASE}/versions/1/diagnostics", params=few).json()
    assert d["class_index"] is None
    assert len(d["calibrated"]["bins"]) == 10
    assert {"brier", "log_loss", "accuracy", "ece"} <= d["calibrated"]["metrics"].keys()
    one = client.get(f"{BASE}/versions/1/diagnostics", params={"class_index": 2, **few}).json()
    assert one["class_index"] == 2
    assert_problem(client.get(f"{BASE}/versions/1/diagnostics?class_index=3"), 422, "class_index")


def test_posted_multiclass_diagnostics_match_scikit_learn(client: TestClient) -> None:
    assert (
        client.post(f"{BASE}/fit", json={**logits_batch(), "method": "temperature"}).status_code
        == 201
    )
    fresh = logits_batch(800, seed=5)
    d = client.post(f"{BASE}/versions/latest/diagnostics", json=fresh).json()  # the default
    p = np.array(
        client.post(f"{BASE}/predict", json={"scores": fresh["scores"]}).json()["probabilities"]
    )
    y = np.array(fresh["labels"])
    assert abs(d["calibrated"]["metrics"]["log_loss"] - log_loss(y, p, labels=[0, 1, 2])) < 1e-9
    confidence, correct = p.max(axis=1), (p.argmax(axis=1) == y).astype(int)
    prob_true, prob_pred = calibration_curve(correct, confidence, n_bins=10)
    bins = [b for b in d["calibrated"]["bins"] if b["count"] > 0]
    np.testing.assert_allclose([b["fraction_positive"] for b in bins], prob_true, atol=1e-12)
    np.testing.assert_allclose([b["mean_predicted"] for b in bins], prob_pred, atol=1e-12)
    assert abs(d["calibrated"]["metrics"]["accuracy"] - correct.mean()) < 1e-12


def test_one_vs_rest_platt_and_csv_multiclass(client: TestClient) -> None:
    batch = logits_batch(300, seed=2)
    rows = ["score_0,score_1,score_2,label"] + [
        ",".join(map(str, s)) + f",{y}"
        for s, y in zip(batch["scores"], batch["labels"], strict=True)
    ]
    r = client.post(
        f"{BASE}/fit?method=platt", content="\n".join(rows), headers={"content-type": "text/csv"}
    )
    assert r.status_code == 201, r.text
    assert r.json()["method"] == "platt"
    assert len(r.json()["fitted"]["one_vs_rest"]) == 3
    p = np.array(
        client.post(f"{BASE}/predict", json={"scores": batch["scores"][:20]}).json()[
            "probabilities"
        ]
    )
    assert p.shape == (20, 3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)


def test_shape_and_method_mismatches_are_422(client: TestClient) -> None:
    batch = logits_batch(120)
    assert_problem(
        client.post(f"{BASE}/fit", json={**batch, "method": "minmax"}), 422, "matrix", "binary"
    )
    assert_problem(
        client.post(
            f"{BASE}/fit",
            json={"scores": [0.1, 0.5, 0.9], "labels": [0, 1, 1], "method": "bostrom"},
        ),
        422,
        "vector",
        "multiclass",
    )
    assert_problem(
        client.post(f"{BASE}/fit", json={**batch, "labels": [3, *batch["labels"][1:]]}),
        422,
        "labels[0]",
    )
    assert_problem(
        client.post(f"{BASE}/fit", json={**batch, "method": "bostrom"}), 422, "probability"
    )
    assert client.post(f"{BASE}/fit", json={**batch, "method": "temperature"}).status_code == 201
    assert_problem(client.post(f"{BASE}/predict", json={"scores": [0.1, 0.2]}), 422, "3 classes")
    assert_problem(
        client.post(f"{BASE}/predict", json={"scores": [[0.1, 0.2]]}), 422, "n x 2", "3 classes"
    )
    refused = assert_problem(
        client.post(
            "/v1/calibrators/b/fit",
            json={"scores": [0.2, 1.0, 0.5, 0.7], "labels": [0, 1, 0, 1], "method": "beta"},
        ),
        422,
        "scores[1] is 1.0; beta calibration needs scores strictly between 0 and 1",
    )
    assert refused["errors"][0]["loc"] == ["body", "scores", 1]


def test_one_class_limit_on_v1_and_v2(client: TestClient) -> None:
    """MAX_CLASSES score columns are the most a fit takes on /v1, as /v2's shapes; nothing past
    it is fitted or stored. (A prediction past it is refused as any shape but its version's.)"""
    k = MAX_CLASSES + 1
    rows = [[0.0] * k for _ in range(2)]
    fit = {"scores": rows, "labels": [0, 1], "method": "temperature"}
    body = assert_problem(client.post(f"{BASE}/fit", json=fit), 422, f"{k} class columns")
    assert body["errors"][0]["loc"] == ["body", "scores"]
    assert client.get(BASE).status_code == 404  # nothing stored
    tensor = {"name": "scores", "datatype": "FP64", "shape": [1, k], "data": [0.0] * k}
    v2 = client.post("/v2/models/m/infer", json={"inputs": [tensor]})
    assert v2.status_code == 400, v2.text  # the Open Inference Protocol: 400, {"error": ...}
    assert v2.json() == {"error": f"inputs[0].shape has {k} classes; at most {MAX_CLASSES}"}
    tensor = {**tensor, "shape": [1, MAX_CLASSES], "data": [0.0] * MAX_CLASSES}
    at_limit = client.post("/v2/models/m/infer", json={"inputs": [tensor]})
    assert at_limit.status_code == 404, at_limit.text  # the shape passes; no model m
