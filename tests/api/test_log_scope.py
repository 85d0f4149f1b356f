"""The ``log`` scope: logging predictions under ids is a write to the traffic log, so a read
key may predict but not log (issue 25's hostile client poisoned the log with a read key)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from app.access.api_keys import ApiKey, parse_api_keys
from app.keys import new_key
from app.main import create_app
from app.settings import Settings
from app.store import Database
from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch
from .test_traffic import logged

BASE = "/v1/calibrators/churn"
READ_KEY, READ_ENTRY = new_key("dashboard", "read")
LOG_KEY, LOG_ENTRY = new_key("model-server", "log")
WRITE_KEY, WRITE_ENTRY = new_key("admin", "write")
KEYS = ",".join(entry.entry() for entry in (READ_ENTRY, LOG_ENTRY, WRITE_ENTRY))
READ, LOG, WRITE = ({"Authorization": f"Bearer {key}"} for key in (READ_KEY, LOG_KEY, WRITE_KEY))
DENIED = "logging predictions (ids) needs a key of scope log or write"


@pytest.fixture
def secured(database_url: str, database: Database) -> Iterator[TestClient]:
    """Three keys, one per scope; ``churn`` v1 fitted and in memory (the hot path serves it)."""
    settings = Settings(database_url=database_url, api_keys=KEYS, latest_refresh_seconds=60.0)
    with TestClient(create_app(settings, database=database), raise_server_exceptions=False) as c:
        fit = c.post(f"{BASE}/fit", json={**sigmoid_batch(200), "method": "platt"}, headers=WRITE)
        assert fit.status_code == 201, fit.text
        yield c


def infer_body(ids: list[str] | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "inputs": [{"name": "scores", "shape": [2], "datatype": "FP64", "data": [0.1, 2.0]}]
    }
    if ids is not None:
        body["parameters"] = {"ids": ids}
    return body


# the hot path answers the first, the regular route the second
@pytest.mark.parametrize("query", ["?version=1", "?version=1&intervals=false"])
def test_a_read_key_may_not_log_predictions(secured: TestClient, query: str) -> None:
    body = {"scores": [10.0, 10.0], "ids": ["tx-0", "tx-1"]}
    r = secured.post(f"{BASE}/predict{query}", json=body, headers=READ)
    assert_problem(r, 403, DENIED, "dashboard")
    assert logged(secured) == {}  # nothing recorded
    r = secured.post(f"{BASE}/predict{query}", json={"scores": [10.0]}, headers=READ)
    assert r.status_code == 200, r.text  # predicting without ids reads, as before
    assert "logged" not in r.json()


@pytest.mark.parametrize("path", ["/v2/models/churn/infer", "/v2/models/churn/versions/1/infer"])
def test_a_read_key_may_not_log_inferences(secured: TestClient, path: str) -> None:
    r = secured.post(path, json=infer_body(["tx-0", "tx-1"]), headers=READ)
    assert r.status_code == 403, r.text
    assert DENIED in r.json()["error"]
    assert logged(secured) == {}
    assert secured.post(path, json=infer_body(None), headers=READ).status_code == 200


@pytest.mark.parametrize("headers", [LOG, WRITE], ids=["log", "write"])
def test_log_and_write_keys_log(secured: TestClient, headers: dict[str, str]) -> None:
    r = secured.post(f"{BASE}/predict", json={"scores": [0.5], "ids": ["a"]}, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["logged"] == 1
    r = secured.post("/v2/models/churn/infer", json=infer_body(["b", "c"]), headers=headers)
    assert r.status_code == 200, r.text
    assert sorted(logged(secured)) == ["a", "b", "c"]


def test_a_log_key_reads_but_does_not_write(secured: TestClient) -> None:
    assert secured.get(BASE, headers=LOG).status_code == 200
    r = secured.post(f"{BASE}/fit", json=sigmoid_batch(50), headers=LOG)
    assert_problem(r, 403, "model-server", "write")
    assert r.headers["www-authenticate"].endswith('scope="write"')
    r = secured.post(f"{BASE}/outcomes", json={"ids": ["a"], "labels": [1]}, headers=LOG)
    assert_problem(r, 403, "write")


def test_open_mode_still_logs_without_a_key(fitted: TestClient) -> None:
    r = fitted.post(f"{BASE}/predict", json={"scores": [0.5], "ids": ["a"]})
    assert r.status_code == 200, r.text
    assert sorted(logged(fitted)) == ["a"]


def test_scopes_are_ordered_read_log_write() -> None:
    (read, log, write) = parse_api_keys(KEYS)
    assert log.scope == "log"
    assert [key.allows("read") for key in (read, log, write)] == [True, True, True]
    assert [key.allows("log") for key in (read, log, write)] == [False, True, True]
    assert [key.allows("write") for key in (read, log, write)] == [False, False, True]


def test_the_key_helper_makes_log_keys() -> None:
    command = [sys.executable, "-m", "app.keys", "--name", "ms", "--scope", "log"]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    entry = dict(line.split(":", 1) for line in out.splitlines())["entry"].strip()
    assert entry.startswith("ms:log:")
    (key,) = parse_api_keys(entry)
    assert isinstance(key, ApiKey)
    assert key.scope == "log"
