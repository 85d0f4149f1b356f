"""Folded days (app/store/traffic/days.py), on both backends: each is the sum of its day's
stored hours after the fold, after late outcomes (overwrites too), a version's first traffic
of a folded day and a k-class version's; they go with the retention and the calibrator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import func, select

from app.store import Database
from app.store.traffic.rows import LoggedPrediction
from app.store.traffic.tables import RollupFold, TrafficRollupDay
from tests.store.conftest import MakeVersion
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
        assert repo.folded_through("churn") == D0 + 2 * DAY
        assert repo.names_to_fold(D0 + 3 * DAY + timedelta(minutes=30)) == []
    assert _fold(database, D0 + 3 * DAY + timedelta(hours=1)) == [False]
    assert assert_days_sum_their_hours(database, "churn") == 3
    with database.transaction(write=True) as repo:
        # late outcomes, overwritten labels, and labels of predictions never logged
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


def test_a_backlog_folds_a_week_a_transaction(database: Database) -> None:
    _log(database, 10)
    assert _fold(database, D0 + 20 * DAY) == [True, True, False]  # the last: empty days
    assert assert_days_sum_their_hours(database, "churn") == 10
    with database.transaction() as repo:
        assert repo.folded_through("churn") == D0 + 20 * DAY - DAY  # past the empty days


def test_days_go_with_their_hours_and_with_the_calibrator(database: Database) -> None:
    _log(database, 3)
    _fold(database, D0 + 4 * DAY)
    with database.transaction(write=True) as repo:
        repo.expire_rollups(D0 + DAY + timedelta(hours=2))  # into the second day
    with database.transaction() as repo:
        days = [day for day, _, _ in repo.day_rollups("churn", D0, D0 + 4 * DAY)]
    assert days == [D0 + 2 * DAY]  # the second day lost an hour: its readers take the rest
    with database.transaction(write=True) as repo:  # an outcome in what is left of it
        repo.record_outcomes("churn", [("a71", 1)], D0, overwrite=True)
    assert assert_days_sum_their_hours(database, "churn") == 1
    with database.transaction(write=True) as repo:
        repo.delete_calibrator("churn")
    with database.transaction() as repo:
        for table in (TrafficRollupDay, RollupFold):
            assert repo._session.scalar(select(func.count()).select_from(table)) == 0
