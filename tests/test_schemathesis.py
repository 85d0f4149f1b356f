"""schemathesis over the OpenAPI description: every operation, authenticated, 100 examples each.

Each operation is fuzzed against its own app on a fresh SQLite copy of one seeded database
(calibrator ``churn``: versions 1-4, alias ``production`` -> 3, tag ``team:risk``), so that the
spec's examples (``churn``, ``latest``, ``3``, ``production``) reach real objects and a
fuzzed DELETE in one operation's test cannot starve the next one. The checks: no 5xx, every
status documented, every content type documented, every body valid against its schema.
The seed is fixed; ``FUZZ_SEED=n FUZZ_EXAMPLES=m`` explores further by hand. Operations without
parameters (``/healthz``, ``/readyz``, ``/metrics``) have one possible case, which Hypothesis
runs once.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.keys import new_key
from app.main import create_app
from app.settings import Settings
from app.store import Database
from app.store.migrate import upgrade
from tests.api.helpers import sigmoid_batch

KEY, ENTRY = new_key("fuzzer", "write")
AUTH = {"Authorization": f"Bearer {KEY}"}
CHECKS = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def _settings(url: str) -> Settings:
    return Settings(database_url=url, api_keys=(ENTRY,), cv_folds=2, latest_refresh_seconds=0)


@pytest.fixture(scope="module")
def seeded_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SQLite file migrated to head holding ``churn`` v1-v4, alias ``production`` -> 3."""
    path = tmp_path_factory.mktemp("fuzz-template") / "seeded.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    database = Database(url, _settings(url))
    try:
        with TestClient(create_app(_settings(url), database=database), headers=AUTH) as client:
            for seed in range(4):
                body = {**sigmoid_batch(60, seed=seed), "method": "platt"}
                if seed == 2:
                    body["tags"] = {"team": "risk"}
                assert client.post("/v1/calibrators/churn/fit", json=body).status_code == 201
            answer = client.put("/v1/calibrators/churn/aliases/production", json={"version": 3})
            assert answer.status_code == 200, answer.text
    finally:
        database.dispose()
    return path


@pytest.fixture
def app(seeded_template: Path, tmp_path: Path) -> Iterator[FastAPI]:
    """A fresh copy of the seeded database behind a new app, for one operation's examples."""
    path = tmp_path / "fuzz.db"
    shutil.copyfile(seeded_template, path)
    url = f"sqlite:///{path}"
    database = Database(url, _settings(url))
    yield create_app(_settings(url), database=database)
    asgi.shutdown_lifespans()  # schemathesis started the app's lifespan on its first request
    database.dispose()


# The description does not depend on the database; each test sends its cases to its own app.
schema = schemathesis.openapi.from_dict(create_app(_settings("sqlite://")).openapi())
schema.config.update(headers=AUTH)
# The same cases on every run.
schema.config.seed = int(os.environ.get("FUZZ_SEED", "20260505"))
EXAMPLES = max(100, int(os.environ.get("FUZZ_EXAMPLES", "100")))

# What the seeded database holds, per path parameter: half the generated values are swapped for
# one of these, so that fuzzed bodies and queries reach real versions, not only 404s.
REAL_PATH_VALUES: dict[str, list[Any]] = {
    "name": ["churn"],
    "selector": ["latest", "1", "2", "3", "4", "production"],
    "alias": ["production", "staging"],
    "version": [1, 2, 3, 4],
}


@schema.hook
def flatmap_path_parameters(
    context: schemathesis.HookContext, path_parameters: dict[str, Any] | None
) -> st.SearchStrategy[dict[str, Any] | None]:
    if not path_parameters:
        return st.just(path_parameters)
    return st.fixed_dictionaries(
        {
            key: st.one_of(st.just(value), st.sampled_from(REAL_PATH_VALUES[key]))
            if key in REAL_PATH_VALUES
            else st.just(value)
            for key, value in path_parameters.items()
        }
    )


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_the_api_conforms_to_its_description(case: schemathesis.Case[Any], app: FastAPI) -> None:
    case.call_and_validate(app=app, headers=AUTH, checks=CHECKS)
