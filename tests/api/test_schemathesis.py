"""schemathesis over the OpenAPI description: every operation, authenticated, fuzzed.

Each operation is fuzzed against its own app on a fresh copy of one seeded database
(calibrator ``churn``: versions 1-4, alias ``production`` -> 3, tag ``team:risk``), so that
the spec's examples (``churn``, ``latest``, ``3``, ``production``) reach real objects and a
fuzzed DELETE in one operation's test cannot starve the next one. The checks: no 5xx, every
status documented, every content type documented, every body valid against its schema.

Each test runs schemathesis's three phases per operation: the spec's examples, the coverage
phase (deterministic cases at and beyond each parameter's bounds: missing, empty, too long,
too large, of the wrong type; from a handful for ``/healthz`` to some 270 for POST
diagnostics, whatever the number of examples) and the fuzzing phase, whose number of
examples is what differs here. What runs where, and why:

- on SQLite, every operation that answers JSON, :data:`EXAMPLES` (50) fuzzed examples each:
  the contract; the four that answer a picture (``diagnostics.png`` and ``.svg``,
  ``monitoring.png`` and ``.svg``), :data:`PICTURE_EXAMPLES` (20) each, beside the coverage
  phase's valid cases: their parameters are their JSON twins', fuzzed 50 times and sent every
  invalid case there, and each valid case draws (a quarter of this module's time went to
  drawing at 100);
- on PostgreSQL, every operation but the four that answer a picture, :data:`POSTGRES_EXAMPLES`
  (25) fuzzed examples each, beside the coverage phase's valid cases. What differs there is the
  database's own refusals (a NUL byte in a text column, an integer beyond BIGINT, a timestamp
  out of range), which must answer 4xx, never 500. The coverage phase's valid cases send values
  at their schema bounds (a fit's description of 9,999 and of 10,000 characters, the longest
  allowed); its invalid cases are refused before any query, as on SQLite, where they all run.
  The NUL bytes and the integers beyond 2^63 come from the fuzzing phase, whose 25 examples per
  operation send a few of each on this seed (NUL bytes to ``fit``, ``outcomes`` and POST
  diagnostics; integers beyond 2^63 to the calibrators' list, ``outcomes``, ``predict``, a
  version's DELETE and monitoring): fewer than 100 would, the price of this run's length, and
  ``FUZZ_EXAMPLES`` raises it. The pictures (``diagnostics.png`` and ``.svg``,
  ``monitoring.png`` and ``.svg``) make the same reads as their JSON twins, which run there, and
  are drawn by matplotlib, which no database touches;
- POST diagnostics with an ``Accept`` that asks for a PNG or an SVG, on SQLite only,
  :data:`PICTURE_EXAMPLES` (20) fuzzed examples per ``Accept`` value beside the coverage
  phase's valid cases: for the same reason, and since its fuzzed bodies are almost all
  refused before any drawing (the coverage phase's valid cases are the ones that draw). How other
  ``Accept`` values choose between JSON and a picture is ``test_request_path.py``'s.

The seed is fixed; ``FUZZ_SEED=n FUZZ_EXAMPLES=m`` explores further by hand (``m`` of at
least 50 on SQLite, and the same proportions for PostgreSQL and the pictures). Operations
without parameters (``/healthz``, ``/readyz``, ``/metrics``) have one possible fuzzed case,
which Hypothesis runs once.

The fuzzing phase had 100 examples per operation on SQLite; toward ``make test``'s 8-minute
target it has 50: this module then took ~150 s of CPU instead of ~215 s (two cores). The
coverage phase is about half of what remains (176 s of test time with it, 84 s without, in one
run); its invalid cases only on SQLite's JSON operations made it 158 s. Every case of the
spec's examples and of the coverage phase (each parameter's bounds and wrong types) still runs
on SQLite, and the fixed seed keeps every run the same.

A case that leaves an operation's resamples at their default (1000) asks for
:data:`FUZZ_RESAMPLES` instead (:func:`with_few_resamples`): at 1000 the fuzzed diagnostics,
monitoring and pictures spent most of this module's time in the bootstrap. Every other value
the fuzzer sends for ``bootstrap`` is sent as it is; the default's own numbers are tested
where they are asserted (``test_diagnostics.py``, ``test_monitoring.py``, ``test_compare.py``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.specs.openapi.schemas import OpenApiSchema

from app.calibration import RESAMPLES
from app.keys import new_key
from app.main import create_app
from app.settings import Settings
from app.store import Database
from app.store.migrate import upgrade
from tests.api.helpers import sigmoid_batch
from tests.client import TestClient
from tests.postgres import PostgresServer


@schemathesis.serializer("application/vnd.apache.parquet", "application/vnd.apache.arrow.stream")
def _as_bytes(ctx: Any, value: Any) -> bytes:
    """A binary body schemathesis made up, for fit, POST diagnostics and compare: sent as it
    is (it is no Parquet file or Arrow stream, so the route must answer it 400, never 500)."""
    return value if isinstance(value, bytes) else str(value).encode()


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


def _seed(url: str) -> None:
    """Migrate ``url`` to head and fit ``churn`` v1-v4, alias ``production`` -> 3."""
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


FreshCopy = Callable[[], Iterator[str]]


@pytest.fixture(scope="module")
def seeded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FreshCopy]:
    """Per backend (``request.param``, :data:`ON_SQLITE` or :data:`ON_POSTGRES`), a seeded
    database and a way to get a fresh copy of it per operation."""
    if request.param == "sqlite":
        template = tmp_path_factory.mktemp("fuzz-template") / "seeded.db"
        _seed(f"sqlite:///{template}")

        @contextmanager
        def sqlite_copy() -> Iterator[str]:
            path = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
            shutil.copyfile(template, path)
            yield f"sqlite:///{path}"

        yield sqlite_copy
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = server.create()
    _seed(server.url(name))

    @contextmanager
    def postgres_copy() -> Iterator[str]:
        copy = server.create(template=name)
        try:
            yield server.url(copy)
        finally:
            server.drop(copy)

    yield postgres_copy
    server.drop(name)


ON_SQLITE = pytest.mark.parametrize("seeded", ["sqlite"], indirect=True)
ON_POSTGRES = pytest.mark.parametrize(
    "seeded", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


@pytest.fixture
def app(seeded: FreshCopy) -> Iterator[FastAPI]:
    """A fresh copy of the seeded database behind a new app, for one operation's examples."""
    with seeded() as url:
        database = Database(url, _settings(url))
        yield create_app(_settings(url), database=database)
        asgi.shutdown_lifespans()  # schemathesis started the app's lifespan on its first request
        database.dispose()


