"""GET .../monitoring's `estimated`, `realized` and `prior`, window by window, against
independent computations on the same rows: CBPE's formulas and the pairwise expected AUC in
numpy, scikit-learn on the labelled rows, and the prior that maximises the likelihood by
scipy."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from sklearn.metrics import (
    accuracy_score,
    f1_score,
    precision_score,
    recall_score,
    roc_auc_score,
)

from app.store.traffic.rows import LoggedPrediction
from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch
from .test_monitoring import BASE, T0, chunking, log_rows
from .test_multiclass import logits_batch

pytestmark = pytest.mark.in_threads  # its chunking patches the reads jobs make

__all__ = ["chunking"]  # a fixture of test_monitoring's, used here


@pytest.fixture
def traffic(client: TestClient) -> dict[str, Any]:
    """Two hours of a platt version's traffic whose base rate moved up; a third of it
    labelled."""
    batch = sigmoid_batch(3000, seed=3)
    assert client.post(f"{BASE}/fit", json={**batch, "method": "platt"}).status_code == 201
    rng = np.random.default_rng(11)
    n = 900
    scores = rng.normal(1.0, 2.0, n)  # more positives than the fitting batch's
    version = client.get(f"{BASE}/versions/1").json()
    A, B = version["fitted"]["A"], version["fitted"]["B"]
    probabilities = 1 / (1 + np.exp(A * scores + B))
    labels = (rng.random(n) < probabilities).astype(int)
    times = [T0 + timedelta(seconds=int(s)) for s in rng.integers(0, 7200, n)]
    rows = [
        LoggedPrediction(
            "churn", f"r{i}", 1, times[i], score=float(scores[i]), probability=probabilities[i]
        )
        for i in range(n)
    ]
    log_rows(client, rows, {f"r{i}": int(labels[i]) for i in range(0, n, 3)})
    return {
        "p": probabilities,
        "y": labels,
        "hours": np.array([(t - T0).total_seconds() // 3600 for t in times]),
        "labelled": np.arange(n) % 3 == 0,
        "training": float(np.mean(batch["labels"])),
    }


def _monitoring(client: TestClient, **params: Any) -> list[dict[str, Any]]:
    query = {"window": "1h", "since": T0.isoformat(), "until": (T0 + timedelta(hours=3))}
    r = client.get(f"{BASE}/monitoring", params={**query, **params})
    assert r.status_code == 200, r.text
    rows: list[dict[str, Any]] = r.json()["windows"]
    return rows


def _pairwise_expected_auc(p: np.ndarray) -> float:
    order = np.sign(p[:, None] - p[None, :])
    pairs = p[:, None] * (1 - p[None, :])
    return float((pairs * ((order > 0) + 0.5 * (order == 0))).sum() / (p.sum() * (1 - p).sum()))


def _likeliest_prior(p: np.ndarray, training: float) -> float:
    def minus_log_likelihood(prior: float) -> float:
        return -float(np.log(prior / training * p + (1 - prior) / (1 - training) * (1 - p)).sum())

    return float(minimize_scalar(minus_log_likelihood, bounds=(1e-6, 1 - 1e-6)).x)


@pytest.mark.parametrize("threshold", [0.5, 0.3])
def test_each_window_against_numpy_scikit_learn_and_scipy(
    client: TestClient, traffic: dict[str, Any], chunking: None, threshold: float
) -> None:
    rows = _monitoring(client, threshold=threshold)
    for hour, row in enumerate(rows[:2]):
        in_hour = traffic["hours"] == hour
        p = traffic["p"][in_hour]
        labelled = traffic["labelled"][in_hour]
        y = traffic["y"][in_hour][labelled]
        decided = p > threshold
        e = row["estimated"]
        tp, fp, fn = p[decided].sum(), (1 - p[decided]).sum(), p[~decided].sum()
        assert e["positive_rate"] == pytest.approx(p.mean(), rel=1e-12)
        assert e["accuracy"] == pytest.approx((tp + (1 - p[~decided]).sum()) / p.size, rel=1e-12)
        assert e["precision"] == pytest.approx(tp / decided.sum(), rel=1e-12)
        assert e["recall"] == pytest.approx(tp / (tp + fn), rel=1e-12)
        assert e["f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn), rel=1e-12)
        entropy = -(p * np.log(p) + (1 - p) * np.log1p(-p))
        assert e["log_loss"] == pytest.approx(entropy.mean(), rel=1e-12)
        assert e["brier"] == pytest.approx(np.mean(p * (1 - p)), rel=1e-12)
        assert e["roc_auc"] == pytest.approx(_pairwise_expected_auc(p), abs=1e-3)  # binned
        spread, logit = p * (1 - p), np.log(p) - np.log1p(-p)  # the bands' exact half-widths
        for key, variance in (
            ("accuracy", spread.sum() / p.size**2),
            ("log_loss", (spread * logit**2).sum() / p.size**2),
        ):
            low, high = e["intervals"][key]
            assert (high - low) / 2 == pytest.approx(1.959964 * np.sqrt(variance), rel=1e-6)

        r = row["realized"]
        q = p[labelled]
        assert r["positive_rate"] == pytest.approx(y.mean(), rel=1e-12)
        assert r["accuracy"] == pytest.approx(accuracy_score(y, q > threshold), rel=1e-12)
        assert r["precision"] == pytest.approx(precision_score(y, q > threshold), rel=1e-12)
        assert r["recall"] == pytest.approx(recall_score(y, q > threshold), rel=1e-12)
        assert r["f1"] == pytest.approx(f1_score(y, q > threshold), rel=1e-12)
        assert r["roc_auc"] == pytest.approx(roc_auc_score(y, q), abs=2e-3)  # binned
        assert r["log_loss"] == row["log_loss"]
        assert r["brier"] == row["brier"]
        assert "intervals" not in r

        prior = row["prior"]
        assert prior["training"] == pytest.approx(traffic["training"], rel=1e-12)
        assert prior["estimated"] == pytest.approx(
            _likeliest_prior(p, traffic["training"]), abs=2e-3
        )
        low, high = prior["interval"]
        assert low < prior["estimated"] < high
        assert low > prior["training"]  # the base rate moved up, and the window shows it
    empty = rows[2]
    assert (empty["estimated"], empty["realized"], empty["prior"]) == (None, None, None)


def test_a_window_without_labels_has_estimates_and_no_realized(
    client: TestClient, traffic: dict[str, Any]
) -> None:
    client.post(f"{BASE}/fit", json={**sigmoid_batch(500, seed=4), "method": "platt"})
    rows = [
        LoggedPrediction("churn", f"u{i}", 2, T0 + timedelta(minutes=i), score=0.1, probability=0.4)
        for i in range(5)
    ]
    log_rows(client, rows, {})
    (row,) = (row for row in _monitoring(client, version="2") if row["n_predictions"])
    assert row["realized"] is None
    assert row["estimated"]["positive_rate"] == pytest.approx(0.4)
    assert row["estimated"]["precision"] is None  # nothing decided positive at 0.5
    assert row["prior"]["estimated"] is not None


@pytest.mark.parametrize("threshold", ["1.5", "-0.1", "nan", "x"])
def test_a_threshold_outside_zero_one_is_422(client: TestClient, threshold: str) -> None:
    client.post(f"{BASE}/fit", json={**sigmoid_batch(200), "method": "platt"})
    r = client.get(f"{BASE}/monitoring", params={"threshold": threshold})
    body = assert_problem(r, 422, "threshold")
    assert body["errors"][0]["loc"] == ["query", "threshold"]
    r = client.get(f"{BASE}/monitoring.png", params={"threshold": threshold})
    assert r.status_code == 422


def test_k_class_windows_estimate_accuracy_and_the_priors(
    client: TestClient, chunking: None
) -> None:
    body = logits_batch(600)
    fit = client.post("/v1/calibrators/k3/fit", json={**body, "method": "temperature"})
    assert fit.status_code == 201, fit.text
    logits = np.array(body["scores"])
    ids = [f"m{i}" for i in range(200)]
    answer = client.post(
        "/v1/calibrators/k3/predict", json={"scores": logits[:200].tolist(), "ids": ids}
    )
    P = np.array(answer.json()["probabilities"])
    client.app.state.service.prediction_log.flush()  # type: ignore[attr-defined]
    y = np.array(body["labels"][:200])
    client.post("/v1/calibrators/k3/outcomes", json={"ids": ids[:80], "labels": y[:80].tolist()})

    r = client.get("/v1/calibrators/k3/monitoring", params={"window": "1h"})
    (row,) = (row for row in r.json()["windows"] if row["n_predictions"])
    e = row["estimated"]
    assert set(e) == {"accuracy", "log_loss", "brier", "intervals"}
    assert e["accuracy"] == pytest.approx(P.max(axis=1).mean(), rel=1e-12)
    assert e["log_loss"] == pytest.approx(-(P * np.log(P)).sum(axis=1).mean(), rel=1e-12)
    assert e["brier"] == pytest.approx(np.mean(1 - (P**2).sum(axis=1)), rel=1e-12)
    realized = row["realized"]
    assert realized["accuracy"] == pytest.approx(
        accuracy_score(y[:80], P[:80].argmax(axis=1)), rel=1e-12
    )
    assert (realized["log_loss"], realized["brier"]) == (row["log_loss"], row["brier"])
    training = np.bincount(body["labels"], minlength=3) / len(body["labels"])
    prior = row["prior"]
    assert prior["training"] == pytest.approx(training.tolist(), rel=1e-12)
    # EM's fixed point: the mean of the posteriors under the estimated priors
    q = P * (np.array(prior["estimated"]) / training)
    q /= q.sum(axis=1, keepdims=True)
    assert q.mean(axis=0) == pytest.approx(prior["estimated"], abs=1e-8)
    for value, (low, high) in zip(prior["estimated"], prior["interval"], strict=True):
        assert low < value < high


def test_an_adjusted_versions_shift_is_measured_against_its_reweighted_batch(
    client: TestClient,
) -> None:
    """Label shift only: the adjusted version's reference is its batch reweighted to the
    new prior, so its PSI and KS on the shifted traffic are far below its parent's, and its
    window's training prior is the prior it was adjusted to."""
    rng = np.random.default_rng(21)
    batch = sigmoid_batch(4000, seed=8)
    assert client.post(f"{BASE}/fit", json={**batch, "method": "platt"}).status_code == 201
    pool = sigmoid_batch(20000, seed=9)
    scores, labels = np.array(pool["scores"]), np.array(pool["labels"])
    kept = (labels == 1) | (rng.random(labels.size) < 0.3)  # more positives, same p(s | y)
    shifted = scores[kept][:3000]
    rate = float(labels[kept][:3000].mean())
    adjusted = client.post(f"{BASE}/versions/1/adjust", json={"prior": rate})
    assert adjusted.status_code == 201, adjusted.text
    rows = [
        LoggedPrediction(
            "churn", f"v{v}-{i}", v, T0 + timedelta(seconds=i), score=float(s), probability=0.5
        )
        for v in (1, 2)
        for i, s in enumerate(shifted)
    ]
    log_rows(client, rows, {})
    found = {row["version"]: row for row in _monitoring(client) if row["version"]}
    assert found[2]["psi"] < found[1]["psi"] / 3
    assert found[2]["ks"] < found[1]["ks"] / 2
    assert found[2]["prior"]["training"] == pytest.approx(rate, rel=1e-12)


