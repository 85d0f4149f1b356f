"""Database fixtures: every test gets an empty database on the real migrated schema.

``backend`` runs a test on SQLite and on PostgreSQL. ``database_url`` is a migrated, empty
database of that backend; ``database`` is a :class:`~app.store.Database` on it. Migrations
run once per session (per xdist worker) into a template, never ``create_all``. SQLite's is
copied per test (a file copy). PostgreSQL's copies are pooled (:class:`~tests.postgres.
DatabasePool`): a test borrows one, and giving it back empties it as a fresh copy would be
(truncated, sequences restarted, the prediction log's partitions the template's again), or
drops it if the test changed its schema.

Tests that only read an app can share one instead (:func:`shared_client`, in a module- or
package-scoped fixture that fits what they read once, and :func:`unchanged` to hold them to it).

PostgreSQL comes from ``CALIBRATION_TEST_POSTGRES_URL`` (a server where we may create
databases), or is a throwaway cluster of each pytest process (each xdist worker has its own)
started from the installed binaries (Debian's ``/usr/lib/postgresql/*/bin``). Without either,
PostgreSQL tests are skipped, except under ``CI``, where that is a failure.

The servers that several modules of the serial run share (``tests/servers.py``) are made
session fixtures here, so that each starts once.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

import demo.server
from app.main import create_app
from app.settings import Settings
from app.store import Database
from app.store.migrate import upgrade
from tests.browser import Browser, Chromium
from tests.client import TestClient
from tests.objects import CREDENTIALS, drop_bucket, new_bucket, s3_server
from tests.ports import free_port
from tests.postgres import DatabasePool, PostgresServer, start_cluster, stop_cluster, unavailable
from tests.servers import (
    deadline_server,
    faults_cluster,
    faults_processes,
    faults_service,
    faults_spare,
)

__all__ = [  # fixtures, by import
    "deadline_server",
    "faults_cluster",
    "faults_processes",
    "faults_service",
    "faults_spare",
]

# boto3 finds the test S3 server's fake credentials in the environment, in this process and in
# every process it starts after (the apps' worker processes, started before any test asks for
# the server, included).
os.environ.update(CREDENTIALS)

# The servers the tests start through the demo's LocalService take their ports from this
# process's range too (tests/ports.py): under xdist, two workers' servers never meet on one.
demo.server.free_port = free_port


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server (given by the environment, or started here)."""
    given = os.environ.get("CALIBRATION_TEST_POSTGRES_URL")
    if given:
        server = PostgresServer(given)
        try:
            server.create_and_drop()
        except OperationalError as exc:
            server.close()
            unavailable(f"CALIBRATION_TEST_POSTGRES_URL does not answer: {exc.orig}")
        yield server
        server.close()
        return
    directory = Path(tempfile.mkdtemp(prefix="calibration-pg-"))
    try:
        server = PostgresServer(start_cluster(directory))
        yield server
        server.close()
    finally:
        stop_cluster(directory)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_template(postgres_server: PostgresServer) -> Iterator[str]:
    """The name of a PostgreSQL database migrated to head, to copy."""
    name = postgres_server.create()
    upgrade(postgres_server.url(name))
    yield name
    postgres_server.drop(name)


@pytest.fixture(scope="session")
def postgres_pool(
    postgres_server: PostgresServer, postgres_template: str
) -> Iterator[DatabasePool]:
    """Copies of the template, lent one per test and emptied between tests."""
    pool = DatabasePool(postgres_server, postgres_template)
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SQLite file migrated to head, to copy for each test."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """The database backend of this test run: ``"sqlite"`` or ``"postgres"``."""
    name: str = request.param
    return name


@pytest.fixture
def empty_database_url(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[str]:
    """A fresh database of ``backend`` without any tables (for migration tests)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = server.create()
    yield server.url(name)
    server.drop(name)


@contextmanager
def migrated_database(backend: str, request: pytest.FixtureRequest, folder: Path) -> Iterator[str]:
    """The URL of a database of ``backend``, migrated to head and empty, while in the block: a
    copy of the SQLite template in ``folder``, or a PostgreSQL database borrowed from the pool
    (given back on the way out)."""
    if backend == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        path = folder / "calibration.db"
        shutil.copyfile(template, path)
        yield f"sqlite:///{path}"
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    pool: DatabasePool = request.getfixturevalue("postgres_pool")
    name = pool.lend()
    try:
        yield server.url(name)
    finally:
        pool.give_back(name)


