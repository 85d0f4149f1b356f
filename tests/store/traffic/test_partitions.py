"""The prediction log by day (migration 0005): partitions made ahead, rows in their day's
partition, ids unique across them, whole days dropped on expiry; the same outcomes on
SQLite, which has one table."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import create_engine, text

from app.store import Database
from app.store.migrate import downgrade, upgrade
from app.store.traffic.partitions import DEFAULT, ensure_partitions, partition_days, partition_name
from app.store.traffic.rows import LoggedPrediction
from tests.store.conftest import MakeVersion

NOW = datetime.now(UTC)
TODAY = NOW.date()


@pytest.fixture(autouse=True)
def churn(database: Database, make_version: MakeVersion) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())


def row(client_id: str, at: datetime, score: float = 0.5) -> LoggedPrediction:
    return LoggedPrediction("churn", client_id, 1, at, score=score, probability=score)


def where_rows_are(database: Database) -> dict[str, str]:
    """Each logged id's partition (PostgreSQL)."""
    with database.transaction() as repo:
        rows = repo._session.execute(
            text("SELECT client_id, tableoid::regclass::text FROM predictions")
        )
        return dict(rows.all())


def ids(database: Database, table: str) -> set[str]:
    with database.transaction() as repo:
        return set(repo._session.scalars(text(f"SELECT client_id FROM {table}")))


@pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_rows_land_in_their_days_partition_and_late_days_get_theirs(database: Database) -> None:
    old = NOW - timedelta(days=12)
    with database.transaction(write=True) as repo:
        repo.maintain_traffic(NOW, NOW - timedelta(days=30))
        repo.log_predictions(
            [row("old", old), row("yesterday", NOW - timedelta(days=1)), row("now", NOW)]
        )
    with database.transaction() as repo:
        days = partition_days(repo._session.connection())
    assert {TODAY + timedelta(days=d) for d in range(-1, 8)} <= set(days)  # yesterday, a week on
    assert old.date() not in days
    assert where_rows_are(database) == {
        "old": DEFAULT,
        "yesterday": partition_name(TODAY - timedelta(days=1)),
        "now": partition_name(TODAY),
    }
    with database.transaction(write=True) as repo:  # the day's partition takes its rows along
        made = ensure_partitions(repo._session.connection(), old.date(), old.date())
    assert made == [old.date()]
    assert where_rows_are(database)["old"] == partition_name(old.date())
    assert ids(database, DEFAULT) == set()


def test_an_id_is_logged_once_across_days_and_labelled_in_its_own(database: Database) -> None:
    earlier = NOW - timedelta(days=3)
    with database.transaction(write=True) as repo:
        repo.maintain_traffic(NOW, NOW - timedelta(days=30))
        first = repo.log_predictions([row("a", earlier, 0.2), row("b", earlier, 0.3)])
    with database.transaction(write=True) as repo:
        again = repo.log_predictions([row("a", NOW, 0.9), row("c", NOW, 0.4)])
    assert (first.new, again.new) == (2, 1)  # "a" again is a duplicate, days apart
    with database.transaction(write=True) as repo:
        counts = repo.record_outcomes("churn", [("a", 1), ("c", 0)], NOW)
    assert counts.matched == 2
    with database.transaction() as repo:
        rows = repo._session.execute(text("SELECT client_id, score, label FROM predictions"))
        assert sorted((i, s, y) for i, s, y in rows) == [
            ("a", 0.2, 1),
            ("b", 0.3, None),
            ("c", 0.4, 0),
        ]


def test_expiry_drops_whole_days_and_their_keys(database: Database, backend: str) -> None:
    old = NOW - timedelta(days=40)
    with database.transaction(write=True) as repo:
        repo.maintain_traffic(NOW, NOW - timedelta(days=30))
        ensure = backend == "postgres"
        if ensure:
            ensure_partitions(repo._session.connection(), old.date(), old.date())
        repo.log_predictions([row("old", old), row("recent", NOW - timedelta(days=2))])
        repo.record_outcomes("churn", [("never", 1)], old)  # pending, its prediction never came
    with database.transaction(write=True) as repo:  # as the log's upkeep runs them
        repo.maintain_traffic(NOW, NOW - timedelta(days=30))
    with database.transaction(write=True) as repo:
        gone = repo.expire_traffic(NOW - timedelta(days=30), 10_000)
    assert gone == 1
    assert ids(database, "predictions") == {"recent"}
    assert ids(database, "prediction_keys") == {"recent"}
    assert ids(database, "pending_outcomes") == set()
    if ensure:
        with database.transaction() as repo:
            assert old.date() not in partition_days(repo._session.connection())
    with database.transaction(write=True) as repo:  # its key gone, the id may be logged anew
        assert repo.log_predictions([row("old", NOW)]).new == 1


def test_0005_keeps_the_logged_rows_up_and_down(empty_database_url: str, backend: str) -> None:
    upgrade(empty_database_url, "0004")
    engine = create_engine(empty_database_url)
    days = [TODAY - timedelta(days=5), TODAY]
    try:
        with engine.begin() as connection:
            for k, day in enumerate(days):
                connection.execute(
                    text(
                        "INSERT INTO predictions (name, client_id, version, score, probability, "
                        "predicted_at, label) VALUES ('churn', :id, 1, 0.5, 0.6, :at, :label)"
                    ),
                    {"id": f"r{k}", "at": _noon(day, backend), "label": k},
                )
        upgrade(empty_database_url)
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT client_id, label FROM predictions ORDER BY client_id")
            )
            assert [tuple(r) for r in rows] == [("r0", 0), ("r1", 1)]
            keys = connection.execute(text("SELECT client_id FROM prediction_keys"))
            assert sorted(keys.scalars()) == ["r0", "r1"]
            if backend == "postgres":
                where = connection.execute(
                    text("SELECT client_id, tableoid::regclass::text FROM predictions")
                )
                assert dict(where.all()) == {
                    "r0": partition_name(days[0]),
                    "r1": partition_name(days[1]),
                }
        downgrade(empty_database_url, "0004")
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT id, client_id FROM predictions ORDER BY client_id")
            )
            assert [r[1] for r in rows] == ["r0", "r1"]
        upgrade(empty_database_url)
    finally:
        engine.dispose()


def _noon(day: date, backend: str) -> object:
    moment = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
    return moment if backend == "postgres" else moment.replace(tzinfo=None).isoformat(" ")


@pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_a_fresh_days_partition_is_analyzed_when_its_first_rows_are_logged(
    database: Database,
) -> None:
    """A partition made ahead has no statistics until autovacuum comes round; outcomes of
    rows logged meanwhile were planned blind (19 s for 5,000 of one predict's rows, 0.1 s
    once analyzed). The first log into it analyzes it, counting the rows just inserted."""
    with database.transaction(write=True) as repo:
        repo.maintain_traffic(NOW, NOW - timedelta(days=30))
    later = NOW + timedelta(days=5)  # a day made ahead, that no test logs into otherwise
    day = partition_name(later.date())
    statistics = "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = :t"
    with database.transaction() as repo:
        assert repo._session.execute(text(statistics), {"t": day}).scalar() is False
    with database.transaction(write=True) as repo:
        repo.log_predictions([row(f"r{i}", later) for i in range(500)])  # one predict's time
    with database.transaction() as repo:
        analyzed = repo._session.execute(text(statistics), {"t": day}).scalar()
        tuples = repo._session.execute(
            text("SELECT reltuples FROM pg_class WHERE relname = :t"), {"t": day}
        ).scalar()
    assert analyzed is True
    assert tuples == 500
