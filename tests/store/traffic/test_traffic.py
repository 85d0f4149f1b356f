"""The prediction log and outcomes in the store, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from app.errors import Conflict
from app.store import Database
from app.store.models import PendingOutcome, Prediction
from app.store.traffic import log as traffic
from app.store.traffic.log import INSERT_ROWS
from app.store.traffic.outcomes import OutcomeCounts
from app.store.traffic.rows import LogCounts, LoggedPrediction
from tests.store.conftest import MakeVersion

NOW = datetime(2026, 11, 24, 12, tzinfo=UTC)


@pytest.fixture(autouse=True)
def churn(database: Database, make_version: MakeVersion) -> None:
    """The calibrator whose row an outcome writer locks."""
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())


def logged(client_id: str, version: int = 1, score: float = 0.25) -> LoggedPrediction:
    return LoggedPrediction("churn", client_id, version, NOW, score=score, probability=score / 2)


def stored(database: Database) -> dict[str, tuple[int, float | None, int | None]]:
    with database.transaction() as repo:
        rows = repo._session.execute(
            select(Prediction.client_id, Prediction.version, Prediction.score, Prediction.label)
        )
        return {c: (v, s, label) for c, v, s, label in rows}


def pending(database: Database) -> int:
    with database.transaction() as repo:
        return int(repo._session.scalar(select(func.count()).select_from(PendingOutcome)) or 0)


def test_the_first_record_of_an_id_wins(database: Database, make_version: MakeVersion) -> None:
    with database.transaction(write=True) as repo:
        assert repo.log_predictions([logged("a"), logged("b"), logged("c")]) == (3, 0)
        repo.create_version("churn", make_version())
    with database.transaction(write=True) as repo:
        assert repo.log_predictions([logged("a", version=2, score=0.9), logged("d")]) == (1, 0)
    assert stored(database) == {
        "a": (1, 0.25, None),
        "b": (1, 0.25, None),
        "c": (1, 0.25, None),
        "d": (1, 0.25, None),
    }


@pytest.mark.parametrize("chunk", [INSERT_ROWS, 2, 3])
def test_one_flush_keeps_each_new_ids_first_row_among_repeats_and_old_ids(
    database: Database, make_version: MakeVersion, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """In chunks of 2 (SQLite), one chunk has new keys only, one none, and two both."""
    monkeypatch.setattr(traffic, "INSERT_ROWS", chunk)
    with database.transaction(write=True) as repo:
        repo.create_version("other", make_version())
        repo.log_predictions([logged("a"), logged("b")])
        repo.log_predictions([LoggedPrediction("other", "z", 1, NOW, score=0.5)])
        repo.delete_traffic("other")  # the newest key gone: new keys reuse its place
    rows = [
        logged("c", score=0.1),
        logged("a", score=0.2),  # logged before
        logged("c", score=0.3),  # repeats c in this flush
        logged("d", score=0.4),
        logged("b", score=0.5),
        logged("d", score=0.6),
        logged("e", score=0.7),
    ]
    with database.transaction(write=True) as repo:
        assert repo.log_predictions(rows) == LogCounts(new=3, discarded=0)
    assert {client_id: row[1] for client_id, row in stored(database).items()} == {
        "a": 0.25,
        "b": 0.25,
        "c": 0.1,
        "d": 0.4,
        "e": 0.7,
    }


def test_outcomes_label_logged_predictions_and_wait_for_the_others(database: Database) -> None:
    with database.transaction(write=True) as repo:
        repo.log_predictions([logged("a"), logged("b")])
    with database.transaction(write=True) as repo:
        counts = repo.record_outcomes("churn", [("a", 1), ("x", 0)], NOW)
    assert counts == OutcomeCounts(matched=1, pending=1, duplicates=0, overwritten=0)
    assert stored(database)["a"][2] == 1
    assert pending(database) == 1
    with database.transaction(write=True) as repo:  # the prediction arrives: joined
        repo.log_predictions([logged("x")])
    assert stored(database)["x"][2] == 0
    assert pending(database) == 0


def test_the_same_outcome_twice_is_a_no_op_and_a_different_one_a_conflict(
    database: Database,
) -> None:
    with database.transaction(write=True) as repo:
        repo.log_predictions([logged("a"), logged("b")])
        repo.record_outcomes("churn", [("a", 1), ("y", 1)], NOW)
    later = NOW + timedelta(hours=1)
    with database.transaction(write=True) as repo:
        again = repo.record_outcomes("churn", [("a", 1), ("y", 1), ("b", 0)], later)
    assert again == OutcomeCounts(matched=1, pending=0, duplicates=2, overwritten=0)
    with (
        pytest.raises(Conflict, match="2 ids already have a different label"),
        database.transaction(write=True) as repo,
    ):
        repo.record_outcomes("churn", [("a", 0), ("y", 0), ("c", 1)], later)
    assert stored(database)["a"][2] == 1  # nothing of the refused request was stored
    assert pending(database) == 1
    with database.transaction(write=True) as repo:
        replaced = repo.record_outcomes("churn", [("a", 0), ("y", 0)], later, overwrite=True)
    assert replaced == OutcomeCounts(matched=0, pending=0, duplicates=0, overwritten=2)
    assert stored(database)["a"][2] == 0
    with database.transaction(write=True) as repo:
        repo.log_predictions([logged("y")])
    assert stored(database)["y"][2] == 0


def test_many_rows_go_in_chunks(database: Database) -> None:
    rows = [logged(f"id-{i}", score=i / 3000) for i in range(2500)]
    with database.transaction(write=True) as repo:
        assert repo.log_predictions(rows) == LogCounts(new=2500, discarded=0)
    outcomes = [(f"id-{i}", i % 2) for i in range(0, 3000, 2)]  # 250 of them not logged
    with database.transaction(write=True) as repo:
        counts = repo.record_outcomes("churn", outcomes, NOW)
    assert counts == OutcomeCounts(matched=1250, pending=250, duplicates=0, overwritten=0)


def test_expired_traffic_goes_in_bounded_batches(database: Database) -> None:
    old = [
        LoggedPrediction("churn", f"old-{i}", 1, NOW - timedelta(days=40), score=0.5)
        for i in range(25)
    ]
    with database.transaction(write=True) as repo:
        repo.log_predictions([*old, logged("new")])
        repo.record_outcomes("churn", [("never", 1)], NOW - timedelta(days=40))
        repo.record_outcomes("churn", [("soon", 1)], NOW)
    before = NOW - timedelta(days=30)
    with database.transaction(write=True) as repo:
        assert repo.expire_traffic(before, 10) == 10
    with database.transaction(write=True) as repo:
        assert repo.expire_traffic(before, 100) == 15
        assert repo.expire_traffic(before, 100) == 0
    assert sorted(stored(database)) == ["new"]
    assert pending(database) == 1  # "soon" waits on; "never" expired


def test_a_deleted_calibrator_takes_its_traffic_and_later_rows_of_it_are_discarded(
    database: Database, make_version: MakeVersion
) -> None:
    with database.transaction(write=True) as repo:
        repo.log_predictions([logged("a"), logged("b")])
        repo.record_outcomes("churn", [("a", 1), ("x", 0)], NOW)
        repo.delete_calibrator("churn")
    assert stored(database) == {}
    assert pending(database) == 0
    with database.transaction(write=True) as repo:  # the name fitted again: v2
        repo.create_version("churn", make_version())
        counts = repo.log_predictions([logged("late"), logged("x", version=2), logged("y", 3)])
    assert counts == LogCounts(new=1, discarded=2)  # v1 went with the old calibrator; no v3
    assert stored(database) == {"x": (2, 0.25, None)}  # the old x's outcome is not joined


def test_twenty_thousand_outcomes_that_came_first_join_one_flush_of_their_predictions(
    database: Database,
) -> None:
    """One predict call's rows share their time. Joined to their waiting outcomes after the
    insert, by a statement the driver had prepared (its generic plan), PostgreSQL read the
    day's (name, time) index once per row: 46 s at 20,000, past the statement timeout, and
    so at every retry of the flush."""
    ids, now = [f"w{i}" for i in range(20_000)], datetime.now(UTC)  # today's partition

    def at_now(client_id: str) -> LoggedPrediction:
        return LoggedPrediction("churn", client_id, 1, now, score=0.5, probability=0.4)

    for flush in range(8):  # the day's first rows, each joined to its waiting outcome: the
        with database.transaction(write=True) as repo:  # driver prepares what it repeats
            repo.record_outcomes("churn", [(f"early{flush}", 1)], now)
        with database.transaction(write=True) as repo:
            repo.log_predictions([at_now(f"early{flush}")])
    with database.transaction(write=True) as repo:
        repo.record_outcomes("churn", [(i, n % 2) for n, i in enumerate(ids)], now)
    with database.transaction(write=True) as repo:
        repo.log_predictions([at_now(i) for i in ids])
    labels = {c: label for c, (_, _, label) in stored(database).items() if c.startswith("w")}
    assert labels == {i: n % 2 for n, i in enumerate(ids)}
    assert pending(database) == 0