@contextmanager
def shared_client(
    backend: str, request: pytest.FixtureRequest, folder: Path, **settings: Any
) -> Iterator[TestClient]:
    """A client of an app with ``settings`` on a migrated, empty database of ``backend`` of its
    own (in ``folder`` for SQLite), for a module- or package-scoped fixture: the tests that
    only read share it, and what it holds is fitted once, not once per test. Its worker
    processes keep the reports they computed between those tests too."""
    with migrated_database(backend, request, folder) as url:
        database = Database(url, Settings(database_url=url))
        try:
            app = create_app(Settings(database_url=url, **settings), database=database)
            with TestClient(app, raise_server_exceptions=False) as client:
                yield client
        finally:
            database.dispose()


@contextmanager
def unchanged(client: TestClient) -> Iterator[None]:
    """Fail on the way out when the calibrators ``client``'s app lists (their versions, when
    each was last fitted) are not those it listed on the way in: a test that fits or deletes
    in a shared app would make its neighbours' results depend on the order."""
    before = client.get("/v1/calibrators", params={"limit": 1000}).json()
    yield
    after = client.get("/v1/calibrators", params={"limit": 1000}).json()
    assert after == before, "a test changed the app other tests share"


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The session's S3 API server (moto's, on loopback): its endpoint URL."""
    with s3_server() as endpoint:
        yield endpoint


@pytest.fixture
def blobs() -> str:
    """Where versions' blobs go: the database (``"database"``), or with
    ``CALIBRATION_TEST_BLOBS=s3`` in the environment object storage, for a whole run of the
    suite that way (a module whose tests run both ways overrides it with the params
    ``["database", "s3"]``)."""
    return os.environ.get("CALIBRATION_TEST_BLOBS", "database")


@pytest.fixture
def blob_settings(blobs: str, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """The settings that put blobs where ``blobs`` says: none for the database; for ``s3``,
    a fresh bucket of the session's server (emptied and deleted after the test)."""
    if blobs == "database":
        yield {}
        return
    endpoint: str = request.getfixturevalue("s3_endpoint")
    bucket = new_bucket(endpoint)
    yield {"blob_url": f"s3://{bucket}/calibration", "blob_endpoint_url": endpoint}
    drop_bucket(endpoint, bucket)


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of ``backend``, migrated to head and empty."""
    with migrated_database(backend, request, tmp_path) as url:
        yield url


@pytest.fixture
def database(database_url: str, blob_settings: dict[str, Any]) -> Iterator[Database]:
    """A :class:`Database` on ``database_url`` (its blobs where ``blobs`` says), disposed
    after the test."""
    db = Database(database_url, Settings(database_url=database_url, **blob_settings))
    yield db
    db.dispose()


@pytest.fixture(autouse=True)
def _jobs_in_threads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test marked ``in_threads`` patches code that jobs run (a spy, a limit, a failure): the
    apps it makes run their jobs in threads of this process, where the patch is, instead of
    worker processes (``CALIBRATION_WORK_PROCESSES``, read by every ``Settings()``)."""
    if request.node.get_closest_marker("in_threads") is not None:
        monkeypatch.setenv("CALIBRATION_WORK_PROCESSES", "false")


SERIAL_MARK = "mark.serial"
"""What each file holding a test marked ``serial`` says: ``make test``'s serial run collects
only the files that say it (``grep``), not the whole suite (~15 s of imports to pick ~40
tests)."""


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects: the serial tests of every file
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a test marked ``serial`` in a file that does not say :data:`SERIAL_MARK` (marked
    by a hook, or by an alias of the mark): the serial run would never collect it."""
    said: dict[Path, bool] = {}
    unsaid = set()
    for item in items:
        if item.get_closest_marker("serial") is None:
            continue
        if item.path not in said:
            said[item.path] = SERIAL_MARK in item.path.read_text()
        if not said[item.path]:
            unsaid.add(str(item.path))
    if unsaid:
        raise pytest.UsageError(
            f"tests marked serial in files without {SERIAL_MARK!r}, which make test's serial "
            f"run would not collect: {', '.join(sorted(unsaid))}"
        )


@pytest.fixture(scope="module")
def shared_chromium() -> Iterator[Chromium]:
    """One headless Chromium per test module that drives one (started once, not per test)."""
    with Chromium.start() as started:
        yield started


@pytest.fixture
def browser(shared_chromium: Chromium) -> Iterator[Browser]:
    """A tab of the module's Chromium in a browser context of its own: no cookie, session or
    storage of another test's pages."""
    with shared_chromium.page() as page:
        yield page
