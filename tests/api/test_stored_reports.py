"""Stored diagnostics read what they need of the store, and only the version they name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.calibration import HeadlineReports
from app.errors import NotFound
from app.store.blobs import BlobOperations
from tests.client import TestClient

from .helpers import sigmoid_batch

pytestmark = pytest.mark.in_threads  # it counts the batch reads jobs make


def fit(client: TestClient, name: str, seed: int) -> None:
    r = client.post(
        f"/v1/calibrators/{name}/fit", json={**sigmoid_batch(seed=seed), "method": "platt"}
    )
    assert r.status_code == 201, r.text


def test_a_picture_of_reports_already_kept_does_not_read_the_batch(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    fit(client, "churn", 0)
    assert client.get("/v1/calibrators/churn/versions/1/diagnostics").status_code == 200
    reads: list[int] = []
    original = BlobOperations.get_batch

    def counted(self: BlobOperations, version_id: int) -> Any:
        reads.append(version_id)
        return original(self, version_id)

    monkeypatch.setattr(BlobOperations, "get_batch", counted)
    picture = client.get("/v1/calibrators/churn/versions/1/diagnostics.png")
    assert picture.status_code == 200
    assert picture.headers["content-type"] == "image/png"
    assert reads == []


def test_a_batch_read_again_is_the_named_versions_even_when_its_row_id_was_reused(
    client: TestClient,
) -> None:
    fit(client, "first", 0)
    fit(client, "gone", 1)
    service = client.app.state.service  # type: ignore[attr-defined]
    with service.database.transaction() as repo:
        gone = repo.get_version("gone", 1)
    assert client.delete("/v1/calibrators/gone").status_code == 204
    fit(client, "next", 2)  # SQLite may give it the row id "gone" v1 had
    with pytest.raises(NotFound):  # not the batch of "next"
        service.diagnosis._decoded(gone, None)


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_a_fit_hands_its_report_the_out_of_fold_predictions_runs(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """The stored report's AUC is told the rows in which a monotone method's out-of-fold
    predictions come in one sorted run per fold (its sorts then merge), and the AUC stored is
    the one the diagnostics compute without it."""
    handed: list[Any] = []
    original = HeadlineReports.add

    def spy(self: HeadlineReports, probabilities: Any, runs: Any = None, **kwargs: Any) -> None:
        handed.append((probabilities, runs))
        original(self, probabilities, runs, **kwargs)

    monkeypatch.setattr(HeadlineReports, "add", spy)
    r = client.post(
        "/v1/calibrators/churn/fit", json={**sigmoid_batch(5_000, seed=2), "method": method}
    )
    assert r.status_code == 201, r.text
    (_, no_runs), (out_of_fold, runs) = handed
    assert no_runs is None  # the raw scores' report starts before the fit sorts them
    assert sorted(runs.tolist()) == list(range(5_000))
    assert np.count_nonzero(np.diff(out_of_fold[runs]) < 0) <= 4  # five sorted runs
    report = client.get("/v1/calibrators/churn/versions/1/diagnostics?bootstrap=0").json()
    assert r.json()["metrics"]["cv"]["auc"] == report["calibrated"]["metrics"]["auc"]
