"""Monitoring read from stored hours where they cover a window and from rows where they do not
(a ``since`` off the hour, the hours before the rollups' start, a k-class version's rows)
answers what it answers read from the rows alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import delete, update

from app.calibration import BinaryRollup
from app.service.traffic.gathering import counted
from app.store.traffic.rows import LoggedPrediction
from app.store.traffic.tables import RollupStart, TrafficRollup, TrafficRollupDay
from tests.client import TestClient
from tests.store.traffic.rollup_checks import assert_days_sum_their_hours

from .helpers import sigmoid_batch
from .test_multiclass import logits_batch

pytestmark = pytest.mark.in_threads  # jobs in threads: no worker process to start

BASE = "/v1/calibrators/churn"
T0 = datetime(2026, 11, 20, tzinfo=UTC)
HOUR, DAY = timedelta(hours=1), timedelta(days=1)


def _start_rollups_at(client: TestClient, moment: datetime) -> None:
    service = client.app.state.service  # type: ignore[attr-defined]
    with service.database.transaction(write=True) as repo:
        repo._session.execute(update(RollupStart).values(started_at=moment))


@pytest.fixture
def logged(client: TestClient) -> None:
    """A binary v1 and a 3-class v2 of churn, their traffic over four hours from T0 (the
    stored hours start at T0 + 1 h), half of it labelled: some outcomes before their
    predictions, the rest after."""
    _log_churn(client, T0 + timedelta(hours=1))


def _log_churn(client: TestClient, rollups_from: datetime) -> None:
    assert (
        client.post(
            f"{BASE}/fit", json={**sigmoid_batch(2000, seed=1), "method": "platt"}
        ).status_code
        == 201
    )
    assert (
        client.post(
            f"{BASE}/fit", json={**logits_batch(600, 3, seed=2), "method": "temperature"}
        ).status_code
        == 201
    )
    _start_rollups_at(client, rollups_from)
    rng = np.random.default_rng(3)
    n = 800
    scores = rng.normal(0.3, 1.3, n)
    p = 1 / (1 + np.exp(-1.2 * scores))
    minutes = np.sort(rng.integers(0, 240, n))
    rows = [
        LoggedPrediction("churn", f"b{i}", 1, T0 + timedelta(minutes=int(minutes[i])),
                         float(scores[i]), float(p[i]))
        for i in range(n)
    ]  # fmt: skip
    matrices = rng.dirichlet(np.ones(3), size=60)
    rows += [
        LoggedPrediction("churn", f"k{i}", 2, T0 + timedelta(minutes=30 + 60 * (i % 3)),
                         None, None, matrices[i].tobytes(), matrices[i].tobytes())
        for i in range(60)
    ]  # fmt: skip
    labels = [(f"b{i}", int(rng.random() < p[i])) for i in range(0, n, 2)]
    labels += [(f"k{i}", i % 3) for i in range(0, 60, 2)]
    service = client.app.state.service  # type: ignore[attr-defined]
    with service.database.transaction(write=True) as repo:
        repo.record_outcomes("churn", labels[:100], T0)  # they wait for their predictions
    for part in np.array_split(np.arange(len(rows)), 4):
        with service.database.transaction(write=True) as repo:
            repo.log_predictions([rows[i] for i in part])
    with service.database.transaction(write=True) as repo:
        repo.record_outcomes("churn", labels[100:], T0)


def _same(ours: Any, theirs: Any, at: str = "") -> None:
    """JSON equal, numbers to 1e-9 (intervals' ends to 1e-4: second moments are float32 in
    a stored hour, which the Gaussian draws follow; the expected AUC and the prior to 1e-6,
    from the cells' float32 sums)."""
    if isinstance(ours, dict):
        assert ours.keys() == theirs.keys(), at
        for key in ours:
            _same(ours[key], theirs[key], f"{at}.{key}")
    elif isinstance(ours, list):
        assert len(ours) == len(theirs), at
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _same(a, b, f"{at}[{i}]")
    elif isinstance(ours, float) and isinstance(theirs, float):
        rel = 1e-4 if "intervals" in at or "interval" in at else 1e-9
        if at.endswith("estimated.roc_auc") or ".prior." in at:
            rel = 1e-6  # the cells' sums, float32 once stored, make the AUC and EM's means
        assert ours == pytest.approx(theirs, rel=rel, abs=1e-12), at
    else:
        assert ours == theirs, at


RANGES = [
    ("1h", T0, T0 + timedelta(hours=4)),  # hour 0 from the rows, 1-3 stored
    ("1d", T0 + timedelta(minutes=30), T0 + timedelta(days=1, minutes=30)),  # off the hour
    ("1h", T0 + timedelta(minutes=15), T0 + timedelta(hours=4, minutes=15)),  # all rows
]


def test_stored_hours_and_rows_answer_as_the_rows_alone(client: TestClient, logged: None) -> None:
    for window, since, until in RANGES:
        query = {"window": window, "since": since.isoformat(), "until": until.isoformat()}
        asked = [query, {**query, "version": "1"}, {**query, "version": "2"}]
        _start_rollups_at(client, T0 + timedelta(hours=1))
        mixed = [client.get(f"{BASE}/monitoring", params=q) for q in asked]
        _start_rollups_at(client, datetime(9000, 1, 1, tzinfo=UTC))  # every hour from rows
        rows = [client.get(f"{BASE}/monitoring", params=q) for q in asked]
        for ours, theirs in zip(mixed, rows, strict=True):
            assert ours.status_code == theirs.status_code == 200, ours.text
            _same(ours.json()["windows"], theirs.json()["windows"])
        _assert_counted(client, since, until)
        windows = mixed[0].json()["windows"]
        assert {w["version"] for w in windows} == {1, 2}
        if since == T0:  # the whole of the traffic
            assert sum(w["n_predictions"] for w in windows) == 860
            assert sum(w["n_labelled"] for w in windows) == 430


def _assert_counted(client: TestClient, since: datetime, until: datetime) -> None:
    """The pages' and verdicts' counts, from the stored hours and days, are the rows'."""
    service = client.app.state.service  # type: ignore[attr-defined]
    with service.database.transaction() as repo:
        for version in (None, 1, 2):
            found = counted(repo, "churn", since, until, version)
            assert found == repo.traffic_counts("churn", since, until, version), version


def test_folded_days_answer_as_their_hours_and_the_rows(client: TestClient) -> None:
    """Once the log's upkeep has folded the day (every hour of it stored), a window of a day
    or a week reads the stored day: it answers as the hours did, and as the rows alone; a
    window of an hour still reads the hours. A late outcome then lands in both."""
    _log_churn(client, T0)
    service = client.app.state.service  # type: ignore[attr-defined]
    queries = [
        {"window": window, "since": since.isoformat(), "until": until.isoformat(), **version}
        for window, since, until in (
            ("1d", T0 - timedelta(days=1), T0 + timedelta(days=2)),
            ("7d", T0 - timedelta(days=7), T0 + timedelta(days=7)),  # holds T0's day whole
            ("1h", T0, T0 + timedelta(hours=5)),
        )
        for version in ({}, {"version": "1"}, {"version": "2"})
    ]

    def answers() -> list[Any]:
        found = [client.get(f"{BASE}/monitoring", params=q) for q in queries]
        assert all(r.status_code == 200 for r in found), [r.text for r in found]
        return [r.json()["windows"] for r in found]

    hours = answers()
    assert service.prediction_log.fold_days(T0 + timedelta(days=1, hours=2)) == 1
    with service.database.transaction() as repo:
        folded = {v for _, v, _ in repo.day_rollups("churn", T0, T0 + timedelta(days=1))}
    assert folded == {1, 2}
    for late in (False, True):
        folded_answers = answers()
        assert_days_sum_their_hours(service.database, "churn")
        for since, until in ((T0 - DAY, T0 + 2 * DAY), (T0 + HOUR, T0 + 2 * DAY)):
            _assert_counted(client, since, until)
        _start_rollups_at(client, datetime(9000, 1, 1, tzinfo=UTC))  # every hour from rows
        rows = answers()
        _start_rollups_at(client, T0)
        if late:  # the day's sums took the outcomes as its hours did
            with service.database.transaction(write=True) as repo:
                repo._session.execute(delete(TrafficRollupDay))
            hours = answers()
        for ours, theirs, alone in zip(folded_answers, hours, rows, strict=True):
            _same(ours, theirs)
            _same(ours, alone)
        if not late:  # the days' and weeks' windows read the day, not its hours: emptied
            table = TrafficRollup.__table__
            with service.database.transaction(write=True) as repo:
                kept = [row._asdict() for row in repo._session.execute(table.select())]
                stored = next(row["data"] for row in kept if row["version"] == 1)
                empty = BinaryRollup(BinaryRollup.from_bytes(stored).scores.size)
                repo._session.execute(
                    table.update().where(table.c.version == 1).values(data=empty.to_bytes())
                )
            _same(answers()[:6], folded_answers[:6])
            with service.database.transaction(write=True) as repo:
                repo._session.execute(table.delete())
                repo._session.execute(table.insert(), kept)
        with service.database.transaction(write=True) as repo:
            repo.record_outcomes(
                "churn", [(f"b{i}", 1) for i in range(1, 200, 2)], T0, overwrite=True
            )  # late outcomes, and overwrites of 20 labels
            repo.record_outcomes("churn", [(f"b{i}", 0) for i in range(0, 40, 2)], T0,
                                 overwrite=True)  # fmt: skip


def test_a_k_class_hour_marked_before_its_rollups_has_its_windows_read_from_rows(
    client: TestClient,
) -> None:
    """A database upgraded with k-class traffic in it marks those hours (data ``b""``): a
    window holding one reads that version's rows whole, never its stored hours as well, and
    the pages' counts do the same."""
    _log_churn(client, T0)
    service = client.app.state.service  # type: ignore[attr-defined]
    with service.database.transaction(write=True) as repo:
        repo._session.execute(
            update(TrafficRollup)
            .where(TrafficRollup.version == 2, TrafficRollup.hour == T0)
            .values(data=b"")
        )
    ranges = [("1h", T0, T0 + 4 * HOUR), ("1d", T0 - DAY, T0 + DAY)]
    for window, since, until in ranges:
        query = {"window": window, "since": since.isoformat(), "until": until.isoformat()}
        asked = [query, {**query, "version": "2"}]
        marked = [client.get(f"{BASE}/monitoring", params=q) for q in asked]
        _start_rollups_at(client, datetime(9000, 1, 1, tzinfo=UTC))  # every hour from rows
        rows = [client.get(f"{BASE}/monitoring", params=q) for q in asked]
        _start_rollups_at(client, T0)
        for ours, theirs in zip(marked, rows, strict=True):
            assert ours.status_code == theirs.status_code == 200, ours.text
            _same(ours.json()["windows"], theirs.json()["windows"])
        _assert_counted(client, since, until)
    k_class = [w for w in marked[1].json()["windows"] if w["n_predictions"]]
    assert sum(w["n_predictions"] for w in k_class) == 60
