"""GET and POST diagnostics against scikit-learn's calibration_curve and metrics."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

from .helpers import assert_problem, sigmoid_batch

BASE = "/v1/calibrators/churn"


@pytest.fixture
def fitted(client: TestClient) -> dict[str, object]:
    r = client.post(f"{BASE}/fit", json={**sigmoid_batch(600, seed=11), "method": "platt"})
    assert r.status_code == 201
    body: dict[str, object] = r.json()
    return body


def test_stored_diagnostics_always_have_n_bins_rows(
    client: TestClient, fitted: dict[str, object]
) -> None:
    for n_bins in (2, 10, 37, 100):
        for strategy in ("uniform", "quantile"):
            r = client.get(
                f"{BASE}/versions/latest/diagnostics?n_bins={n_bins}&strategy={strategy}"
            )
            assert r.status_code == 200, r.text
            d = r.json()
            assert d["version"] == 1
            assert d["n_bins"] == n_bins
            assert d["strategy"] == strategy
            for part in ("calibrated", "raw"):
                bins = d[part]["bins"]
                assert len(bins) == n_bins
                assert sum(b["count"] for b in bins) == 600
                for b in bins:
                    if b["count"] == 0:
                        assert b["mean_predicted"] is None
                        assert b["fraction_positive"] is None
                    else:
                        assert b["ci_low"] <= b["fraction_positive"] <= b["ci_high"]
                assert {
                    "brier",
                    "log_loss",
                    "ece",
                    "mce",
                    "auc",
                    "reliability",
                    "resolution",
                    "uncertainty",
                } <= d[part]["metrics"].keys()


def test_posted_batch_diagnostics_match_scikit_learn(
    client: TestClient, fitted: dict[str, object]
) -> None:
    fresh = sigmoid_batch(1000, seed=99)
    r = client.post(f"{BASE}/versions/1/diagnostics", json={**fresh, "n_bins": 10})
    assert r.status_code == 200, r.text
    d = r.json()
    p = np.array(
        client.post(f"{BASE}/predict", json={"scores": fresh["scores"], "version": 1}).json()[
            "probabilities"
        ]
    )
    y = np.array(fresh["labels"])
    prob_true, prob_pred = calibration_curve(y, p, n_bins=10, strategy="uniform")
    bins = [b for b in d["calibrated"]["bins"] if b["count"] > 0]
    np.testing.assert_allclose([b["fraction_positive"] for b in bins], prob_true, atol=1e-12)
    np.testing.assert_allclose([b["mean_predicted"] for b in bins], prob_pred, atol=1e-12)
    m = d["calibrated"]["metrics"]
    assert abs(m["brier"] - brier_score_loss(y, p)) < 1e-12
    assert abs(m["log_loss"] - log_loss(y, p)) < 1e-9
    assert abs(m["auc"] - roc_auc_score(y, p)) < 1e-12
    # ECE by definition over the same bins.
    counts = np.array([b["count"] for b in bins])
    ece = np.sum(counts / counts.sum() * np.abs(prob_true - prob_pred))
    assert abs(m["ece"] - ece) < 1e-12
    # Nothing was stored by the POST.
    assert client.get(f"{BASE}").json()["n_versions"] == 1


def test_posted_diagnostics_bad_input(client: TestClient, fitted: dict[str, object]) -> None:
    url = f"{BASE}/versions/1/diagnostics"
    assert_problem(client.post(url, json={"scores": [0.1], "labels": [0, 1]}), 422, "labels")
    assert_problem(
        client.post(url, json={"scores": [0.1, 0.2], "labels": [0, 1], "n_bins": 1}), 422, "n_bins"
    )
    assert_problem(
        client.post(url, json={"scores": [0.1, 0.2], "labels": [0, 1], "strategy": "x"}),
        422,
        "strategy",
    )
    good = {"scores": [0.1, 0.2], "labels": [0, 1]}
    assert_problem(client.post(f"{BASE}/versions/7/diagnostics", json=good), 404, "7")
