"""POST /fit in every media type, and what a version looks like afterwards."""

from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import brier_score_loss, roc_auc_score

from tests.client import TestClient

from .helpers import as_csv, sigmoid_batch

FIT = "/v1/calibrators/churn/fit"


def test_json_fit_answers_201_with_location_and_the_version(client: TestClient) -> None:
    batch = sigmoid_batch()
    r = client.post(FIT, json={**batch, "method": "platt", "description": "d", "tags": {"t": "x"}})
    assert r.status_code == 201, r.text
    assert r.headers["location"] == "/v1/calibrators/churn/versions/1"
    v = r.json()
    assert v["name"] == "churn"
    assert v["version"] == 1
    assert v["method"] == "platt"
    assert v["params"]["targets"] == "platt"
    assert v["n_samples"] == 400
    assert v["n_positive"] == sum(batch["labels"])
    assert v["n_classes"] == 2
    assert v["description"] == "d"
    assert v["tags"] == {"t": "x"}
    assert v["created_at"].endswith("Z")
    assert set(v["fitted"]) >= {"A", "B"}
    # Labels were drawn with P(y=1|f) = sigmoid(1.5 f - 0.3): Platt's A = -1.5, B = 0.3 roughly.
    assert abs(v["fitted"]["A"] + 1.5) < 0.4
    assert len(v["artifact"]["sha256"]) == 64
    assert v["artifact"]["bytes"] > 0
    assert v["selection"] is None
    assert v["aliases"] == []
    assert set(v["metrics"]) == {"cv", "raw"}
    # The raw margins are min-max scaled for their metrics; AUC is invariant to that.
    expected_auc = roc_auc_score(batch["labels"], batch["scores"])
    assert abs(v["metrics"]["raw"]["auc"] - expected_auc) < 1e-12
    # Out-of-fold Platt probabilities beat the min-max scaled margins by far.
    assert v["metrics"]["cv"]["brier"] < v["metrics"]["raw"]["brier"]
    again = client.get("/v1/calibrators/churn/versions/1")
    assert again.status_code == 200
    assert again.json() == v


def test_csv_upload_with_curl_style_multipart(client: TestClient) -> None:
    batch = sigmoid_batch(300, seed=3)
    r = client.post(
        f"{FIT}?method=isotonic",
        files={"file": ("batch.csv", as_csv(batch), "text/csv")},
    )
    assert r.status_code == 201, r.text
    v = r.json()
    assert v["method"] == "isotonic"
    assert v["params"]["interpolation"] == "linear"
    reference = IsotonicRegression(out_of_bounds="clip").fit(batch["scores"], batch["labels"])
    probe = np.linspace(-8, 8, 101)
    served = client.post("/v1/calibrators/churn/predict", json={"scores": probe.tolist()}).json()
    assert np.max(np.abs(np.array(served["probabilities"]) - reference.predict(probe))) < 1e-10


def test_plain_csv_body_with_weights_and_query_options(client: TestClient) -> None:
    batch = sigmoid_batch(200, seed=4)
    weights = [1.0 + (i % 3) for i in range(200)]
    r = client.post(
        f'{FIT}?method=platt&params={{"targets":"hard"}}&description=weekly&tags={{"team":"risk"}}',
        content=as_csv(batch, weights),
        headers={"content-type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    v = r.json()
    assert v["params"]["targets"] == "hard"
    assert v["description"] == "weekly"
    assert v["tags"] == {"team": "risk"}
    # Weighted Platt with hard targets is weighted logistic regression on the score.
    from sklearn.linear_model import LogisticRegression

    lr = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000)
    lr.fit(np.array(batch["scores"])[:, None], batch["labels"], sample_weight=weights)
    assert abs(v["fitted"]["A"] + lr.coef_[0, 0]) < 1e-4
    assert abs(v["fitted"]["B"] + lr.intercept_[0]) < 1e-4


def test_auto_records_every_candidate_and_refits_the_winner(client: TestClient) -> None:
    r = client.post(FIT, json=sigmoid_batch(300, seed=5))  # method defaults to auto
    assert r.status_code == 201, r.text
    v = r.json()
    selection = v["selection"]
    # the default candidates that take margins (beta needs probabilities, and says so)
    assert list(selection["candidates"]) == ["platt", "venn_abers"]
    assert selection["skipped"] == {"beta": "needs probabilities"}
    assert all(c["log_loss_se"] > 0 for c in selection["candidates"].values())
    losses = [c["log_loss"] for c in selection["candidates"].values()]
    # the lowest cross-validated log loss wins; a tie goes to the earlier (simpler) candidate
    assert selection["chosen"] == list(selection["candidates"])[losses.index(min(losses))]
    chosen = selection["candidates"][selection["chosen"]]
    assert v["method"] == chosen["method"]
    assert chosen["params"].items() <= v["params"].items()
    # the version records the bound that auto applied: Laplace's, from its 300 points
    assert v["params"]["bound"] == "laplace"
    assert v["fitted"]["bound"] == [1 / 302, 301 / 302]


def test_logistic_correction_is_expit_of_twice_the_margin(client: TestClient) -> None:
    r = client.post(FIT, json={**sigmoid_batch(100, seed=6), "method": "logistic_correction"})
    assert r.status_code == 201, r.text
    f = np.array([-3.0, -0.5, 0.0, 0.25, 4.0])
    p = client.post("/v1/calibrators/churn/predict", json={"scores": f.tolist()}).json()
    np.testing.assert_allclose(p["probabilities"], 1.0 / (1.0 + np.exp(-2.0 * f)), rtol=1e-12)


def test_stored_cv_metrics_match_the_stored_out_of_fold_predictions(client: TestClient) -> None:
    batch = sigmoid_batch(500, seed=7)
    v = client.post(FIT, json={**batch, "method": "isotonic"}).json()
    d = client.get("/v1/calibrators/churn/versions/1/diagnostics").json()
    # Brier over the bins' own numbers equals the stored cv Brier (same out-of-fold predictions).
    assert abs(d["calibrated"]["metrics"]["brier"] - v["metrics"]["cv"]["brier"]) < 1e-12
    raw = np.array(batch["scores"])
    scaled = (raw - raw.min()) / (raw.max() - raw.min())
    assert abs(v["metrics"]["raw"]["brier"] - brier_score_loss(batch["labels"], scaled)) < 1e-12
