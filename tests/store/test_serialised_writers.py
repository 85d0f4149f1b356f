"""Two writers to one calibrator at once: the outcome is always one of the serial orders.

Each test holds a first write transaction open after its work, starts a second writer,
waits until the database makes it wait (PostgreSQL: a backend waiting on a lock; SQLite:
the second writer cannot even begin), then commits the first. Before writers took the
calibrator row lock first, every one of these interleavings broke (issue 10): a deleted
calibrator's version came back, an alias PUT met a foreign-key violation (500), a delete
without ``force`` silently dropped an alias just set, a PATCH met ``StaleDataError``; and
(issue 11) two outcomes of one id with different labels both succeeded. Before the flush of
the prediction log took the lock too, an outcome posted during the flush of its prediction
was left pending on an unlabelled prediction on PostgreSQL; and before a delete took the
calibrator's traffic with it, what was logged before the delete, or by a flush that waited
for it, outlived the calibrator.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from app.errors import Conflict, NotFound
from app.store import Database, Repository
from app.store.models import PendingOutcome, Prediction
from app.store.traffic.outcomes import OutcomeCounts
from app.store.traffic.rows import LogCounts, LoggedPrediction

from .conftest import MakeVersion
from .races import race


def _numbers(database: Database, name: str) -> list[int]:
    with database.transaction() as repo:
        try:
            _, versions, _ = repo.get_calibrator(name, 100, 0)
        except NotFound:
            return []
    return sorted(v.version for v in versions)


def test_a_fit_committing_during_a_delete_is_deleted_with_the_others(
    database: Database, make_version: MakeVersion
) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())
    outcome = race(
        database,
        lambda repo: repo.create_version("churn", make_version()),
        lambda repo: repo.delete_calibrator("churn"),
    )
    assert outcome is None
    assert _numbers(database, "churn") == []
    with database.transaction() as repo, pytest.raises(NotFound):
        repo.get_version("churn", 2)
    with database.transaction(write=True) as repo:  # a new calibrator: no old version revived
        assert repo.create_version("churn", make_version()).version == 3
    assert _numbers(database, "churn") == [3]


def test_a_fit_after_a_delete_starts_a_new_calibrator(
    database: Database, make_version: MakeVersion
) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())
    outcome = race(
        database,
        lambda repo: repo.delete_calibrator("churn"),
        lambda repo: repo.create_version("churn", make_version()).version,
    )
    assert outcome == 2
    assert _numbers(database, "churn") == [2]


def test_a_delete_without_force_after_an_alias_put_is_a_conflict(
    database: Database, make_version: MakeVersion
) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())
    outcome = race(
        database,
        lambda repo: repo.set_alias("churn", "production", 1),
        lambda repo: repo.delete_version("churn", 1),
    )
    assert isinstance(outcome, Conflict)
    with database.transaction() as repo:
        assert repo.calibrator_aliases("churn") == {"production": 1}


def test_an_alias_put_after_the_version_was_deleted_is_not_found(
    database: Database, make_version: MakeVersion
) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())
        repo.create_version("churn", make_version())
    outcome = race(
        database,
        lambda repo: repo.delete_version("churn", 1),
        lambda repo: repo.set_alias("churn", "production", 1),
    )
    assert isinstance(outcome, NotFound)
    with database.transaction() as repo:
        assert repo.calibrator_aliases("churn") == {}


@pytest.mark.parametrize("deleted", ["version", "calibrator"])
def test_a_patch_after_a_delete_is_not_found(
    database: Database, make_version: MakeVersion, deleted: str
) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())

    def delete(repo: Repository) -> None:
        if deleted == "version":
            repo.delete_version("churn", 1)
        else:
            repo.delete_calibrator("churn")

    outcome = race(
        database,
        delete,
        lambda repo: repo.update_version("churn", 1, description="late", tags={"a": "b"}),
    )
    assert isinstance(outcome, NotFound)


def test_a_patch_before_a_delete_is_deleted_with_its_version(
    database: Database, make_version: MakeVersion
) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())
    outcome = race(
        database,
        lambda repo: repo.update_version("churn", 1, description="first"),
        lambda repo: repo.delete_version("churn", 1),
    )
    assert outcome is None
    assert _numbers(database, "churn") == []


@pytest.mark.parametrize("logged", [True, False], ids=["logged", "pending"])
def test_a_second_outcome_with_another_label_for_one_id_is_a_conflict(
    database: Database, make_version: MakeVersion, logged: bool
) -> None:
    now = datetime.now(UTC)
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())
        if logged:
            repo.log_predictions([_logged("a")])
    outcome = race(
        database,
        lambda repo: repo.record_outcomes("churn", [("a", 1)], now),
        lambda repo: repo.record_outcomes("churn", [("a", 0)], now),
    )
    assert isinstance(outcome, Conflict)  # not both: the second saw the first's label
    assert _traffic(database) == (({"a": 1}, {}) if logged else ({}, {"a": 1}))


def _logged(client_id: str) -> LoggedPrediction:
    return LoggedPrediction("churn", client_id, 1, datetime.now(UTC), score=0.1, probability=0.4)


def _traffic(database: Database) -> tuple[dict[str, int | None], dict[str, int]]:
    """The labels of churn's logged predictions, and its pending outcomes, by client id."""
    with database.transaction() as repo:
        session = repo._session
        logged = session.execute(select(Prediction.client_id, Prediction.label)).all()
        pending = session.execute(select(PendingOutcome.client_id, PendingOutcome.label)).all()
    return dict(logged), dict(pending)


def test_an_outcome_posted_during_a_flush_labels_the_prediction(
    database: Database, make_version: MakeVersion
) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())
    outcome = race(
        database,
        lambda repo: repo.log_predictions([_logged("a")]),
        lambda repo: repo.record_outcomes("churn", [("a", 1)], datetime.now(UTC)),
    )
    assert outcome == OutcomeCounts(matched=1, pending=0, duplicates=0, overwritten=0)
    assert _traffic(database) == ({"a": 1}, {})


def test_a_flush_during_an_outcome_joins_it(database: Database, make_version: MakeVersion) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())
    outcome = race(
        database,
        lambda repo: repo.record_outcomes("churn", [("a", 1)], datetime.now(UTC)),
        lambda repo: repo.log_predictions([_logged("a")]),
    )
    assert outcome == LogCounts(new=1, discarded=0)
    assert _traffic(database) == ({"a": 1}, {})


def test_a_flush_after_a_delete_logs_nothing(database: Database, make_version: MakeVersion) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())
        repo.record_outcomes("churn", [("a", 1)], datetime.now(UTC))
    outcome = race(
        database,
        lambda repo: repo.delete_calibrator("churn"),
        lambda repo: repo.log_predictions([_logged("a")]),
    )
    assert outcome == LogCounts(new=0, discarded=1)
    assert _traffic(database) == ({}, {})


def test_a_delete_during_a_flush_deletes_what_it_logged(
    database: Database, make_version: MakeVersion
) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())

    def flush(repo: Repository) -> None:
        repo.log_predictions([_logged("a")])
        repo.record_outcomes("churn", [("a", 1), ("b", 0)], datetime.now(UTC))

    assert race(database, flush, lambda repo: repo.delete_calibrator("churn")) is None
    assert _traffic(database) == ({}, {})
