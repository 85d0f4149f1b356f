"""GET .../monitoring: every number against an independent computation on the same rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from scipy.stats import ks_2samp
from sklearn.metrics import brier_score_loss, log_loss

from app.store.traffic import binary_copy
from app.store.traffic import reads as traffic_reads
from app.store.traffic.rows import LoggedPrediction
from tests.client import TestClient

from .helpers import assert_problem, binned_ks, ece, ks_binning_slack, psi, sigmoid_batch
from .test_multiclass import logits_batch

pytestmark = pytest.mark.in_threads  # its chunking patches the reads jobs make

BASE = "/v1/calibrators/churn"
T0 = datetime(2026, 11, 20, tzinfo=UTC)


def log_rows(client: TestClient, rows: list[LoggedPrediction], labels: dict[str, int]) -> None:
    service = client.app.state.service  # type: ignore[attr-defined]
    with service.database.transaction(write=True) as repo:
        repo.log_predictions(rows)
        repo.record_outcomes("churn", list(labels.items()), T0)


@pytest.fixture(params=["whole", "chunked"])
def chunking(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Traffic read in the usual chunks (here, all in one), or 7 rows at a time: windows
    then span chunks, and chunks span windows."""
    if request.param == "chunked":
        monkeypatch.setattr(traffic_reads, "FETCH_ROWS", 7)
        monkeypatch.setattr(binary_copy, "COPY_BLOCKS", 7)


@pytest.fixture
def traffic(client: TestClient) -> dict[str, Any]:
    batch = sigmoid_batch(2000, seed=1)
    assert client.post(f"{BASE}/fit", json={**batch, "method": "platt"}).status_code == 201
    rng = np.random.default_rng(7)
    scores = rng.normal(0.4, 1.2, 600)  # shifted from the fitting batch
    probabilities = 1 / (1 + np.exp(-1.3 * scores))
    labels = (rng.random(600) < probabilities).astype(int)
    times = [T0 + timedelta(minutes=int(m)) for m in rng.integers(0, 120, 600)]  # hours 0, 1
    rows = [
        LoggedPrediction(
            "churn",
            f"r{i}",
            1,
            times[i],
            score=float(scores[i]),
            probability=float(probabilities[i]),
        )
        for i in range(600)
    ]
    labelled = {f"r{i}": int(labels[i]) for i in range(0, 600, 2)}  # half have outcomes
    log_rows(client, rows, labelled)
    return {
        "reference": np.asarray(batch["scores"], dtype=float),
        "scores": scores,
        "probabilities": probabilities,
        "labels": labels,
        "hours": np.array([(t - T0).total_seconds() // 3600 for t in times]),
    }


def test_each_window_against_numpy_scikit_learn_and_scipy(
    client: TestClient, traffic: dict[str, Any], chunking: None
) -> None:
    r = client.get(
        f"{BASE}/monitoring",
        params={
            "window": "1h",
            "since": T0.isoformat(),
            "until": (T0 + timedelta(hours=3)).isoformat(),
        },
    )
    assert r.status_code == 200, r.text
    rows = r.json()["windows"]
    assert [row["version"] for row in rows] == [1, 1, None]
    for hour, row in enumerate(rows[:2]):
        in_hour = traffic["hours"] == hour
        labelled = in_hour & (np.arange(600) % 2 == 0)
        p, y = traffic["probabilities"][labelled], traffic["labels"][labelled]
        assert row["n_predictions"] == int(in_hour.sum())
        assert row["n_labelled"] == int(labelled.sum())
        assert row["mean_predicted"] == pytest.approx(p.mean(), rel=1e-12)
        assert row["observed_rate"] == pytest.approx(y.mean(), rel=1e-12)
        assert row["log_loss"] == pytest.approx(log_loss(y, p), rel=1e-9)
        assert row["brier"] == pytest.approx(brier_score_loss(y, p), rel=1e-9)
        assert row["ece"] == pytest.approx(ece(p, y), rel=1e-9)
        seen = traffic["scores"][in_hour]
        exact = ks_2samp(traffic["reference"], seen).statistic
        assert row["ks"] == pytest.approx(binned_ks(traffic["reference"], seen), rel=1e-12)
        assert exact - ks_binning_slack(traffic["reference"], seen) <= row["ks"] <= exact + 1e-12
        assert row["psi"] == pytest.approx(psi(traffic["reference"], seen), rel=1e-9)
        assert row["psi"] > 0.1  # the traffic was drawn shifted
        for name in ("log_loss", "brier"):  # the default bootstrap's intervals
            low, high = row["intervals"][name]
            assert low < row[name] < high
        assert 0.0 <= row["intervals"]["ece"][0] <= row["intervals"]["ece"][1]
    empty = rows[2]
    assert "intervals" not in empty
    assert empty["n_predictions"] == 0
    assert {k: empty[k] for k in ("log_loss", "brier", "ece", "psi", "ks")} == dict.fromkeys(
        ("log_loss", "brier", "ece", "psi", "ks")
    )
    assert empty["start"] == (T0 + timedelta(hours=2)).isoformat().replace("+00:00", "Z")


def test_the_version_filter_and_its_empty_windows(
    client: TestClient, traffic: dict[str, Any]
) -> None:
    params = {
        "window": "1d",
        "since": T0.isoformat(),
        "until": (T0 + timedelta(days=2)).isoformat(),
    }
    rows = client.get(f"{BASE}/monitoring", params={**params, "version": "1"}).json()["windows"]
    assert [(row["version"], row["n_predictions"]) for row in rows] == [(1, 600), (1, 0)]
    assert_problem(client.get(f"{BASE}/monitoring", params={**params, "version": "9"}), 404)


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"window": "2h"}, "window"),
        ({"since": "2026-11-20T00:00:00Z", "until": "2026-11-19T00:00:00Z"}, "before until"),
        (
            {"window": "1h", "since": "2020-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
            "1000",
        ),
        ({"until": "0001-01-01T00:00:00Z"}, "1970-01-01"),  # no room for 30 windows before
        ({"since": "0001-01-01T00:00:00+01:00"}, "1970-01-01"),  # year 0 in UTC
        ({"since": "9999-12-31T23:00:00-05:00"}, "9000-01-01"),  # year 10000 in UTC
    ],
)
def test_bad_ranges_are_refused(client: TestClient, params: dict[str, str], fragment: str) -> None:
    assert client.post(f"{BASE}/fit", json=sigmoid_batch()).status_code == 201
    assert_problem(client.get(f"{BASE}/monitoring", params=params), 422, fragment)


