"""The pool of PostgreSQL databases the tests borrow (:class:`tests.postgres.DatabasePool`):
what one test leaves in its database, the next test never sees."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from app.settings import Settings
from app.store import Database
from app.store.traffic.log import LoggedPrediction
from app.store.traffic.partitions import ensure_partitions, partition_days, partition_name
from tests.postgres import DatabasePool, PostgresServer, Shape

from .conftest import MakeVersion

pytestmark = pytest.mark.postgres

NOW = datetime.now(UTC)
TABLES = (
    "calibrators",
    "versions",
    "version_blobs",
    "aliases",
    "predictions",
    "prediction_keys",
    "pending_outcomes",
)


@pytest.fixture
def pool(postgres_server: PostgresServer, postgres_template: str) -> Iterator[DatabasePool]:
    """A pool of this test's own on the session's template."""
    own = DatabasePool(postgres_server, postgres_template)
    yield own
    own.close()


def shape(url: str) -> Shape:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return Shape.of(connection)
    finally:
        engine.dispose()


def counts(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return {t: connection.scalar(text(f"SELECT count(*) FROM {t}")) for t in TABLES}
    finally:
        engine.dispose()


def test_a_database_given_back_is_lent_again_as_a_fresh_copy_under_a_new_name(
    pool: DatabasePool, postgres_server: PostgresServer, make_version: MakeVersion
) -> None:
    name = pool.lend()
    url = postgres_server.url(name)
    fresh = shape(url)
    database = Database(url, Settings(database_url=url))
    with database.transaction(write=True) as repo:  # a row in every table
        repo.create_version("churn", make_version())
        repo.create_version("churn", make_version())
        repo.set_alias("churn", "production", 2)
        repo.maintain_traffic(NOW, NOW - timedelta(days=30))  # makes yesterday's partition
        old = (NOW - timedelta(days=12)).date()
        ensure_partitions(repo._session.connection(), old, old)
        repo._session.execute(text(f"DROP TABLE {partition_name(NOW.date())}"))
        repo.log_predictions(
            [LoggedPrediction("churn", "a", 1, NOW - timedelta(days=1), score=0.5, probability=0.5)]
        )
        repo.record_outcomes("churn", [("a", 1), ("never", 0)], NOW)
    assert all(counts(url).values())
    # A connection the test left open, idle in its transaction with a lock held.
    left = create_engine(url).connect()
    left.execute(text("LOCK TABLE calibrators IN ACCESS SHARE MODE"))

    pool.give_back(name)
    again = pool.lend()
    assert (pool.made, pool.dropped) == (1, 0)
    assert again != name
    with pytest.raises(OperationalError, match="does not exist"):  # nobody writes there again
        create_engine(url).connect()
    left.invalidate()
    database.dispose()
    url = postgres_server.url(again)
    assert shape(url) == fresh
    assert counts(url) == dict.fromkeys(TABLES, 0)
    database = Database(url, Settings(database_url=url))
    with database.transaction(write=True) as repo:
        days = partition_days(repo._session.connection())
        assert NOW.date() in days
        assert old not in days
        assert NOW.date() - timedelta(days=1) not in days
        repo.create_version("churn", make_version())  # ids start at 1 again
    database.dispose()
    engine = create_engine(url)
    with engine.connect() as connection:
        ids = text("SELECT c.id, v.id FROM calibrators c JOIN versions v ON true")
        assert connection.execute(ids).all() == [(1, 1)]
    engine.dispose()
    pool.give_back(again)


def test_a_database_whose_schema_a_test_changed_is_dropped(
    pool: DatabasePool, postgres_server: PostgresServer
) -> None:
    name = pool.lend()
    engine = create_engine(postgres_server.url(name))
    with engine.begin() as connection:
        connection.execute(text("ALTER TABLE versions ADD COLUMN extra integer"))
    engine.dispose()
    pool.give_back(name)
    assert pool.dropped == 1
    again = pool.lend()
    assert pool.made == 2
    assert not any("versions.extra" in line for line in shape(postgres_server.url(again)).schema)
    pool.give_back(again)
