"""Database fixtures: every test gets a fresh database on the real migrated schema.

``backend`` runs a test on SQLite and on PostgreSQL. ``database_url`` is a fresh, migrated,
empty database of that backend; ``database`` is a :class:`~app.store.Database` on it.
Migrations run once per session into a template, which is copied per test (an SQLite file
copy, or PostgreSQL's ``CREATE DATABASE .. TEMPLATE``): fast, and never ``create_all``.

PostgreSQL comes from ``CALIBRATION_TEST_POSTGRES_URL`` (a server where we may create
databases), or is a throwaway cluster started from the installed binaries (Debian's
``/usr/lib/postgresql/*/bin``). Without either, PostgreSQL tests are skipped, except under
``CI``, where that is a failure.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

import demo.server
from app.settings import Settings
from app.store import Database, normalize_url
from app.store.migrate import upgrade
from tests.ports import free_port

# The servers the tests start through the demo's LocalService take their ports from this
# process's range too (tests/ports.py): under xdist, two workers' servers never meet on one.
demo.server.free_port = free_port


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL is required under CI: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL unavailable and CI unset: {reason}")


class PostgresServer:
    """A PostgreSQL server on which tests create and drop their own databases."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = normalize_url(admin_url)
        self._admin = create_engine(self.admin_url, isolation_level="AUTOCOMMIT")
        self._names = (f"calibration_test_{os.getpid()}_{n}" for n in itertools.count())

    def url(self, database: str) -> str:
        """The URL of ``database`` on this server."""
        return make_url(self.admin_url).set(database=database).render_as_string(False)

    def create(self, template: str = "template0") -> str:
        """Create a new database (a copy of ``template``) and return its name."""
        name = next(self._names)
        with self._admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
        return name

    def drop(self, name: str) -> None:
        """Drop ``name``, closing whatever connections a test left open."""
        with self._admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    def create_and_drop(self) -> None:
        """Check that the server answers and lets us create databases."""
        self.drop(self.create())

    def close(self) -> None:
        """Release the admin connection pool."""
        self._admin.dispose()


def _start_cluster(directory: Path) -> str:
    """initdb and start a throwaway cluster in ``directory``; return its admin URL."""
    initdbs = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not initdbs:
        _unavailable("no /usr/lib/postgresql/*/bin/initdb and no CALIBRATION_TEST_POSTGRES_URL")
    bindir = Path(initdbs[-1]).parent
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        user = pwd.getpwnam("postgres")
        os.chown(directory, user.pw_uid, user.pw_gid)
        as_postgres = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    options = (
        f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    )
    data, log = str(directory / "data"), str(directory / "log")
    commands = [
        [str(bindir / "initdb"), "-D", data, "-A", "trust", "-U", "postgres"],
        [str(bindir / "pg_ctl"), "-D", data, "-o", options, "-l", log, "-w", "start"],
    ]
    for command in commands:
        result = subprocess.run(as_postgres + command, capture_output=True, text=True)
        if result.returncode != 0:
            _unavailable(f"{Path(command[0]).name} failed: {result.stderr or result.stdout}")
    return f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"


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
            _unavailable(f"CALIBRATION_TEST_POSTGRES_URL does not answer: {exc.orig}")
        yield server
        server.close()
        return
    directory = Path(tempfile.mkdtemp(prefix="calibration-pg-"))
    try:
        server = PostgresServer(_start_cluster(directory))
        yield server
        server.close()
    finally:
        pg_ctl = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if (directory / "data" / "postmaster.pid").exists() and pg_ctl:
            as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
            stop = [pg_ctl[-1], "-D", str(directory / "data"), "-m", "immediate", "stop"]
            subprocess.run(as_postgres + stop, capture_output=True, check=False)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_template(postgres_server: PostgresServer) -> Iterator[str]:
    """The name of a PostgreSQL database migrated to head, to copy for each test."""
    name = postgres_server.create()
    upgrade(postgres_server.url(name))
    yield name
    postgres_server.drop(name)


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


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database of ``backend``, migrated to head and empty."""
    if backend == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        path = tmp_path / "calibration.db"
        shutil.copyfile(template, path)
        yield f"sqlite:///{path}"
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = server.create(template=request.getfixturevalue("postgres_template"))
    yield server.url(name)
    server.drop(name)


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    """A :class:`Database` on ``database_url``, disposed after the test."""
    db = Database(database_url, Settings(database_url=database_url))
    yield db
    db.dispose()
