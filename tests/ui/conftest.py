"""The web view on SQLite (its reads are the service's, tested on both backends elsewhere):
an open app, an app with keys, and the calibrators its pages show."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.keys import new_key
from app.main import create_app
from app.settings import Settings
from app.store import Database
from tests.api.helpers import sigmoid_batch

SECRET = "a-test-secret-that-is-long-enough-0123456789"


@pytest.fixture
def backend() -> str:
    """SQLite only."""
    return "sqlite"


@pytest.fixture
def open_client(database_url: str, database: Database) -> Iterator[TestClient]:
    """The service without keys: the web view needs none."""
    app = create_app(Settings(database_url=database_url), database=database)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture
def keys() -> dict[str, Any]:
    """A read key and a write key, and their configured entries."""
    read, read_entry = new_key("viewer", "read")
    write, write_entry = new_key("admin", "write")
    return {"read": read, "write": write, "entries": (read_entry, write_entry)}


@pytest.fixture
def keyed_client(
    database_url: str, database: Database, keys: dict[str, Any]
) -> Iterator[TestClient]:
    """The service with keys and a session secret; ``churn`` fitted through the API."""
    settings = Settings(database_url=database_url, api_keys=keys["entries"], ui_secret=SECRET)
    app = create_app(settings, database=database)
    with TestClient(app, raise_server_exceptions=False) as client:
        fitted = client.post(
            "/v1/calibrators/churn/fit",
            json={**sigmoid_batch(), "method": "platt"},
            headers={"Authorization": f"Bearer {keys['write']}"},
        )
        assert fitted.status_code == 201, fitted.text
        yield client


def fit(client: TestClient, name: str, method: str, **extra: Any) -> dict[str, Any]:
    """Fit ``name`` through the API of an open client; the version's document."""
    answer = client.post(
        f"/v1/calibrators/{name}/fit", json={**sigmoid_batch(), "method": method, **extra}
    )
    assert answer.status_code == 201, answer.text
    document: dict[str, Any] = answer.json()
    return document


@pytest.fixture
def shown(open_client: TestClient) -> TestClient:
    """``churn`` v1 platt, v2 isotonic, v3 auto (tagged team:risk), ``production`` on v2;
    ``other`` v1 tagged team:ops."""
    fit(open_client, "churn", "platt")
    fit(open_client, "churn", "isotonic")
    fit(open_client, "churn", "auto", tags={"team": "risk"})
    fit(open_client, "other", "platt", tags={"team": "ops"})
    moved = open_client.put("/v1/calibrators/churn/aliases/production", json={"version": 2})
    assert moved.status_code == 200, moved.text
    return open_client
