"""``POST …/versions/{selector}/adjust`` (API.md, Traffic): a new version whose probabilities
are the parent's corrected to new priors by Bayes' rule, on SQLite and PostgreSQL. Every number
is checked against a reference computed here: Bayes' rule written out in numpy and, for binary
versions, the closed form logit(q) = logit(p) + log(pi' (1 - pi) / (pi (1 - pi'))); the
metrics against scikit-learn's on the fitting batch reweighted by hand; predict against the
parent's predict adjusted, bit for bit; the ONNX export in onnxruntime."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from scipy.special import expit, logit
from sklearn.metrics import brier_score_loss, log_loss

from app.access.api_keys import required_scope
from app.calibration import adjust
from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch

BASE = "/v1/calibrators/churn"


def _fit(client: TestClient, method: str = "platt", weighted: bool = True, n: int = 1_000) -> None:
    body: dict[str, Any] = {**sigmoid_batch(n), "method": method}
    if weighted:
        body["sample_weight"] = np.random.default_rng(3).uniform(0.5, 2.0, n).round(3).tolist()
    fit = client.post(f"{BASE}/fit", json=body)
    assert fit.status_code == 201, fit.text


def _fit_three(client: TestClient, method: str = "temperature") -> np.ndarray:
    rng = np.random.default_rng(1)
    z = rng.normal(size=(600, 3)) * 2.0
    y = np.array([rng.choice(3, p=row) for row in expit(z) / expit(z).sum(1, keepdims=True)])
    body = {"scores": z.round(6).tolist(), "labels": y.tolist(), "method": method}
    fit = client.post("/v1/calibrators/three/fit", json=body)
    assert fit.status_code == 201, fit.text
    return z.round(6)


def _stored(client: TestClient, name: str, version: int) -> Any:
    service = client.app.state.service  # type: ignore[attr-defined]
    with service.database.transaction() as repo:
        return service.diagnosis.fitting_batch(repo.get_version(name, version), repo)


def _predict(client: TestClient, name: str, version: int, scores: Any, **more: Any) -> Any:
    r = client.post(
        f"/v1/calibrators/{name}/predict",
        json={"scores": scores, **more},
        params={"version": version},
    )
    assert r.status_code == 200, r.text
    return r.json()


def _versions(client: TestClient, name: str) -> int:
    return int(client.get(f"/v1/calibrators/{name}").json()["total"])


def test_a_binary_prior_moves_the_probabilities_by_bayes_rule(client: TestClient) -> None:
    _fit(client)
    y = np.array(sigmoid_batch(1_000)["labels"])
    w = np.random.default_rng(3).uniform(0.5, 2.0, 1_000).round(3)
    r = client.post(
        f"{BASE}/versions/1/adjust",
        json={"prior": 0.08, "description": "spring", "tags": {"why": "base rate"}},
    )
    assert r.status_code == 201, r.text
    assert r.headers["location"] == f"{BASE}/versions/2"
    v2 = r.json()
    pi = float((w * y).sum() / w.sum())  # the weighted training prior
    assert v2["source"] == {
        "adjusted": {
            "parent_version": 1,
            "prior_from": pytest.approx(pi, abs=1e-15),
            "prior_to": 0.08,
            "estimated_from": None,
        }
    }
    v1 = client.get(f"{BASE}/versions/1").json()
    for same in ("method", "params", "n_samples", "n_positive", "n_classes", "class_counts"):
        assert v2[same] == v1[same], same
    assert (v2["version"], v2["description"], v2["tags"]) == (2, "spring", {"why": "base rate"})
    assert client.get(f"{BASE}/versions/2").json() == v2

    scores = np.linspace(-8, 8, 401).round(6).tolist()
    p = np.array(_predict(client, "churn", 1, scores)["probabilities"])
    q = np.array(_predict(client, "churn", 2, scores)["probabilities"])
    closed = expit(logit(p) + np.log(0.08 * (1 - pi) / (pi * (1 - 0.08))))
    np.testing.assert_allclose(q, closed, rtol=1e-12, atol=1e-15)
    brute = p * 0.08 / pi / (p * 0.08 / pi + (1 - p) * 0.92 / (1 - pi))
    np.testing.assert_allclose(q, brute, rtol=1e-13, atol=1e-16)
    step = v2["fitted"]["adjustments"][-1]
    assert np.array_equal(q, adjust(p, np.array(step["prior_from"]), np.array(step["prior_to"])))
    assert step["prior_to"] == [0.92, 0.08]
    assert {k: v for k, v in v2["fitted"].items() if k != "adjustments"} == v1["fitted"]
    # latest is the new version; the estimate reads its training prior as the one adjusted to
    assert _predict(client, "churn", "latest", [0.3])["version"] == 2  # type: ignore[arg-type]
    est = client.post(f"{BASE}/versions/2/estimate", json={"scores": [0.1, 2.0]}).json()
    assert est["prior"]["training"] == pytest.approx(0.08, abs=1e-15)


def test_its_batch_and_metrics_are_the_parents_reweighted_to_the_new_prior(
    client: TestClient,
) -> None:
    _fit(client)
    assert client.post(f"{BASE}/versions/1/adjust", json={"priors": [0.7, 0.3]}).status_code == 201
    parent, child = _stored(client, "churn", 1), _stored(client, "churn", 2)
    y = np.asarray(parent.labels)
    w = np.asarray(parent.weights)
    pi = np.bincount(y, weights=w) / w.sum()
    ratio = np.array([0.7, 0.3]) / pi
    p = np.asarray(parent.out_of_fold)
    q = p * ratio[1] / (p * ratio[1] + (1 - p) * ratio[0])
    importance = w * ratio[y]
    assert np.array_equal(np.asarray(child.labels), y)
    assert np.array_equal(np.asarray(child.scores), np.asarray(parent.scores))
    np.testing.assert_allclose(np.asarray(child.out_of_fold), q, rtol=1e-14, atol=1e-17)
    np.testing.assert_allclose(np.asarray(child.weights), importance, rtol=1e-15)
    shares = np.bincount(y, weights=importance) / importance.sum()
    np.testing.assert_allclose(shares, [0.7, 0.3], rtol=1e-14)  # the batch now has the new prior
    cv = client.get(f"{BASE}/versions/2").json()["metrics"]["cv"]
    assert cv["log_loss"] == pytest.approx(log_loss(y, q, sample_weight=importance), rel=1e-10)
    assert cv["brier"] == pytest.approx(brier_score_loss(y, q, sample_weight=importance), rel=1e-10)
    low, high = cv["intervals"]["log_loss"]
    assert low < cv["log_loss"] < high
    # the diagnostics of the new version read that batch: its adjusted predictions, reweighted
    d = client.get(f"{BASE}/versions/2/diagnostics", params={"bootstrap": 0}).json()
    assert d["calibrated"]["metrics"]["log_loss"] == pytest.approx(cv["log_loss"], rel=1e-10)
    decision = client.get(f"{BASE}/versions/2/decision", params={"cost_fn": 3}).json()
    cost = (importance * ((q > 0.25) & (y == 0)) + 3 * importance * ((q <= 0.25) & (y == 1))).sum()
    assert decision["expected_cost"] == pytest.approx(cost / importance.sum(), rel=1e-10)


def test_k_class_priors_and_their_metrics(client: TestClient) -> None:
    z = _fit_three(client)
    r = client.post(
        "/v1/calibrators/three/versions/latest/adjust", json={"priors": [0.5, 0.3, 0.2]}
    )
    assert r.status_code == 201, r.text
    source = r.json()["source"]["adjusted"]
    parent = _stored(client, "three", 1)
    y = np.asarray(parent.labels)
    pi = np.bincount(y, minlength=3) / y.size
    np.testing.assert_allclose(source["prior_from"], pi, rtol=1e-15)
    assert source["prior_to"] == [0.5, 0.3, 0.2]
    p = np.array(_predict(client, "three", 1, z[:50].tolist())["probabilities"])
    q = np.array(_predict(client, "three", 2, z[:50].tolist())["probabilities"])
    brute = p * (np.array([0.5, 0.3, 0.2]) / pi)
    brute /= brute.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(q, brute, rtol=1e-13, atol=1e-16)
    step = r.json()["fitted"]["adjustments"][0]
    assert np.array_equal(q, adjust(p, np.array(step["prior_from"]), np.array(step["prior_to"])))
    oof = np.asarray(parent.out_of_fold) * (np.array([0.5, 0.3, 0.2]) / pi)
    oof /= oof.sum(axis=1, keepdims=True)
    importance = (np.array([0.5, 0.3, 0.2]) / pi)[y]
    cv = r.json()["metrics"]["cv"]
    reference = log_loss(y, oof, sample_weight=importance, labels=[0, 1, 2])
    assert cv["log_loss"] == pytest.approx(reference, rel=1e-10)


def test_venn_abers_intervals_are_corrected_and_still_hold_the_probability(
    client: TestClient,
) -> None:
    _fit(client, "venn_abers", weighted=False)
    assert client.post(f"{BASE}/versions/1/adjust", json={"prior": 0.9}).status_code == 201
    scores = np.linspace(-6, 6, 121).round(6).tolist()
    parent = _predict(client, "churn", 1, scores, intervals=True)
    child = _predict(client, "churn", 2, scores, intervals=True)
    step = client.get(f"{BASE}/versions/2").json()["fitted"]["adjustments"][0]
    frm, to = np.array(step["prior_from"]), np.array(step["prior_to"])
    p0, p1 = np.array(parent["intervals"]).T
    q0, q1 = np.array(child["intervals"]).T
    assert np.array_equal(q0, adjust(p0, frm, to))
    assert np.array_equal(q1, adjust(p1, frm, to))
    q = np.array(child["probabilities"])
    assert np.all((q0 <= q) & (q <= q1))
    assert np.mean(q) > np.mean(parent["probabilities"])  # moved towards the prior of 0.9


def test_adjusting_an_adjusted_version_composes(client: TestClient) -> None:
    _fit(client)
    client.put(f"{BASE}/aliases/production", json={"version": 1})
    assert (
        client.post(f"{BASE}/versions/production/adjust", json={"prior": 0.08}).status_code == 201
    )
    third = client.post(f"{BASE}/versions/2/adjust", json={"prior": 0.3})
    assert third.status_code == 201, third.text
    source = third.json()["source"]["adjusted"]
    assert (source["parent_version"], source["prior_from"], source["prior_to"]) == (2, 0.08, 0.3)
    steps = third.json()["fitted"]["adjustments"]
    assert len(steps) == 2
    assert steps[1]["prior_from"] == steps[0]["prior_to"]
    scores = np.linspace(-5, 5, 51).round(6).tolist()
    p1, p2, p3 = (
        np.array(_predict(client, "churn", v, scores)["probabilities"]) for v in (1, 2, 3)
    )
    assert np.array_equal(
        p3, adjust(p2, np.array(steps[1]["prior_from"]), np.array(steps[1]["prior_to"]))
    )
    once = adjust(p1, np.array(steps[0]["prior_from"]), np.array([0.7, 0.3]))
    np.testing.assert_allclose(p3, once, rtol=1e-13)  # as if adjusted to 0.3 at once
    # the Open Inference Protocol answers the same floats
    tensor = {"name": "scores", "datatype": "FP64", "shape": [len(scores)], "data": scores}
    infer = client.post("/v2/models/churn/versions/3/infer", json={"inputs": [tensor]})
    assert infer.status_code == 200, infer.text
    assert infer.json()["outputs"][0]["data"] == p3.tolist()
    # aliases stay where they were; the new versions have none
    calibrator = client.get(BASE).json()
    assert calibrator["aliases"] == {"production": 1}
    assert third.json()["aliases"] == []


def test_the_onnx_export_is_the_parents_graph_then_the_bayes_step(client: TestClient) -> None:
    _fit(client, "isotonic")
    assert client.post(f"{BASE}/versions/1/adjust", json={"prior": 0.2}).status_code == 201
    scores = np.concatenate([np.linspace(-9, 9, 301), [0.0, -1e6, 1e6]]).round(6)
    want = np.array(_predict(client, "churn", 2, scores.tolist())["probabilities"])
    for dtype, bound in (("float64", 1e-12), ("float32", 2.0**-25 + 1e-12)):
        r = client.get(f"{BASE}/versions/2/artifact", params={"format": "onnx", "dtype": dtype})
        assert r.status_code == 200, r.text
        assert float(r.headers["x-parity-max-abs-diff"]) <= bound
        session = ort.InferenceSession(r.content, providers=["CPUExecutionProvider"])
        given = scores.astype(np.float32 if dtype == "float32" else np.float64)
        (got,) = session.run(None, {"scores": given})
        if dtype == "float64":
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        else:
            reference = _predict(client, "churn", 2, given.astype(np.float64).tolist())
            np.testing.assert_allclose(got, reference["probabilities"], rtol=0, atol=bound)


@pytest.mark.parametrize(
    ("body", "loc", "fragment"),
    [
        ({"prior": 0}, ["body", "prior"], "strictly between 0 and 1"),
        ({"prior": 1.0}, ["body", "prior"], "strictly between 0 and 1"),
        ({"prior": 1.5}, ["body", "prior"], "not 1.5"),
        ({"prior": -0.1}, ["body", "prior"], "strictly between"),
        ({"prior": "NaN"}, ["body", "prior"], "not a string"),
        ({"prior": True}, ["body", "prior"], "not a boolean"),
        ({"prior": [0.5]}, ["body", "prior"], "not an array"),
        ({"prior": 10**30}, ["body", "prior"], "not 1e+30"),
        ({"prior": 1e-13}, ["body", "prior"], "under 1e-12"),
        ({}, ["body", "prior"], "required"),
        ({"prior": None}, ["body", "prior"], "required"),
        ({"priors": [0.5, 0.6]}, ["body", "priors"], "must sum to 1"),
        ({"priors": [0.9, 0.1, 0.0]}, ["body", "priors", 2], "strictly between"),
        ({"priors": [0.2, 0.3, 0.5]}, ["body", "priors"], "calibrates 2 classes"),
        ({"priors": [0.5]}, ["body", "priors"], ""),
        ({"priors": "0.5,0.5"}, ["body", "priors"], "array"),
        ({"prior": 0.1, "priors": [0.9, 0.1]}, ["body", "priors"], "send one of them"),
        ({"prior": 0.1, "since": "2026-01-01T00:00:00Z"}, ["body", "since"], "traffic"),
        ({"prior": 0.1, "method": "platt"}, ["body", "method"], "not a known field"),
        ({"prior": 0.1, "tags": {"a": 1}}, ["body", "tags", "a"], "string"),
        (
            {"prior": "traffic", "since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
            ["body", "since"],
            "before until",
        ),
        ({"prior": "traffic", "since": "2020-01-01T00:00:00Z"}, ["body", "since"], "windows"),
        ({"prior": "traffic", "until": "yesterday"}, ["body", "until"], ""),
    ],
)
def test_bad_priors_are_422_naming_the_field_and_nothing_is_stored(
    fitted: TestClient, body: dict[str, Any], loc: list[Any], fragment: str
) -> None:
    problem = assert_problem(fitted.post(f"{BASE}/versions/1/adjust", json=body), 422, fragment)
    assert problem["errors"][0]["loc"] == loc
    assert _versions(fitted, "churn") == 1


@pytest.mark.parametrize(
    ("content", "status"),
    [
        (b'{"prior": NaN}', 422),
        (b'{"prior": Infinity}', 422),
        (b'{"prior": 1e999}', 422),
        (b'{"prior": 1' + b"0" * 400 + b"}", 400),
        (b'{"prior": 0.1', 400),
        (b"[0.1]", 400),
        (b"", 400),
        (b'{"prior": "\\ud800"}', 400),
        (b'{"priors": [' + b"0.5," * 70_000 + b"0.5]}", 422),
    ],
)
def test_malformed_bodies_are_never_a_500(fitted: TestClient, content: bytes, status: int) -> None:
    r = fitted.post(
        f"{BASE}/versions/1/adjust", content=content, headers={"content-type": "application/json"}
    )
    assert_problem(r, status)
    assert _versions(fitted, "churn") == 1
    r = fitted.post(f"{BASE}/versions/1/adjust", content=b"prior=0.1")
    assert_problem(r, 415)


def test_priors_that_do_not_fit_a_k_class_version_are_422(client: TestClient) -> None:
    _fit_three(client)
    url = "/v1/calibrators/three/versions/1/adjust"
    problem = assert_problem(client.post(url, json={"prior": 0.2}), 422, "3 classes", "priors")
    assert problem["errors"][0]["loc"] == ["body", "prior"]
    problem = assert_problem(client.post(url, json={"priors": [0.5, 0.5]}), 422, "3 classes")
    assert problem["errors"][0]["loc"] == ["body", "priors"]
    problem = assert_problem(client.post(url, json={"priors": [0.5, 0.5 - 1e-13, 1e-13]}), 422)
    assert problem["errors"][0]["loc"] == ["body", "priors", 2]
    assert _versions(client, "three") == 1


def test_unknown_calibrators_versions_and_aliases_are_404(fitted: TestClient) -> None:
    for url in (
        "/v1/calibrators/nobody/versions/1/adjust",
        f"{BASE}/versions/7/adjust",
        f"{BASE}/versions/staging/adjust",
        f"{BASE}/versions/99999999999999999999999/adjust",
    ):
        assert_problem(fitted.post(url, json={"prior": 0.2}), 404)
    assert _versions(fitted, "churn") == 1


def test_adjust_needs_the_write_scope() -> None:
    assert required_scope("POST", "/v1/calibrators/churn/versions/1/adjust") == "write"


def test_the_prior_of_the_logged_traffic(client: TestClient) -> None:
    _fit(client, weighted=False, n=2_000)
    url = f"{BASE}/versions/1/adjust"
    problem = assert_problem(client.post(url, json={"prior": "traffic"}), 422, "no prediction")
    assert problem["errors"][0]["loc"] == ["body", "prior"]
    rng = np.random.default_rng(5)
    fresh = rng.normal(1.0, 2.0, 3_000).round(6)  # more positives than in training
    ids = [f"id-{i}" for i in range(fresh.size)]
    logged = client.post(f"{BASE}/predict", json={"scores": fresh.tolist(), "ids": ids})
    assert logged.json()["logged"] == fresh.size
    client.app.state.service.prediction_log.flush()  # type: ignore[attr-defined]
    r = client.post(url, json={"prior": "traffic"})
    assert r.status_code == 201, r.text
    source = r.json()["source"]["adjusted"]
    found = source["estimated_from"]
    service = client.app.state.service  # type: ignore[attr-defined]
    since, until = (
        datetime.fromisoformat(found[end].replace("Z", "+00:00")) for end in ("since", "until")
    )
    assert until - since == timedelta(days=30)
    em = service.traffic.prior_estimate("churn", 1, since, until)
    assert (source["prior_to"], found["interval"]) == (em["estimated"][1], em["interval"][1])
    # the monitoring's EM reads binned probabilities: the exact EM of the same scores agrees
    estimate = client.post(f"{BASE}/versions/1/estimate", json={"scores": fresh.tolist()}).json()
    assert source["prior_to"] == pytest.approx(estimate["prior"]["estimated"], abs=1e-4)
    assert found["n_predictions"] == fresh.size
    low, high = found["interval"]
    assert low < source["prior_to"] < high
    assert source["prior_to"] > source["prior_from"] + 0.05