# The description does not depend on the database; each test sends its cases to its own app.
DESCRIPTION = create_app(_settings("sqlite://")).openapi()
SEED = int(os.environ.get("FUZZ_SEED", "20260505"))
"""The same cases on every run."""
EXAMPLES = max(50, int(os.environ.get("FUZZ_EXAMPLES", "50")))
"""Examples per operation on SQLite."""
POSTGRES_EXAMPLES = EXAMPLES // 2
"""Examples per operation on PostgreSQL (see the module's docstring)."""
PICTURE_EXAMPLES = 2 * EXAMPLES // 5
"""Examples per picture operation, and of POST diagnostics per ``Accept`` value that asks for
a picture."""

# What the seeded database holds, per path parameter: half the generated values are swapped for
# one of these, so that fuzzed bodies and queries reach real versions, not only 404s.
REAL_PATH_VALUES: dict[str, list[Any]] = {
    "name": ["churn"],
    "selector": ["latest", "1", "2", "3", "4", "production"],
    "alias": ["production", "staging"],
    "version": [1, 2, 3, 4],
}


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


FUZZ_RESAMPLES = 20
"""The resamples a fuzzed case asks for where it would leave the default."""


def with_few_resamples(case: schemathesis.Case[Any]) -> None:
    """Send :data:`FUZZ_RESAMPLES` where ``case`` would have its operation resample
    :data:`~app.calibration.RESAMPLES` times by default: a ``bootstrap`` sent as the default
    becomes :data:`FUZZ_RESAMPLES`, and one sent nowhere (neither query nor body) is sent in
    the query. Any other value, valid or not, is left as the fuzzer made it."""
    if not any(p.name == "bootstrap" for p in case.operation.query):
        return
    places = [case.query] if case.query is not None else []
    if isinstance(case.body, dict):
        places.append(case.body)
    for place in places:
        if place.get("bootstrap") in (RESAMPLES, str(RESAMPLES)):
            place["bootstrap"] = FUZZ_RESAMPLES
    if not any("bootstrap" in place for place in places):
        case.query = {**(case.query or {}), "bootstrap": FUZZ_RESAMPLES}


