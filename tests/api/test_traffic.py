"""Predictions logged under the client's ids, and outcomes posted against them (issue 11)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from app.store.models import PendingOutcome, Prediction
from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch

BASE = "/v1/calibrators/churn"


def logged(client: TestClient) -> dict[str, dict[str, Any]]:
    """Every logged prediction by client id, once the buffer is written."""
    service = client.app.state.service  # type: ignore[attr-defined]
    service.prediction_log.flush()
    with service.database.transaction() as repo:
        rows = repo._session.execute(select(Prediction)).scalars().all()
        return {
            r.client_id: {
                "name": r.name,
                "version": r.version,
                "score": r.score,
                "probability": r.probability,
                "label": r.label,
            }
            for r in rows
        }


@pytest.mark.parametrize("query", ["", "?intervals=false"])  # the hot path; the route
def test_predict_with_ids_logs_each_prediction_as_answered(fitted: TestClient, query: str) -> None:
    scores = [-1.0, 0.25, 2.5]
    r = fitted.post(f"{BASE}/predict{query}", json={"scores": scores, "ids": ["a", "b", "c"]})
    assert r.status_code == 200, r.text
    answered = r.json()["probabilities"]
    assert r.json()["logged"] == 3
    rows = logged(fitted)
    assert sorted(rows) == ["a", "b", "c"]
    for client_id, score, probability in zip("abc", scores, answered, strict=True):
        assert rows[client_id] == {
            "name": "churn",
            "version": 1,
            "score": score,
            "probability": probability,
            "label": None,
        }


def test_predict_without_ids_logs_nothing(fitted: TestClient) -> None:
    assert fitted.post(f"{BASE}/predict", json={"scores": [0.5]}).status_code == 200
    assert logged(fitted) == {}


@pytest.mark.parametrize(
    ("ids", "loc", "message"),
    [
        (["a"], ["body", "ids"], "has 1 ids for 2 rows of scores"),
        (["a", "a"], ["body", "ids", 1], "repeats the id 'a'"),
        (["a", "x" * 129], ["body", "ids", 1], "the limit is 128"),
        (["a", ""], ["body", "ids", 1], "must not be empty"),
    ],
)
def test_ids_must_match_the_scores_one_to_one(
    fitted: TestClient, ids: list[str], loc: list[Any], message: str
) -> None:
    r = fitted.post(f"{BASE}/predict", json={"scores": [0.1, 0.2], "ids": ids})
    problem = assert_problem(r, 422, message)
    assert problem["errors"][0]["loc"] == loc
    assert logged(fitted) == {}


def test_outcomes_label_the_logged_predictions(fitted: TestClient) -> None:
    fitted.post(f"{BASE}/predict", json={"scores": [0.1, 0.2, 0.3], "ids": ["a", "b", "c"]})
    logged(fitted)  # written
    r = fitted.post(f"{BASE}/outcomes", json={"ids": ["a", "b", "late"], "labels": [1, 0, 1]})
    assert r.status_code == 200, r.text
    assert r.json() == {"matched": 2, "pending": 1, "duplicates": 0, "overwritten": 0}
    again = fitted.post(
        f"{BASE}/outcomes", content="id,label\na,1\nc,1\n", headers={"content-type": "text/csv"}
    )
    assert again.json() == {"matched": 1, "pending": 0, "duplicates": 1, "overwritten": 0}
    fitted.post(f"{BASE}/predict", json={"scores": [0.9], "ids": ["late"]})
    rows = logged(fitted)
    assert {i: rows[i]["label"] for i in rows} == {"a": 1, "b": 0, "c": 1, "late": 1}
    service = fitted.app.state.service  # type: ignore[attr-defined]
    with service.database.transaction() as repo:
        assert repo._session.execute(select(PendingOutcome)).all() == []


def test_a_different_label_is_a_conflict_unless_overwritten(fitted: TestClient) -> None:
    fitted.post(f"{BASE}/predict", json={"scores": [0.1, 0.2], "ids": ["a", "b"]})
    logged(fitted)
    fitted.post(f"{BASE}/outcomes", json={"ids": ["a"], "labels": [1]})
    conflict = fitted.post(f"{BASE}/outcomes", json={"ids": ["b", "a"], "labels": [1, 0]})
    assert_problem(conflict, 409, "1 ids already have a different label ('a')")
    assert logged(fitted)["b"]["label"] is None  # nothing of the refused request
    replaced = fitted.post(f"{BASE}/outcomes?overwrite=true", json={"ids": ["a"], "labels": [0]})
    assert replaced.json() == {"matched": 0, "pending": 0, "duplicates": 0, "overwritten": 1}
    assert logged(fitted)["a"]["label"] == 0


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"ids": ["a", "b"], "labels": [1]}, 422, "has 1 labels for 2 ids"),
        ({"ids": ["a", "a"], "labels": [1, 1]}, 422, "repeats the id 'a'"),
        ({"ids": ["a"], "labels": [-1]}, 422, ">= 0"),
        ({"ids": [], "labels": []}, 422, "ids"),
        ({"ids": ["a", "b", "c"], "labels": [1, 0, 2]}, 422, "labels[2] is 2"),
    ],
)
def test_bad_outcomes_are_refused_and_nothing_is_stored(
    fitted: TestClient, body: dict[str, Any], status: int, fragment: str
) -> None:
    fitted.post(f"{BASE}/predict", json={"scores": [0.1], "ids": ["a"]})
    assert_problem(fitted.post(f"{BASE}/outcomes", json=body), status, fragment)
    assert logged(fitted)["a"]["label"] is None  # nothing stored, not even the good ones


def test_outcomes_of_an_unknown_calibrator_are_not_found(client: TestClient) -> None:
    r = client.post("/v1/calibrators/nobody/outcomes", json={"ids": ["a"], "labels": [1]})
    assert_problem(r, 404, "nobody")


def test_multiclass_rows_are_logged_as_rows(client: TestClient) -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(300, 3))
    labels = logits.argmax(axis=1).tolist()
    fit = client.post(
        "/v1/calibrators/k3/fit",
        json={"scores": logits.tolist(), "labels": labels, "method": "temperature"},
    )
    assert fit.status_code == 201, fit.text
    r = client.post(
        "/v1/calibrators/k3/predict", json={"scores": logits[:2].tolist(), "ids": ["p", "q"]}
    )
    assert r.status_code == 200, r.text
    service = client.app.state.service  # type: ignore[attr-defined]
    service.prediction_log.flush()
    with service.database.transaction() as repo:
        row = repo._session.execute(
            select(Prediction).where(Prediction.client_id == "q")
        ).scalar_one()
        assert np.frombuffer(row.scores_row, "<f8").tolist() == logits[1].tolist()
        assert np.frombuffer(row.probabilities_row, "<f8").tolist() == r.json()["probabilities"][1]


def test_a_calibrator_fitted_again_after_a_delete_starts_without_the_old_traffic(
    fitted: TestClient,
) -> None:
    # The test flushes: the log's writer, which flushes every second on its own, would
    # otherwise write "c" whenever a second ends between its predict and the delete.
    fitted.app.state.service.prediction_log.close()  # type: ignore[attr-defined]
    fitted.post(f"{BASE}/predict", json={"scores": [0.1, 0.2], "ids": ["a", "b"]})
    logged(fitted)
    fitted.post(f"{BASE}/outcomes", json={"ids": ["a", "early"], "labels": [1, 0]})
    buffered = fitted.post(f"{BASE}/predict", json={"scores": [0.3], "ids": ["c"]})
    assert buffered.status_code == 200  # still in the buffer when the calibrator goes
    discarded = REGISTRY.get_sample_value("calibration_traffic_discarded_total") or 0.0
    assert fitted.delete(BASE).status_code == 204
    assert logged(fitted) == {}  # written after the delete: not logged either
    assert REGISTRY.get_sample_value("calibration_traffic_discarded_total") == discarded + 1
    refit = fitted.post(f"{BASE}/fit", json={**sigmoid_batch(), "method": "platt"})
    assert refit.json()["version"] == 2
    fitted.post(f"{BASE}/predict", json={"scores": [0.4, 0.5], "ids": ["b", "early"]})
    rows = logged(fitted)
    assert {i: (r["version"], r["label"]) for i, r in rows.items()} == {
        "b": (2, None),  # not a duplicate of the old b
        "early": (2, None),  # the old calibrator's pending outcome is not joined
    }
    r = fitted.post(f"{BASE}/outcomes", json={"ids": ["a", "b"], "labels": [0, 1]})
    assert r.json() == {"matched": 1, "pending": 1, "duplicates": 0, "overwritten": 0}
    windows = fitted.get(f"{BASE}/monitoring", params={"window": "1d"}).json()["windows"]
    assert {(w["version"], w["n_predictions"]) for w in windows if w["n_predictions"]} == {(2, 2)}


def test_a_full_buffer_says_how_many_were_logged_and_counts_the_rest(
    fitted: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = fitted.app.state.service  # type: ignore[attr-defined]
    monkeypatch.setattr(service.prediction_log, "capacity", 4)
    service.prediction_log.flush()
    before = REGISTRY.get_sample_value("calibration_traffic_dropped_total") or 0.0
    ids = [f"burst-{i}" for i in range(6)]
    r = fitted.post(f"{BASE}/predict", json={"scores": [0.5] * 6, "ids": ids})
    assert r.status_code == 200  # predict never fails for the log's sake
    assert r.json()["logged"] == 4
    assert REGISTRY.get_sample_value("calibration_traffic_dropped_total") == before + 2
    assert sorted(logged(fitted)) == ids[:4]
    assert "logged" not in fitted.post(f"{BASE}/predict", json={"scores": [0.5]}).json()


@pytest.mark.parametrize(
    ("csv", "fragment"),
    [
        ("id,label\na,\u00b2\n", "row[1].label"),  # isdigit, but no int
        ("id,label\na,\uff11\n", "row[1].label"),  # a fullwidth 1
        ("id,label\na,\u0661\n", "row[1].label"),  # an Arabic-Indic 1
    ],
)
def test_csv_labels_are_ascii_digits(fitted: TestClient, csv: str, fragment: str) -> None:
    r = fitted.post(f"{BASE}/outcomes", content=csv.encode(), headers={"content-type": "text/csv"})
    body = assert_problem(r, 422, "not a class index")
    assert any(fragment == _where(e["loc"]) for e in body["errors"]), body


def _where(loc: list[Any]) -> str:
    return f"{loc[1]}[{loc[2]}].{loc[3]}"


def test_csv_ids_are_taken_exactly_as_json_ids_are(fitted: TestClient) -> None:
    fitted.post(f"{BASE}/predict", json={"scores": [0.5], "ids": [" sp "]})
    csv = b'id,label\n" sp ",1\n'
    r = fitted.post(f"{BASE}/outcomes", content=csv, headers={"content-type": "text/csv"})
    assert r.status_code == 200, r.text
    fitted.app.state.service.prediction_log.flush()  # type: ignore[attr-defined]
    assert logged(fitted)[" sp "]["label"] == 1
