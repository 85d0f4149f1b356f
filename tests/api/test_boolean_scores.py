"""Booleans are no scores: JSON ``true`` was read as 1.0 on ``/v1`` and, mixed with numbers,
on ``/v2`` (issue 25's hostile client). Labels keep taking booleans (binary labels)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch
from .test_columnar_batches import ENCODINGS

BASE = "/v1/calibrators/churn"


def versions(client: TestClient) -> int:
    r = client.get(BASE)
    return len(r.json()["versions"]) if r.status_code == 200 else 0


@pytest.mark.parametrize("rows", [20, 70_000], ids=["small", "big-body-parsed-apart"])
def test_a_boolean_score_is_refused_by_fit_naming_its_index(client: TestClient, rows: int) -> None:
    batch = sigmoid_batch(rows, seed=5)
    batch["scores"][3] = True
    r = client.post(f"{BASE}/fit", json={**batch, "method": "platt"})
    assert_problem(r, 422, "scores[3] is a boolean; scores must be numbers")
    assert versions(client) == 0  # nothing stored


def test_a_boolean_in_a_score_matrix_is_refused(client: TestClient) -> None:
    batch = {"scores": [[0.2, 0.8], [0.5, False], [0.9, 0.1]], "labels": [1, 0, 0]}
    r = client.post(f"{BASE}/fit", json={**batch, "method": "temperature"})
    assert_problem(r, 422, "scores[1][1] is a boolean; scores must be numbers")


def test_labels_still_take_booleans(client: TestClient) -> None:
    batch = sigmoid_batch(200, seed=6)
    batch["labels"] = [bool(y) for y in batch["labels"]]
    assert client.post(f"{BASE}/fit", json={**batch, "method": "platt"}).status_code == 201


@pytest.mark.parametrize("query", ["", "?intervals=false"])  # the hot path; the route
@pytest.mark.parametrize("scores", [[0.5, True], [False], [[True]]])
def test_predict_refuses_boolean_scores(fitted: TestClient, query: str, scores: Any) -> None:
    r = fitted.post(f"{BASE}/predict{query}", json={"scores": scores})
    assert r.status_code == 422, r.text
    assert "is a boolean; scores must be numbers" in r.json()["detail"]


def test_diagnostics_and_compare_refuse_boolean_scores(fitted: TestClient) -> None:
    batch = sigmoid_batch(100, seed=7)
    batch["scores"][40] = True
    for path in (f"{BASE}/versions/1/diagnostics", f"{BASE}/compare"):
        assert_problem(fitted.post(path, json=batch), 422, "scores[40] is a boolean")


@pytest.mark.parametrize(
    ("data", "shape", "where"),
    [
        ([0.5, True, 0.1], [3], "data[1]"),
        ([True, False], [2], "data[0]"),
        ([[0.5], [True]], [2, 1], "data[1][0]"),
        ([[[True]]], [1], "data[0][0][0]"),
    ],
)
def test_infer_refuses_boolean_scores(
    fitted: TestClient, data: list[Any], shape: list[int], where: str
) -> None:
    tensor = {"name": "scores", "shape": shape, "datatype": "FP64", "data": data}
    r = fitted.post("/v2/models/churn/infer", json={"inputs": [tensor]})
    assert r.status_code == 400, r.text
    assert f"inputs[0].{where} is a boolean; scores must be numbers" in r.json()["error"]


@pytest.mark.parametrize(("media_type", "encode"), ENCODINGS)
def test_a_boolean_score_column_is_refused(
    client: TestClient, media_type: str, encode: Any
) -> None:
    labels = np.tile([0, 1], 50)
    table = pa.table({"score": pa.array(labels.astype(bool)), "label": pa.array(labels)})
    r = client.post(f"{BASE}/fit", content=encode(table), headers={"content-type": media_type})
    assert_problem(r, 422, "column.score", "boolean column; scores must be numbers")
    assert versions(client) == 0
    multiclass = pa.table(
        {
            "score_0": pa.array(np.linspace(0, 1, 100)),
            "score_1": pa.array(labels.astype(bool)),
            "label": pa.array(labels),
        }
    )
    r = client.post(
        f"{BASE}/fit?method=temperature",
        content=encode(multiclass),
        headers={"content-type": media_type},
    )
    assert_problem(r, 422, "column.score_1", "boolean")
