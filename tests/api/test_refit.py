"""Fits from traffic (issue 11): the labelled logged predictions as the next version's batch.

The reference for every fit from traffic is a fit on the same (score, label) pairs posted as
a batch, which the fit tests hold to scikit-learn and the papers; the counts in the lineage
are checked against the rows the test logged and labelled itself.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from app.store.traffic.reads import TrafficReads
from app.store.traffic.rows import LoggedPrediction
from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch
from .test_multiclass import logits_batch

BASE = "/v1/calibrators/churn"
T0 = datetime(2026, 11, 20, tzinfo=UTC)


def predict_and_label(
    client: TestClient,
    scores: list[Any],
    labels: list[int],
    *,
    prefix: str,
    labelled: int,
    name: str = "churn",
) -> None:
    """Predict ``scores`` under ids ``prefix0..``, write the log, and post the outcomes of
    the first ``labelled`` ids."""
    ids = [f"{prefix}{i}" for i in range(len(scores))]
    r = client.post(f"/v1/calibrators/{name}/predict", json={"scores": scores, "ids": ids})
    assert r.status_code == 200, r.text
    client.app.state.service.prediction_log.flush()  # type: ignore[attr-defined]
    body = {"ids": ids[:labelled], "labels": labels[:labelled]}
    r = client.post(f"/v1/calibrators/{name}/outcomes", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["matched"] == labelled


def refit(client: TestClient, name: str = "churn", **body: Any) -> dict[str, Any]:
    r = client.post(f"/v1/calibrators/{name}/fit", json=body)
    assert r.status_code == 201, r.text
    version: dict[str, Any] = r.json()
    return version


def fit_batch(client: TestClient, scores: Any, labels: Any, method: str) -> dict[str, Any]:
    return refit(client, scores=scores, labels=labels, method=method)


def test_a_fit_from_traffic_is_the_fit_of_its_labelled_pairs(fitted: TestClient) -> None:
    batch = sigmoid_batch(500, seed=3, a=0.8, b=0.4)  # drifted from v1's batch
    predict_and_label(fitted, batch["scores"], batch["labels"], prefix="t", labelled=400)
    v2 = refit(fitted, from_traffic={}, method="platt")
    v3 = fit_batch(fitted, batch["scores"][:400], batch["labels"][:400], "platt")
    assert v2["version"] == 2
    assert v2["n_samples"] == 400
    assert v2["class_counts"] == v3["class_counts"]
    for key in ("A", "B"):
        assert v2["fitted"][key] == pytest.approx(v3["fitted"][key], rel=1e-6, abs=1e-9)
    source = v2["source"]
    assert source["traffic"]["since"] is None
    assert source["traffic"]["version"] is None
    assert source["parent_version"] == 1
    assert (source["n_predictions"], source["n_samples"]) == (500, 400)
    assert source["versions"] == {"1": {"n_predictions": 500, "n_labelled": 400}}
    assert v3["source"] is None  # a posted batch has no lineage
    assert fitted.get(f"{BASE}/versions/2").json()["source"] == source


def test_tied_scores_are_pooled_in_the_database_and_expanded_exactly(
    fitted: TestClient,
) -> None:
    rng = np.random.default_rng(5)
    scores = rng.integers(-3, 4, 600).astype(float)  # seven distinct scores
    labels = (rng.random(600) < 1 / (1 + np.exp(-scores))).astype(int)
    predict_and_label(fitted, scores.tolist(), labels.tolist(), prefix="u", labelled=600)
    v2 = refit(fitted, from_traffic={}, method="isotonic")
    v3 = fit_batch(fitted, scores.tolist(), labels.tolist(), "isotonic")
    assert v2["n_samples"] == 600
    assert v2["n_positive"] == int(labels.sum())
    assert v2["fitted"] == v3["fitted"]


def test_the_version_filter_takes_one_versions_traffic(fitted: TestClient) -> None:
    first = sigmoid_batch(300, seed=4)
    predict_and_label(fitted, first["scores"], first["labels"], prefix="a", labelled=300)
    fit_batch(fitted, first["scores"], first["labels"], "isotonic")  # v2 answers from now on
    assert fitted.put(f"{BASE}/aliases/old", json={"version": 1}).status_code in (200, 201)
    second = sigmoid_batch(200, seed=6)
    predict_and_label(fitted, second["scores"], second["labels"], prefix="b", labelled=150)
    v3 = refit(fitted, from_traffic={"version": "old"}, method="platt")
    v4 = fit_batch(fitted, first["scores"], first["labels"], "platt")
    assert v3["n_samples"] == 300
    assert v3["fitted"]["A"] == pytest.approx(v4["fitted"]["A"], rel=1e-6)
    assert v3["source"]["traffic"]["version"] == 1
    assert v3["source"]["parent_version"] == 2
    assert v3["source"]["versions"] == {"1": {"n_predictions": 300, "n_labelled": 300}}
    v5 = refit(fitted, from_traffic={"version": 2}, method="platt")
    assert v5["n_samples"] == 150
    everything = refit(fitted, from_traffic={}, method="platt")
    assert everything["n_samples"] == 450
    assert everything["source"]["versions"] == {
        "1": {"n_predictions": 300, "n_labelled": 300},
        "2": {"n_predictions": 200, "n_labelled": 150},
    }


def test_the_time_range_is_half_open(fitted: TestClient) -> None:
    service = fitted.app.state.service  # type: ignore[attr-defined]
    rows = [
        LoggedPrediction("churn", f"h{i}", 1, T0 + timedelta(hours=i), score=i - 3.0)
        for i in range(6)
    ]
    with service.database.transaction(write=True) as repo:
        repo.log_predictions(rows)
        repo.record_outcomes("churn", [(f"h{i}", i % 2) for i in range(6)], T0)
    since, until = (T0 + timedelta(hours=1)).isoformat(), (T0 + timedelta(hours=5)).isoformat()
    v2 = refit(fitted, from_traffic={"since": since, "until": until}, method="platt")
    assert v2["n_samples"] == 4  # hours 1, 2, 3, 4: the start counts, the end does not
    assert v2["source"]["traffic"]["since"].startswith("2026-11-20T01:00:00")
    assert v2["source"]["traffic"]["until"].startswith("2026-11-20T05:00:00")
    assert v2["source"]["n_predictions"] == 4


def test_multiclass_traffic_refits_on_its_rows(client: TestClient) -> None:
    batch = logits_batch(400, seed=2)
    refit(client, "digits", **batch, method="temperature")
    predict_and_label(
        client, batch["scores"], batch["labels"], prefix="m", labelled=300, name="digits"
    )
    v2 = refit(client, "digits", from_traffic={}, method="temperature")
    v3 = fit_batch_named(client, "digits", batch["scores"][:300], batch["labels"][:300])
    assert v2["n_samples"] == 300
    assert v2["class_counts"] == v3["class_counts"]
    assert v2["fitted"]["T"] == pytest.approx(v3["fitted"]["T"], rel=1e-6)


def fit_batch_named(client: TestClient, name: str, scores: Any, labels: Any) -> dict[str, Any]:
    return refit(client, name, scores=scores, labels=labels, method="temperature")


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"from_traffic": {}}, 422, "no labelled prediction"),
        ({"from_traffic": {"since": "2026-11-02", "until": "2026-11-01"}}, 422, "before until"),
        ({"from_traffic": {"version": 9}}, 404, "9"),
        ({"from_traffic": {"since": "yesterday"}}, 422, "since"),
        ({"from_traffic": {"until": "0001-01-01T00:00:00+01:00"}}, 422, "must lie in"),
        ({"from_traffic": {"since": "9999-12-31T23:00:00-05:00"}}, 422, "must lie in"),
        ({"from_traffic": {"ids": []}}, 422, "ids"),
        ({"from_traffic": {}, "scores": [1.0], "labels": [1]}, 422, "scores"),
    ],
)
def test_bad_refits_are_refused_and_store_nothing(
    fitted: TestClient, body: dict[str, Any], status: int, fragment: str
) -> None:
    assert_problem(fitted.post(f"{BASE}/fit", json=body), status, fragment)
    assert fitted.get(BASE).json()["latest_version"] == 1


def test_labels_a_binary_version_cannot_hold_are_named(fitted: TestClient) -> None:
    # Outcomes are held to the most classes any version has (a 3-class version once fitted
    # under the name lets a 2 in); a refit on binary traffic then names it.
    predict_and_label(fitted, [0.1, 0.2, 0.3], [0, 1, 1], prefix="x", labelled=3)
    service = fitted.app.state.service  # type: ignore[attr-defined]
    with service.database.transaction(write=True) as repo:
        repo._session.execute(text("UPDATE predictions SET label = 2 WHERE client_id = 'x2'"))
    assert_problem(
        fitted.post(f"{BASE}/fit", json={"from_traffic": {}}), 422, "outside 0..1", "e.g. 2"
    )


def test_a_refit_of_an_unknown_calibrator_is_not_found(client: TestClient) -> None:
    r = client.post("/v1/calibrators/nobody/fit", json={"from_traffic": {}})
    assert_problem(r, 404, "nobody")


@pytest.mark.in_threads  # it patches code the job runs
def test_a_range_past_the_batch_limit_is_refused_before_it_is_read(
    fitted: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    predict_and_label(fitted, [0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1], prefix="z", labelled=4)
    service = fitted.app.state.service  # type: ignore[attr-defined]
    monkeypatch.setattr(service.settings, "max_batch_rows", 3)
    reads: list[str] = []
    read_rows = TrafficReads._float_chunks

    def spying(self: TrafficReads, statement: str, *args: Any) -> Any:
        reads.append(statement)
        return read_rows(self, statement, *args)

    monkeypatch.setattr(TrafficReads, "_float_chunks", spying)
    assert_problem(fitted.post(f"{BASE}/fit", json={"from_traffic": {}}), 413, "4 labelled")
    assert reads == []  # refused on the counts: no pair was read
    monkeypatch.setattr(service.settings, "max_batch_rows", 4)
    assert fitted.post(f"{BASE}/fit", json={"from_traffic": {}}).status_code == 201
    assert len(reads) == 1