def test_the_csv_holds_the_jsons_numbers(client: TestClient, traffic: dict[str, Any]) -> None:
    query = {"window": "1h", "since": T0.isoformat(), "until": (T0 + timedelta(hours=3))}
    windows = client.get(f"{BASE}/monitoring", params={**query, "bootstrap": 0}).json()["windows"]
    r = client.get(f"{BASE}/monitoring.csv", params={**query, "bootstrap": 0})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    lines = list(csv.DictReader(io.StringIO(r.text)))
    assert len(lines) == len(windows) == 3

    def number(cell: str) -> float | None:
        return None if cell == "" else float(cell)

    for line, row in zip(lines, windows, strict=True):
        assert line["start"] == row["start"]
        for key in ("n_predictions", "n_labelled", "log_loss", "ece", "psi", "ks"):
            assert number(line[key]) == row[key], key
        if row["estimated"] is None:
            assert line["estimated_accuracy"] == line["prior_estimated"] == ""
            continue
        assert number(line["estimated_accuracy"]) == row["estimated"]["accuracy"]
        low, high = row["estimated"]["intervals"]["roc_auc"]
        assert (number(line["estimated_roc_auc_low"]), number(line["estimated_roc_auc_high"])) == (
            low,
            high,
        )
        assert number(line["realized_f1"]) == row["realized"]["f1"]
        assert number(line["prior_estimated"]) == row["prior"]["estimated"]
        assert number(line["prior_high"]) == row["prior"]["interval"][1]
