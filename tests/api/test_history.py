"""The traffic history through the API, on both databases: a fit ``from_traffic`` and the
traffic's diagnostics over a range that reaches exported days (read by a worker process from
their Parquet files) answer as they did while the rows were in the database; a missing file
is a 503 naming it, never a 500."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from app.store import Database, LoggedPrediction
from app.store.history import run_history
from app.store.traffic.partitions import ensure_partitions
from tests.client import TestClient
from tests.objects import s3_client
from tests.store.traffic.history_data import HOT, NOW, OLD, history_settings, midnight

from .helpers import sigmoid_batch

BASE = "/v1/calibrators/churn"
RANGE = {"since": (midnight(OLD[0]) - timedelta(days=1)).isoformat(), "until": NOW.isoformat()}


@pytest.fixture
def blobs() -> str:
    """Object storage only."""
    return "s3"


def log_past_days(database: Database) -> None:
    """200 predictions of v1 on each of two days the export takes and one it leaves, with a
    drift over the days, four in five labelled, through the store."""
    rng = np.random.default_rng(11)
    rows, outcomes = [], []
    for d, day in enumerate((*OLD, HOT)):
        for i in range(200):
            score = float(rng.normal(0.3 * d, 1.5))
            at = midnight(day) + timedelta(seconds=300 * i + d)
            rows.append(
                LoggedPrediction("churn", f"{d}-{i}", 1, at, score, 1 / (1 + np.exp(-score)))
            )
            if i % 5:
                outcomes.append((f"{d}-{i}", int(rng.random() < 1 / (1 + np.exp(-score + 0.5)))))
    with database.transaction(write=True) as repo:
        if database.engine.dialect.name == "postgresql":
            for day in (*OLD, HOT):
                ensure_partitions(repo._session.connection(), day, day)
        repo.log_predictions(rows)
        repo.record_outcomes("churn", outcomes, NOW - timedelta(days=9))


def refit(client: TestClient) -> dict[str, Any]:
    answer = client.post(f"{BASE}/fit", json={"method": "platt", "from_traffic": RANGE})
    assert answer.status_code == 201, answer.text
    version: dict[str, Any] = answer.json()
    return version


def test_a_fit_from_traffic_and_diagnostics_over_exported_days_answer_as_before(
    client: TestClient, database: Database
) -> None:
    fit = client.post(f"{BASE}/fit", json={**sigmoid_batch(), "method": "platt"})
    assert fit.status_code == 201, fit.text
    log_past_days(database)
    params = {**RANGE, "bootstrap": 0}
    before = client.get(f"{BASE}/monitoring/diagnostics", params=params)
    assert before.status_code == 200, before.text
    v2 = refit(client)
    run = run_history(database, history_settings(database), NOW)
    assert (run.exported, run.rows, run.cleared) == (2, 400, 2)
    v3 = refit(client)
    assert v3["n_samples"] == v2["n_samples"] == 480
    assert v3["fitted"] == v2["fitted"]  # the same pairs, in the same order
    assert (
        v3["source"]["versions"]
        == v2["source"]["versions"]
        == {"1": {"n_predictions": 600, "n_labelled": 480}}
    )
    after = client.get(f"{BASE}/monitoring/diagnostics", params=params)
    assert after.status_code == 200, after.text
    assert after.json() == before.json()
    objects = database.objects
    assert objects is not None
    key = objects.location.history_key("churn", OLD[1])
    s3_client(objects._client.meta.endpoint_url).delete_object(
        Bucket=objects.location.bucket, Key=key
    )
    gone = client.get(f"{BASE}/monitoring/diagnostics", params=params)
    assert gone.status_code == 503, gone.text
    assert gone.json()["type"].endswith("/problems/object-store-unavailable")
    assert key in gone.json()["detail"]
    assert (
        client.post(f"{BASE}/fit", json={"method": "platt", "from_traffic": RANGE}).status_code
        == 503
    )
