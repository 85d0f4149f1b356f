"""``GET …/versions/{selector}/decision`` (API.md, Traffic): Elkan's threshold for the costs
asked, and the mean cost of deciding at it on the version's out-of-fold predictions, recomputed
here from the stored batch, on SQLite and PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest

from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch

BASE = "/v1/calibrators/churn"


def _stored(client: TestClient) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    service = client.app.state.service  # type: ignore[attr-defined]
    with service.database.transaction() as repo:
        record = repo.get_version("churn", 1)
        stored = service.diagnosis.fitting_batch(record, repo)
    return np.asarray(stored.out_of_fold), np.asarray(stored.labels), np.asarray(stored.weights)


def _per_case(p: np.ndarray, y: np.ndarray, t: float, fp: float, fn: float) -> np.ndarray:
    d = p > t
    cost: np.ndarray = fp * (d & (y == 0)) + fn * (~d & (y == 1))
    return cost


def _cost(p: np.ndarray, y: np.ndarray, w: np.ndarray, t: float, fp: float, fn: float) -> float:
    return float((w * _per_case(p, y, t, fp, fn)).sum() / w.sum())


def test_the_threshold_and_its_cost_on_the_out_of_fold_predictions(client: TestClient) -> None:
    batch = sigmoid_batch(1_000)
    weights = np.random.default_rng(3).uniform(0.5, 2.0, size=1_000).round(3)
    fit = client.post(
        f"{BASE}/fit", json={**batch, "sample_weight": weights.tolist(), "method": "platt"}
    )
    assert fit.status_code == 201, fit.text
    r = client.get(f"{BASE}/versions/latest/decision?cost_fp=1&cost_fn=5")
    assert r.status_code == 200, r.text
    found = r.json()
    assert found["threshold"] == pytest.approx(1 / 6)
    p, y, w = _stored(client)
    assert found["expected_cost"] == pytest.approx(_cost(p, y, w, 1 / 6, 1, 5), abs=1e-12)
    half = found["at_half"]
    assert half["expected_cost"] == pytest.approx(_cost(p, y, w, 0.5, 1, 5), abs=1e-12)
    assert found["expected_cost"] < half["expected_cost"]  # the threshold pays for itself
    low, high = found["intervals"]["expected_cost"]
    per_case = _per_case(p, y, 1 / 6, 1, 5)
    mean = float(w @ per_case / w.sum())
    error = float(np.sqrt((w**2) @ (per_case - mean) ** 2) / w.sum())  # a weighted mean's
    assert (high - low) / 2 == pytest.approx(1.959964 * error, rel=1e-6)
    assert low >= 0  # no case costs less than nothing without benefits
    # benefits: the threshold moves as Elkan's formula says
    b = client.get(f"{BASE}/versions/1/decision?cost_fp=2&cost_fn=1&benefit_tp=1&benefit_tn=1")
    assert b.json()["threshold"] == pytest.approx(3 / 5)


@pytest.mark.parametrize(
    ("query", "loc"),
    [
        ("cost_fp=-1", ["query", "cost_fp"]),
        ("cost_fn=nan", ["query", "cost_fn"]),
        ("cost_fp=0&cost_fn=0", ["query"]),
        ("benefit_tp=inf", ["query", "benefit_tp"]),
        ("cost_fp=x", ["query", "cost_fp"]),
    ],
)
def test_costs_out_of_range_are_422(fitted: TestClient, query: str, loc: list[str]) -> None:
    problem = assert_problem(fitted.get(f"{BASE}/versions/1/decision?{query}"), 422)
    assert problem["errors"][0]["loc"] == loc
    assert not problem["detail"].startswith("body")


def test_a_multiclass_version_has_no_threshold(client: TestClient) -> None:
    rng = np.random.default_rng(1)
    z = rng.normal(size=(300, 3))
    fit = client.post(
        "/v1/calibrators/three/fit",
        json={
            "scores": z.round(6).tolist(),
            "labels": z.argmax(1).tolist(),
            "method": "temperature",
        },
    )
    assert fit.status_code == 201, fit.text
    r = client.get("/v1/calibrators/three/versions/1/decision")
    problem = assert_problem(r, 422, "multiclass")
    assert problem["errors"][0]["loc"] == ["path", "selector"]
    assert client.get(f"{BASE}/versions/1/decision").status_code == 404


def test_a_cost_given_twice_is_422(fitted: TestClient) -> None:
    r = fitted.get(f"{BASE}/versions/latest/decision?cost_fp=1&cost_fp=5")
    assert assert_problem(r, 422, "once")["errors"][0]["loc"] == ["query", "cost_fp"]
