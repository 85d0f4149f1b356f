"""The Database: URLs, connection settings, the unit of work, and unavailability."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from app.errors import DatabaseUnavailable
from app.settings import Settings
from app.store import Database, normalize_url

from .conftest import MakeVersion


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgres://u:p@db:5432/cal", "postgresql+psycopg://u:p@db:5432/cal"),
        ("postgresql://u@db/cal", "postgresql+psycopg://u@db/cal"),
        ("postgresql+psycopg://u@db/cal", "postgresql+psycopg://u@db/cal"),
        ("sqlite:///:memory:", "sqlite:///:memory:"),
    ],
)
def test_normalize_url_selects_psycopg(given: str, expected: str) -> None:
    assert normalize_url(given) == expected


def test_normalize_url_creates_the_sqlite_directory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a/b/service.db"
    assert normalize_url(url) == url
    assert (tmp_path / "a" / "b").is_dir()


@pytest.mark.parametrize(
    ("url", "loads"),
    [("sqlite:///{folder}/c.db", False), ("postgresql://u@127.0.0.1:9/db", True)],
)
def test_psycopg_is_imported_only_for_a_postgresql_engine(
    tmp_path: Path, url: str, loads: bool
) -> None:
    """A server on SQLite never imports psycopg (0.4 s of CPU a process); one on PostgreSQL
    does when it makes its engine (which connects to nothing yet)."""
    probe = (
        "import sys, app.main; from app.settings import Settings; "
        "from app.store.engines import make_engine; "
        f"make_engine({url.format(folder=tmp_path)!r}, Settings()); "
        "print('psycopg' in sys.modules)"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert found.stdout.strip() == str(loads)


def test_sqlite_connections_use_wal_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/service.db"
    database = Database(url, Settings(database_url=url))
    try:
        with database.engine.connect() as connection:
            pragmas = [
                connection.exec_driver_sql(f"PRAGMA {name}").scalar()
                for name in ("journal_mode", "busy_timeout", "foreign_keys")
            ]
    finally:
        database.dispose()
    assert pragmas == ["wal", 30000, 1]


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_postgres_sessions_carry_the_statement_timeout(database_url: str) -> None:
    settings = Settings(database_url=database_url, db_statement_timeout_seconds=2.5)
    database = Database(database_url, settings)
    try:
        with database.engine.connect() as connection:
            assert connection.execute(text("SHOW statement_timeout")).scalar() == "2500ms"
    finally:
        database.dispose()


def test_ping_answers_true_when_the_database_is_up(database: Database) -> None:
    assert database.ping() is True


def test_an_error_in_the_block_rolls_back_and_propagates(
    database: Database, make_version: MakeVersion
) -> None:
    def fit_then_fail() -> None:
        with database.transaction(write=True) as repo:
            repo.create_version("churn", make_version())
            raise KeyError("unrelated")

    with pytest.raises(KeyError, match="unrelated"):
        fit_then_fail()
    with database.transaction(write=True) as repo:
        assert repo.list_calibrators(10, 0) == ([], 0)


def test_an_unreachable_database_is_unavailable_not_an_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql://calibration@127.0.0.1:{port}/calibration"
    database = Database(url, Settings(database_url=url, db_connect_timeout_seconds=2))
    try:
        assert database.ping() is False
        with pytest.raises(DatabaseUnavailable) as caught, database.transaction(write=True) as repo:
            repo.list_calibrators(10, 0)
    finally:
        database.dispose()
    assert caught.value.status == 503
    assert "127.0.0.1" not in caught.value.detail
