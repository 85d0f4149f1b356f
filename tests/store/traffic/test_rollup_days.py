"""Folded days (app/store/traffic/days.py), on both backends: each is the sum of its day's
stored hours after the fold, after late outcomes (overwrites too), a version's first traffic
of a folded day and a k-class version's; they go with the retention and the calibrator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import func, select

from app.calibration import BinaryRollup
from app.store import Database, Repository
from app.store.traffic.rows import LoggedPrediction
from app.store.traffic.tables import RollupFold, TrafficRollup, TrafficRollupDay
from tests.store.conftest import MakeVersion
from tests.store.races import race
from tests.store.traffic.rollup_checks import (
    assert_days_sum_their_hours,
    assert_rollups_sum_the_rows,
)

from .test_rollups import REFERENCE, _class_batch

D0 = datetime(2026, 11, 10, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def churn(database: Database, make_version: MakeVersion) -> None:
    with database.transaction(write=True) as repo:
        for _ in range(2):
            repo.create_version("churn", make_version(score_reference=REFERENCE.to_bytes()))
        k_class = make_version(
            n_classes=3, class_counts=[7, 7, 6], n_positive=None, batch=_class_batch()
        )
        repo.create_version("churn", k_class)


def _log(database: Database, days: int, version: int = 1, prefix: str = "a") -> None:
    """20 predictions of ``version`` in each of 3 hours of each of ``days`` days from D0,
    every other one labelled (half the labels waiting for their predictions)."""
    rng = np.random.default_rng(days * 10 + version)
    rows = []
    for i in range(days * 60):
        at = D0 + (i // 60) * DAY + timedelta(hours=3 * ((i // 20) % 3), minutes=i % 20)
        score = float(rng.normal())
        rows.append(LoggedPrediction("churn", f"{prefix}{i}", version, at, score,
                                     float(1 / (1 + np.exp(-score)))))  # fmt: skip
    labels = [(f"{prefix}{i}", int(rng.random() < 0.4)) for i in range(0, len(rows), 2)]
    with database.transaction(write=True) as repo:
        repo.record_outcomes("churn", labels[::2], D0)
        repo.log_predictions(rows)
        repo.record_outcomes("churn", labels[1::2], D0)


def _fold(database: Database, now: datetime) -> list[bool]:
    """Fold as the upkeep does; whether days were left after each transaction."""
    found = []
    with database.transaction() as repo:
        names = repo.names_to_fold(now)
    for name in names:
        more = True
        while more:
            with database.transaction(write=True) as repo:
                more = repo.fold_days(name, now)
            found.append(more)
    return found


def test_folded_days_stay_the_sums_of_their_hours(database: Database) -> None:
    _log(database, 3)
    _log(database, 1, version=2, prefix="b")  # a canary on the first day
    # the third day is over at D0 + 3d, but not for GRACE: two days fold
    assert _fold(database, D0 + 3 * DAY + timedelta(minutes=30)) == [False]
    assert assert_days_sum_their_hours(database, "churn") == 2
    with database.transaction() as repo:
        assert repo.first_unfolded("churn") == D0 + 2 * DAY
        assert repo.names_to_fold(D0 + 3 * DAY + timedelta(minutes=30)) == []
    assert _fold(database, D0 + 3 * DAY + timedelta(hours=1)) == [False]
    assert assert_days_sum_their_hours(database, "churn") == 3
    with database.transaction(write=True) as repo:
        # late outcomes, and overwritten labels
        repo.record_outcomes("churn", [(f"a{i}", 1) for i in range(1, 180, 2)], D0)
        repo.record_outcomes("churn", [(f"a{i}", 0) for i in range(0, 180, 3)], D0,
                             overwrite=True)  # fmt: skip
        # the second version's first traffic of the second day, and a k-class version's
        repo.log_predictions([LoggedPrediction("churn", "c1", 2, D0 + DAY, 0.2, 0.55)])
        matrix = np.full(3, 1 / 3).tobytes()
        repo.log_predictions(
            [LoggedPrediction("churn", "k1", 3, D0 + DAY, None, None, matrix, matrix)]
        )
    assert_rollups_sum_the_rows(database, "churn")  # the days' check included
    with database.transaction() as repo:
        second = {v for _, v, _ in repo.day_rollups("churn", D0 + DAY, D0 + 2 * DAY)}
    assert second == {1, 2, 3}


def test_a_backlog_folds_a_week_a_transaction_and_the_watermark_only_rises(
    database: Database,
) -> None:
    _log(database, 10)
    with database.transaction(write=True) as repo:  # the days the retention is taking: left
        assert repo.fold_days("churn", D0 + 20 * DAY, kept_from=D0 + DAY + timedelta(hours=5))
    with database.transaction() as repo:
        assert [d for d, _, _ in repo.day_rollups("churn", D0, D0 + 3 * DAY)] == [D0 + 2 * DAY]
    assert _fold(database, D0 + 20 * DAY) == [True, False]  # the last: empty days
    assert assert_days_sum_their_hours(database, "churn") == 8
    with database.transaction() as repo:
        assert repo.first_unfolded("churn") == D0 + 19 * DAY  # past the empty days
    with database.transaction(write=True) as repo:  # a replica whose clock is behind
        assert not repo.fold_days("churn", D0 + 5 * DAY)
    with database.transaction() as repo:
        assert repo.first_unfolded("churn") == D0 + 19 * DAY


def test_an_hour_kept_at_zero_or_a_day_that_would_be_sums_the_day_afresh(
    database: Database,
) -> None:
    """A label taken out that an hour never had (a row a replica older than the rollups
    logged) keeps the hour at zero: its day is then summed from its hours. So is a day that
    would itself go below zero."""
    _log(database, 2)
    _fold(database, D0 + 3 * DAY)
    hour, day = D0 + timedelta(hours=3), D0
    with database.transaction(write=True) as repo:  # the hour forgets its labels
        stored = repo._session.get(TrafficRollup, ("churn", hour, 1))
        assert stored is not None
        stored.data = _unlabelled(stored.data)
    with database.transaction(write=True) as repo:  # a20 (03:00) was labelled: flipped
        repo.record_outcomes("churn", [("a20", 1), ("a22", 0)], D0, overwrite=True)
    assert assert_days_sum_their_hours(database, "churn") == 2
    with database.transaction(write=True) as repo:  # now the day forgets its labels
        stored_day = repo._session.get(TrafficRollupDay, ("churn", day, 1))
        assert stored_day is not None
        stored_day.data = _unlabelled(stored_day.data)
    with database.transaction(write=True) as repo:
        repo.record_outcomes("churn", [("a40", 1), ("a42", 1)], D0, overwrite=True)
    assert assert_days_sum_their_hours(database, "churn") == 2


def _unlabelled(data: bytes) -> bytes:
    """A stored rollup with its labels taken away."""
    rollup = BinaryRollup.from_bytes(data)
    rollup.positives[:] = 0
    rollup.negatives[:] = 0
    rollup.n_labelled = 0
    rollup.loss = rollup.brier = 0.0
    rollup.moments[:] = 0.0
    return rollup.to_bytes()


def test_days_go_with_their_hours_and_with_the_calibrator(database: Database) -> None:
    _log(database, 3)
    _fold(database, D0 + 4 * DAY)
    with database.transaction(write=True) as repo:
        repo.expire_rollups(D0 + DAY + timedelta(hours=2))  # into the second day
    with database.transaction() as repo:
        days = [day for day, _, _ in repo.day_rollups("churn", D0, D0 + 4 * DAY)]
    assert days == [D0 + 2 * DAY]  # the second day lost an hour: its readers take the rest
    with database.transaction(write=True) as repo:  # an outcome in what is left of it
        repo.record_outcomes("churn", [("a81", 1)], D0)  # 03:01 of the second day
    with database.transaction() as repo:
        ((_, _, hour),) = list(repo.rollups("churn", D0 + DAY + timedelta(hours=3),
                                           D0 + DAY + timedelta(hours=4), 1))  # fmt: skip
        assert hour is not None
        assert hour.n_labelled == 11  # 10 labelled when logged
        days = [day for day, _, _ in repo.day_rollups("churn", D0, D0 + 4 * DAY)]
    assert days == [D0 + 2 * DAY]  # and the second day is not stored again
    assert assert_days_sum_their_hours(database, "churn") == 1
    with database.transaction(write=True) as repo:
        repo.delete_calibrator("churn")
    with database.transaction() as repo:
        for table in (TrafficRollupDay, RollupFold):
            assert repo._session.scalar(select(func.count()).select_from(table)) == 0


@pytest.mark.parametrize("fold_first", [True, False])
def test_a_fold_raced_by_outcomes_and_late_predictions_ends_as_a_serial_order(
    database: Database, fold_first: bool
) -> None:
    """The fold and a writer of the day's hours take the calibrator's row lock: whichever
    waits finds the other's work committed, so the day sums its hours either way."""
    _log(database, 2)
    now = D0 + 2 * DAY + timedelta(hours=2)

    def fold(repo: Repository) -> bool:
        return repo.fold_days("churn", now)

    def write(repo: Repository) -> None:
        repo.record_outcomes("churn", [(f"a{i}", 1) for i in range(0, 60, 3)], D0, overwrite=True)
        repo.log_predictions([LoggedPrediction("churn", "late", 2, D0 + DAY, 0.4, 0.6)])

    first, second = (fold, write) if fold_first else (write, fold)
    outcome = race(database, first, second)
    assert not isinstance(outcome, Exception), outcome
    assert assert_days_sum_their_hours(database, "churn") == 2
    assert_rollups_sum_the_rows(database, "churn")
    with database.transaction() as repo:
        second_day = {v for _, v, _ in repo.day_rollups("churn", D0 + DAY, D0 + 2 * DAY)}
    assert second_day == {1, 2}
