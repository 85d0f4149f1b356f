"""An app on a fresh, migrated database per test (SQLite and PostgreSQL), and a client; and
for a module's tests that only read, one app per backend they share (``shared_app``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.main import create_app
from app.settings import Settings
from app.store import Database
from tests.client import TestClient
from tests.conftest import shared_client

from .helpers import sigmoid_batch

OPTIONS: dict[str, Any] = {"cv_folds": 5, "latest_refresh_seconds": 1.0, "max_queued_fits": 64}
"""The settings of the tests' apps but their database. A queue deep enough for the tests that
fire dozens of fits at once to test numbering; test_work.py tests the bound itself."""


@pytest.fixture
def settings(database_url: str, blob_settings: dict[str, Any]) -> Settings:
    return Settings(database_url=database_url, **OPTIONS, **blob_settings)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def shared_app(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    """``client``'s app, one per backend for the module's tests that only read it: a
    module-scoped fixture of the module fits what they read in it, once."""
    folder = tmp_path_factory.mktemp(f"shared-{request.param}")
    with shared_client(request.param, request, folder, **OPTIONS) as client:
        yield client


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
