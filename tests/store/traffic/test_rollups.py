"""The hours' rollups the prediction log and the outcomes write, on both backends: always the
sums of the rows committed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import func, select

from app.calibration import BinaryRollup, ClassRollup, ScoreReference
from app.store import Database
from app.store.traffic.rows import LoggedPrediction
from app.store.traffic.tables import TrafficRollup
from tests.store.conftest import MakeVersion
from tests.store.traffic.rollup_checks import assert_rollups_sum_the_rows

T0 = datetime(2026, 11, 24, 10, tzinfo=UTC)


SCORES = np.linspace(0.05, 0.95, 20)  # make_version's batch
REFERENCE = ScoreReference.of_batch(SCORES, (SCORES > 0.5).astype(np.int64))


@pytest.fixture(autouse=True)
def churn(database: Database, make_version: MakeVersion) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version(score_reference=REFERENCE.to_bytes()))


def _logged(i: int, at: datetime, score: float, version: int = 1) -> LoggedPrediction:
    return LoggedPrediction("churn", f"id{i}", version, at, score, 1 / (1 + np.exp(-score)))


def _from_rows(database: Database) -> dict[datetime, BinaryRollup]:
    """Each hour's rollup summed afresh from the logged rows and their labels."""
    reference = REFERENCE
    with database.transaction() as repo:
        rows = np.concatenate(
            list(repo.traffic_chunks("churn", T0 - timedelta(days=1), T0 + timedelta(days=1)))
        )
    rows = rows[rows[:, 1] == 1]  # the binary version's
    rollups: dict[datetime, BinaryRollup] = {}
    for hour in np.unique(rows[:, 0] // 3600):
        _, _, scores, p, y = rows[rows[:, 0] // 3600 == hour].T
        rollup = BinaryRollup(reference.bins)
        rollup.add_predictions(p, reference.bin_of(scores))
        rollup.add_labels(p[y >= 0], y[y >= 0])
        rollups[datetime.fromtimestamp(hour * 3600, UTC)] = rollup
    return rollups


def _stored(database: Database) -> dict[tuple[datetime, int], BinaryRollup | None]:
    with database.transaction() as repo:
        found = repo.rollups("churn", T0 - timedelta(days=1), T0 + timedelta(days=1))
        return {(hour, version): rollup for hour, version, rollup in found}


def test_flushes_and_outcomes_keep_each_hour_the_sum_of_its_rows(
    database: Database, make_version: MakeVersion
) -> None:
    rng = np.random.default_rng(0)
    scores = rng.normal(size=400)
    times = [T0 + timedelta(minutes=20 * (i // 50)) for i in range(400)]  # 3 hours
    with database.transaction(write=True) as repo:
        repo.record_outcomes("churn", [(f"id{i}", i % 2) for i in range(40)], T0)  # first
        k_class = make_version(
            n_classes=3, class_counts=[7, 7, 6], n_positive=None, batch=_class_batch()
        )
        repo.create_version("churn", k_class)
    for part in np.array_split(np.arange(400), 5):
        rows = [_logged(int(i), times[i], float(scores[i])) for i in part]
        rows += [_logged(int(part[0]), times[part[0]], 9.0)]  # a duplicate id: not counted
        with database.transaction(write=True) as repo:
            repo.log_predictions(rows)
    with database.transaction(write=True) as repo:
        matrix = np.full(3, 1 / 3).tobytes()
        repo.log_predictions([LoggedPrediction("churn", "k1", 2, T0, None, None, matrix, matrix)])
        repo.record_outcomes("churn", [(f"id{i}", 1) for i in range(100, 180)], T0)  # later
        repo.record_outcomes("churn", [(f"id{i}", 1) for i in range(20)], T0, overwrite=True)
        repo.record_outcomes("churn", [(f"id{i}", 1) for i in range(100, 110)], T0)  # again
    expected = _from_rows(database)
    stored = _stored(database)
    k_hour = stored.pop((T0, 2))  # the k-class version's hour: its own rollup
    assert isinstance(k_hour, ClassRollup)
    assert (k_hour.n, k_hour.k, k_hour.strata) == (1, 3, {int(T0.timestamp()) // 3600: 1})
    assert_rollups_sum_the_rows(database, "churn")
    assert sorted(stored) == [(hour, 1) for hour in sorted(expected)]
    for (hour, _), rollup in stored.items():
        assert rollup is not None
        wanted = expected[hour]
        for name in ("counts", "positives", "negatives", "scores"):
            assert np.array_equal(getattr(rollup, name), getattr(wanted, name)), name
        assert (rollup.n, rollup.n_labelled) == (wanted.n, wanted.n_labelled)
        assert rollup.sums == pytest.approx(wanted.sums, rel=1e-6)  # float32 once stored
        assert rollup.fine_sums == pytest.approx(wanted.fine_sums, rel=1e-12)
        assert rollup.moments[:, 0] == pytest.approx(wanted.moments[:, 0], rel=1e-12, abs=1e-12)
        assert (rollup.loss, rollup.brier) == pytest.approx((wanted.loss, wanted.brier), rel=1e-12)
        assert rollup.moments == pytest.approx(wanted.moments, rel=1e-5, abs=1e-5)
        assert rollup.entropy == pytest.approx(wanted.entropy, rel=1e-12)


def _class_batch() -> bytes:
    from app.store import encode_batch

    rng = np.random.default_rng(1)
    scores = rng.dirichlet(np.ones(3), size=20)
    labels = np.arange(20) % 3
    return encode_batch(scores, labels, np.ones(20), scores)


def test_a_version_without_stored_score_bins_has_hours_that_count_no_scores(
    database: Database, make_version: MakeVersion
) -> None:
    """A version with no bins stored, as one fitted before migration 0010 whose batch was in
    object storage: its hours count no raw scores (monitoring then gives its windows no
    shift); the flush never reads a batch."""
    with database.transaction(write=True) as repo:
        repo.create_version("plain", make_version())
        repo.log_predictions([LoggedPrediction("plain", "a", 1, T0, 0.3, 0.6)])
    with database.transaction() as repo:
        ((_, _, rollup),) = list(repo.rollups("plain", T0, T0 + timedelta(hours=1)))
    assert rollup is not None
    assert (rollup.n, rollup.scores.size) == (1, 0)


def test_the_rollups_go_with_the_calibrator_and_with_the_retention(database: Database) -> None:
    with database.transaction(write=True) as repo:
        repo.log_predictions([_logged(1, T0, 0.3), _logged(2, T0 - timedelta(days=40), 0.1)])
    with database.transaction(write=True) as repo:
        repo.maintain_traffic(T0, T0 - timedelta(days=30))
        repo.expire_traffic(T0 - timedelta(days=30), 1000)
    assert list(_stored(database)) == [(T0, 1)]
    with database.transaction(write=True) as repo:
        repo.delete_calibrator("churn")
    with database.transaction() as repo:
        assert repo._session.scalar(select(func.count()).select_from(TrafficRollup)) == 0