def fuzzed(examples: int) -> Any:
    """Hypothesis's settings of every test here, with ``examples`` cases per operation."""
    return settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def described(coverage: GenerationMode | None = None) -> OpenApiSchema:
    """The description as schemathesis reads it, with the key, :data:`SEED` and the real path
    values; its coverage phase sends every case (valid and invalid), or only ``coverage``'s."""
    described = schemathesis.openapi.from_dict(DESCRIPTION)
    described.config.update(headers=AUTH)
    described.config.seed = SEED
    if coverage is not None:
        described.config.phases.coverage.generation.modes = [coverage]
    described.hook(flatmap_path_parameters)
    return described


# The contract (every case of every phase), and the runs whose coverage phase sends only the
# valid cases at the bounds (see the module's docstring).
contract = described()
at_the_bounds = described(GenerationMode.POSITIVE)
# The operations that answer JSON (or nothing), and those that draw.
answering = contract.exclude(path_regex=r"\.(png|svg)$")
answering_postgres = at_the_bounds.exclude(path_regex=r"\.(png|svg)$")
drawing = at_the_bounds.include(path_regex=r"\.(png|svg)$")


@answering.parametrize()
@fuzzed(EXAMPLES)
@ON_SQLITE
def test_the_api_conforms_to_its_description(case: schemathesis.Case[Any], app: FastAPI) -> None:
    with_few_resamples(case)
    case.call_and_validate(app=app, headers=AUTH, checks=CHECKS)


@drawing.parametrize()
@fuzzed(PICTURE_EXAMPLES)
@ON_SQLITE
def test_the_pictures_conform_to_their_description(
    case: schemathesis.Case[Any], app: FastAPI
) -> None:
    with_few_resamples(case)
    case.call_and_validate(app=app, headers=AUTH, checks=CHECKS)


@answering_postgres.parametrize()
@fuzzed(POSTGRES_EXAMPLES)
@ON_POSTGRES
def test_the_api_conforms_to_its_description_on_postgresql(
    case: schemathesis.Case[Any], app: FastAPI
) -> None:
    with_few_resamples(case)
    case.call_and_validate(app=app, headers=AUTH, checks=CHECKS)


# POST diagnostics answers a picture when Accept prefers one: fuzz that path too.
pictures = at_the_bounds.include(method="POST", path_regex=r"/diagnostics$")


@pictures.parametrize()
@fuzzed(PICTURE_EXAMPLES)
@ON_SQLITE
@pytest.mark.parametrize("accept", ["image/png", "image/svg+xml"])
def test_diagnostics_pictures_conform_to_the_description(
    case: schemathesis.Case[Any], app: FastAPI, accept: str
) -> None:
    with_few_resamples(case)
    case.call_and_validate(app=app, headers={**AUTH, "Accept": accept}, checks=CHECKS)
