"""``POST …/versions/{selector}/estimate`` (API.md, Traffic): expected performance and the EM
prior of an unlabelled batch, against formulas written out here and the likelihood maximised
by scipy; the training prior weighted as the version was fitted; nothing stored or logged."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import expit

from tests.client import TestClient

from .helpers import assert_problem

BASE = "/v1/calibrators/shift"


def _fit(client: TestClient, weights: list[float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=2_000)
    y = (rng.random(x.size) < expit(2 * x - 1)).astype(int)
    body = {"scores": x.round(6).tolist(), "labels": y.tolist(), "method": "platt"}
    if weights is not None:
        body["sample_weight"] = weights
    assert client.post(f"{BASE}/fit", json=body).status_code == 201
    return x, y


def test_the_estimate_of_a_batch_is_cbpe_of_its_probabilities(client: TestClient) -> None:
    _, y = _fit(client)
    rng = np.random.default_rng(1)
    fresh = rng.normal(0.8, 1.0, size=3_000).round(6)  # more positives than in training
    answer = client.post(
        f"{BASE}/versions/latest/estimate", json={"scores": fresh.tolist(), "threshold": 0.4}
    )
    assert answer.status_code == 200, answer.text
    found = answer.json()
    p = np.array(
        client.post(f"{BASE}/predict", json={"scores": fresh.tolist()}).json()["probabilities"]
    )
    e = found["estimated"]
    assert (found["version"], found["n_predictions"], found["threshold"]) == (1, 3_000, 0.4)
    predicted = p > 0.4
    tp, fp, fn = p[predicted].sum(), (1 - p)[predicted].sum(), p[~predicted].sum()
    assert e["positive_rate"] == pytest.approx(p.mean(), abs=1e-12)
    assert e["accuracy"] == pytest.approx((tp + (1 - p)[~predicted].sum()) / p.size, abs=1e-12)
    assert e["precision"] == pytest.approx(tp / predicted.sum(), abs=1e-12)
    assert e["recall"] == pytest.approx(tp / (tp + fn), abs=1e-12)
    assert e["f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn), abs=1e-12)
    assert e["brier"] == pytest.approx(np.mean(p * (1 - p)), abs=1e-12)
    assert set(e["intervals"]) == set(e) - {"intervals"}
    spread = p * (1 - p)  # each label's variance: the bands' exact half-widths
    logit = np.log(p) - np.log1p(-p)
    for key, variance in (
        ("accuracy", spread.sum() / p.size**2),
        ("precision", spread[predicted].sum() / predicted.sum() ** 2),
        ("log_loss", (spread * logit**2).sum() / p.size**2),
    ):
        low, high = e["intervals"][key]
        assert (high - low) / 2 == pytest.approx(1.959964 * np.sqrt(variance), rel=1e-6), key
    prior = found["prior"]
    assert prior["training"] == pytest.approx(y.mean(), abs=1e-12)
    training = y.mean()

    def negative_log_likelihood(q: float) -> float:
        return -float(np.log(q / training * p + (1 - q) / (1 - training) * (1 - p)).sum())

    best = minimize_scalar(
        negative_log_likelihood, bounds=(1e-6, 1 - 1e-6), method="bounded", options={"xatol": 1e-12}
    )
    assert prior["estimated"] == pytest.approx(best.x, abs=1e-6)
    assert prior["interval"][0] < prior["estimated"] < prior["interval"][1]
    assert prior["estimated"] > prior["training"] + 0.1  # the shift is found


def test_the_training_prior_is_weighted_as_the_version_was_fitted(client: TestClient) -> None:
    rng = np.random.default_rng(2)
    weights = rng.uniform(0.5, 3.0, size=2_000).round(3)
    _, y = _fit(client, weights.tolist())
    found = client.post(f"{BASE}/versions/1/estimate", json={"scores": [0.1, 2.0]}).json()
    assert found["prior"]["training"] == pytest.approx((weights * y).sum() / weights.sum())
    assert found["threshold"] == 0.5


def test_bad_estimates_are_422_and_nothing_is_stored(client: TestClient) -> None:
    _fit(client)
    url = f"{BASE}/versions/latest/estimate"
    assert_problem(client.post(url, json={"scores": [0.1, None]}), 422, "scores[1]")
    assert_problem(client.post(url, json={"scores": [0.1], "threshold": 2}), 422, "threshold")
    assert_problem(client.post(url, json={"scores": [[0.1, 0.2]], "threshold": 0.5}), 422)
    assert client.post(f"{BASE}/versions/9/estimate", json={"scores": [0.1]}).status_code == 404
    assert [v["version"] for v in client.get(BASE).json()["versions"]] == [1]


def test_a_multiclass_estimate_has_accuracy_log_loss_brier_and_prior_vectors(
    client: TestClient,
) -> None:
    rng = np.random.default_rng(3)
    z = rng.normal(size=(600, 3))
    y = z.argmax(axis=1)
    fit = client.post(
        "/v1/calibrators/three/fit",
        json={"scores": z.round(6).tolist(), "labels": y.tolist(), "method": "temperature"},
    )
    assert fit.status_code == 201, fit.text
    fresh = rng.normal(size=(500, 3)).round(6)
    found = client.post(
        "/v1/calibrators/three/versions/latest/estimate", json={"scores": fresh.tolist()}
    ).json()
    P = np.array(
        client.post("/v1/calibrators/three/predict", json={"scores": fresh.tolist()}).json()[
            "probabilities"
        ]
    )
    assert set(found["estimated"]) == {"accuracy", "log_loss", "brier", "intervals"}
    assert found["estimated"]["accuracy"] == pytest.approx(P.max(axis=1).mean(), abs=1e-12)
    assert found["estimated"]["brier"] == pytest.approx(np.mean(1 - (P**2).sum(1)), abs=1e-12)
    assert found["threshold"] is None
    prior = found["prior"]
    assert prior["training"] == pytest.approx(np.bincount(y, minlength=3) / y.size)
    assert len(prior["estimated"]) == len(prior["interval"]) == 3
    assert sum(prior["estimated"]) == pytest.approx(1.0)
