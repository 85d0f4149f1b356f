"""An app on a fresh, migrated database per test (SQLite and PostgreSQL), and a client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from app.store import Database

from .helpers import sigmoid_batch


@pytest.fixture
def settings(database_url: str) -> Settings:
    # A queue deep enough for the tests that fire dozens of fits at once to test numbering;
    # test_work.py tests the bound itself.
    return Settings(
        database_url=database_url, cv_folds=5, latest_refresh_seconds=1.0, max_queued_fits=64
    )


@pytest.fixture
def client(settings: Settings, database: Database) -> Iterator[TestClient]:
    app = create_app(settings, database=database)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def fitted(client: TestClient) -> TestClient:
    """``client`` with ``churn`` v1 fitted (platt on the default sigmoid batch)."""
    fit = client.post("/v1/calibrators/churn/fit", json={**sigmoid_batch(), "method": "platt"})
    assert fit.status_code == 201, fit.text
    return client
