"""Boolean query parameters are true or false (1 or 0 too, as before), nothing else: issue
25's hostile client found ``?force=yes`` counted as true."""

from __future__ import annotations

import pytest

from tests.client import TestClient

from .helpers import assert_problem

BASE = "/v1/calibrators/churn"


@pytest.mark.parametrize("value", ["yes", "on", "y", "t", "2", "", "truee"])
def test_force_must_be_true_or_false(fitted: TestClient, value: str) -> None:
    assert fitted.put(f"{BASE}/aliases/production", json={"version": 1}).status_code == 200
    r = fitted.delete(f"{BASE}/versions/1?force={value}")
    detail = assert_problem(r, 422, "force", "true or false")["detail"]
    assert repr(value) in detail
    assert fitted.get(f"{BASE}/versions/1").status_code == 200  # nothing deleted
    assert fitted.get(f"{BASE}/versions/production").status_code == 200


@pytest.mark.parametrize("value", ["true", "True", "1"])
def test_force_true_still_deletes(fitted: TestClient, value: str) -> None:
    assert fitted.put(f"{BASE}/aliases/production", json={"version": 1}).status_code == 200
    assert fitted.delete(f"{BASE}/versions/1?force={value}").status_code == 204


def test_force_false_keeps_the_409(fitted: TestClient) -> None:
    assert fitted.put(f"{BASE}/aliases/production", json={"version": 1}).status_code == 200
    for value in ("false", "0", "FALSE"):
        assert fitted.delete(f"{BASE}/versions/1?force={value}").status_code == 409


def test_overwrite_must_be_true_or_false(fitted: TestClient) -> None:
    body = {"ids": ["a"], "labels": [1]}
    r = fitted.post(f"{BASE}/outcomes?overwrite=yes", json=body)
    assert_problem(r, 422, "overwrite", "true or false")
    r = fitted.post(f"{BASE}/outcomes", json=body)
    assert r.json()["duplicates"] == 0  # the refused request stored nothing
    assert fitted.post(f"{BASE}/outcomes?overwrite=true", json=body).status_code == 200


def test_intervals_must_be_true_or_false(fitted: TestClient) -> None:
    r = fitted.post(f"{BASE}/predict?intervals=yes", json={"scores": [0.5]})
    assert_problem(r, 422, "intervals", "true or false")
    assert fitted.post(f"{BASE}/predict?intervals=0", json={"scores": [0.5]}).status_code == 200