def test_monitoring_an_unknown_calibrator_is_not_found(client: TestClient) -> None:
    assert_problem(client.get("/v1/calibrators/nobody/monitoring"), 404)


def test_k_class_traffic_gets_multiclass_metrics(client: TestClient, chunking: None) -> None:
    rng = np.random.default_rng(0)
    body = logits_batch(300)  # labels drawn from softmax(z / 2.5): no certainties
    logits = np.array(body["scores"])
    fit = client.post("/v1/calibrators/k3/fit", json={**body, "method": "temperature"})
    assert fit.status_code == 201, fit.text
    ids = [f"m{i}" for i in range(40)]
    predict = {"scores": logits[:40].tolist(), "ids": ids}
    answer = client.post("/v1/calibrators/k3/predict", json=predict)
    assert answer.status_code == 200, answer.text
    P = np.array(answer.json()["probabilities"])
    client.app.state.service.prediction_log.flush()  # type: ignore[attr-defined]
    labels = (rng.random(30)[:, None] > np.cumsum(P[:30], axis=1)).sum(axis=1)
    outcomes = {"ids": ids[:30], "labels": labels.tolist()}
    assert client.post("/v1/calibrators/k3/outcomes", json=outcomes).json()["matched"] == 30

    r = client.get("/v1/calibrators/k3/monitoring", params={"window": "1h"})
    assert r.status_code == 200, r.text
    (row,) = (row for row in r.json()["windows"] if row["n_predictions"])
    assert (row["version"], row["n_predictions"], row["n_labelled"]) == (1, 40, 30)
    p, y = P[:30], labels
    onehot = np.eye(3)[y]
    top = p.max(axis=1)
    correct = (p.argmax(axis=1) == y).astype(float)
    bins = np.minimum((top * 10).astype(int), 9)
    ece = sum(
        abs(top[bins == b].mean() - correct[bins == b].mean()) * np.mean(bins == b)
        for b in range(10)
        if np.any(bins == b)
    )
    assert row["log_loss"] == pytest.approx(log_loss(y, p, labels=[0, 1, 2]), rel=1e-9)
    assert row["brier"] == pytest.approx(float(((p - onehot) ** 2).sum(axis=1).mean()), rel=1e-9)
    assert row["ece"] == pytest.approx(ece, rel=1e-9, abs=1e-12)
    assert row["mean_predicted"] == pytest.approx(top.mean(), rel=1e-12)
    assert row["observed_rate"] == pytest.approx(correct.mean(), rel=1e-12)
    assert (row["psi"], row["ks"]) == (None, None)  # a k-class batch's scores are a matrix
