"""The web view on SQLite (its reads are the service's, tested on both backends elsewhere):
an open app, an app with keys, and the calibrators its pages show: on an app of the test's
own (``shown``) for a test that changes them or patches what its jobs run, else on one app
the package's tests share (``shared_shown``: test_pages.py's and test_accessibility.py's),
whose worker processes keep the versions' reports between them: a calibrator page's reports,
computed per version with the default 1000 resamples, take a second of CPU each."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.keys import new_key
from app.main import create_app
from app.service import diagnosis
from app.settings import Settings
from app.store import Database, LoggedPrediction
from tests.api.helpers import FEW_RESAMPLES, sigmoid_batch
from tests.client import TestClient
from tests.conftest import shared_client, unchanged

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


def show(client: TestClient) -> None:
    """Fit and alias what the pages show, through the API of an open client."""
    fit(client, "churn", "platt")
    fit(client, "churn", "isotonic")
    fit(client, "churn", "auto", tags={"team": "risk"})
    fit(client, "other", "platt", tags={"team": "ops"})
    moved = client.put("/v1/calibrators/churn/aliases/production", json={"version": 2})
    assert moved.status_code == 200, moved.text


def log_day(
    client: TestClient, name: str, version: int, day: datetime, seed: int, *, labelled: bool
) -> None:
    """60 predictions of ``name`` by ``version`` in the first hour of ``day``, their even ones
    labelled when ``labelled``."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(0.3, 1.5, 60)
    probabilities = 1 / (1 + np.exp(-1.2 * scores))
    labels = (rng.random(60) < probabilities).astype(int)
    rows = [
        LoggedPrediction(
            name,
            f"{name}-{seed}-{i}",
            version,
            day + timedelta(seconds=60 * i),
            float(scores[i]),
            float(probabilities[i]),
        )
        for i in range(60)
    ]
    outcomes = [(rows[i].client_id, int(labels[i])) for i in range(0, 60, 2)] if labelled else []
    service = client.app.state.service  # type: ignore[attr-defined]
    with service.database.transaction(write=True) as repo:
        repo.log_predictions(rows)
        if outcomes:
            repo.record_outcomes(name, outcomes, day)


@pytest.fixture
def shown(open_client: TestClient) -> TestClient:
    """``churn`` v1 platt, v2 isotonic, v3 auto (tagged team:risk), ``production`` on v2;
    ``other`` v1 tagged team:ops."""
    show(open_client)
    return open_client


@pytest.fixture(scope="package")
def shared_shown(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    """What ``shown`` holds, on an open app the package's tests share: for the tests that
    only read it (or patch this process, for their own duration)."""
    folder: Path = tmp_path_factory.mktemp("shown")
    with shared_client("sqlite", request, folder) as client:
        show(client)
        with unchanged(client):
            yield client


@pytest.fixture
def few_page_resamples(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The calibrator page's reports from :data:`~tests.api.helpers.FEW_RESAMPLES` resamples
    instead of the default 1000, for a test that reads none of their intervals: a version's
    then takes a tenth of a second, not a second. Its test is marked ``in_threads``: its jobs
    run in this process, where the patch is."""
    assert request.node.get_closest_marker("in_threads"), "the patch would not reach the workers"
    fewer = replace(diagnosis.DEFAULT_REPORT, bootstrap=FEW_RESAMPLES)
    monkeypatch.setattr(diagnosis, "DEFAULT_REPORT", fewer)
