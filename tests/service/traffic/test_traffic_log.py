"""app.service.traffic.log.TrafficLog: buffered, bounded, written in batches, nothing lost
silently."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from prometheus_client import REGISTRY

from app.errors import DatabaseUnavailable, NotFound
from app.service.traffic.log import TrafficLog
from app.store.traffic.rows import LogCounts, LoggedPrediction


class FakeDatabase:
    """A database that stores logged rows (first id wins), or is down."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], LoggedPrediction] = {}
        self.down = False
        self.unavailable = False
        self.writes = 0
        self.folds: dict[str, int] = {}  # transactions each calibrator's days take to fold

    @contextmanager
    def transaction(self, *, write: bool = False) -> Iterator[FakeDatabase]:
        if self.down:
            self.unavailable = True
            raise DatabaseUnavailable("down")
        self.unavailable = False
        yield self

    expired: int = 25
    """Rows past the retention, for :meth:`expire_traffic`."""
    maintained: int = 0
    """Rounds of partition upkeep, each before an expiry."""

    def maintain_traffic(self, now: Any, before: Any) -> None:
        self.maintained += 1

    def expire_traffic(self, before: Any, limit: int) -> int:
        gone = min(self.expired, limit)
        self.expired -= gone
        self.writes += 1
        return gone

    def names_to_fold(self, now: Any) -> list[str]:
        return sorted(self.folds)

    def fold_days(self, name: str, now: Any, kept_from: Any) -> bool:
        if name == "gone":
            raise NotFound(name)
        if name == "broken":
            raise ValueError("rollups of different score bins do not add up")
        self.writes += 1
        self.folds[name] -= 1
        return self.folds[name] > 0

    def log_predictions(self, rows: list[LoggedPrediction]) -> LogCounts:
        self.writes += 1
        new = [r for r in rows if (r.name, r.client_id) not in self.rows]
        for row in new:
            self.rows.setdefault((row.name, row.client_id), row)
        return LogCounts(new=len({(r.name, r.client_id) for r in new}), discarded=0)


def counter(name: str) -> float:
    return REGISTRY.get_sample_value(f"calibration_traffic_{name}_total") or 0.0


def make(database: FakeDatabase, **options: Any) -> TrafficLog:
    settings = {"capacity": 100, "flush_rows": 50, "flush_seconds": 60.0, **options}
    return TrafficLog(database, **settings)  # type: ignore[arg-type]


def record(log: TrafficLog, ids: list[str], version: int = 1) -> None:
    scores = np.linspace(-1, 1, len(ids))
    log.record("churn", version, ids, scores, 1 / (1 + np.exp(-scores)))


def test_rows_are_written_on_flush_with_what_was_answered() -> None:
    database = FakeDatabase()
    log = make(database)
    try:
        record(log, ["a", "b", "c"])
        assert database.rows == {}  # buffered: the request did not wait
        assert log.flush() == 3
        row = database.rows[("churn", "b")]
        assert (row.version, row.score, row.probability) == (1, 0.0, 0.5)
    finally:
        log.close()


class SlowDatabase(FakeDatabase):
    """A database whose first write waits until :attr:`release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = threading.Event()
        self.release = threading.Event()

    def log_predictions(self, rows: list[LoggedPrediction]) -> LogCounts:
        if not self.writing.is_set():
            self.writing.set()
            assert self.release.wait(10)
        return super().log_predictions(rows)


def test_a_flush_returns_only_once_rows_another_flush_took_are_written() -> None:
    # A caller that flushes and then reads the database must find every row recorded before
    # its flush, although the writer thread may have taken them a moment earlier.
    database = SlowDatabase()
    log = make(database, flush_rows=2)
    try:
        record(log, ["a", "b"])  # wakes the writer, which takes both and waits in its write
        assert database.writing.wait(5)
        assert log.buffered == 0
        flusher = threading.Thread(target=log.flush)
        flusher.start()
        flusher.join(0.2)
        assert flusher.is_alive()  # waiting for the writer's flush, not returning early
        database.release.set()
        flusher.join(5)
        assert not flusher.is_alive()
        assert set(database.rows) == {("churn", "a"), ("churn", "b")}
    finally:
        database.release.set()
        log.close()


def test_a_full_batch_wakes_the_writer_and_close_writes_the_rest() -> None:
    database = FakeDatabase()
    log = make(database, flush_rows=10)
    record(log, [f"id-{i}" for i in range(10)])
    deadline = time.monotonic() + 5
    while len(database.rows) < 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(database.rows) == 10
    record(log, ["last"])
    log.close()
    assert ("churn", "last") in database.rows


def test_duplicates_keep_the_first_record_and_are_counted() -> None:
    database = FakeDatabase()
    log = make(database)
    try:
        duplicates = counter("duplicates")
        record(log, ["a", "b"], version=1)
        log.flush()
        record(log, ["a"], version=2)
        log.flush()
        assert database.rows[("churn", "a")].version == 1
        assert counter("duplicates") - duplicates == 1
    finally:
        log.close()


def test_while_the_database_is_down_rows_wait_and_what_overflows_is_counted() -> None:
    database = FakeDatabase()
    log = make(database, capacity=10)
    try:
        dropped = counter("dropped")
        database.down = True
        record(log, [f"early-{i}" for i in range(6)])
        assert log.flush() == 0
        assert log.buffered == 6  # put back, in order
        record(log, [f"late-{i}" for i in range(6)])  # 4 fit
        assert log.buffered == 10
        assert counter("dropped") - dropped == 2
        database.down = False
        assert log.flush() == 10
        assert sorted(i for _, i in database.rows) == sorted(
            [f"early-{i}" for i in range(6)] + [f"late-{i}" for i in range(4)]
        )
    finally:
        log.close()


def test_expiry_deletes_in_batches_until_nothing_is_left(monkeypatch: Any) -> None:
    monkeypatch.setattr("app.service.traffic.log.EXPIRE_BATCH_ROWS", 10)
    database = FakeDatabase()
    log = make(database)
    try:
        assert log.expire() == 25
        assert database.writes == 3  # 10, 10, then 5: fewer than a batch, done
        assert database.maintained == 1  # the coming days' partitions first
        database.down = True
        assert log.expire() == 0  # quietly, while the database is down
    finally:
        log.close()


def test_upkeep_folds_each_calibrators_days_until_none_are_left() -> None:
    database = FakeDatabase()
    database.expired = 0
    database.folds = {"a": 3, "broken": 1, "c": 1, "gone": 1}
    log = make(database)
    try:
        log.expire()
        # a week per transaction; one that fails is left, and the others go on
        assert database.folds == {"a": 0, "broken": 1, "c": 0, "gone": 1}
        assert database.writes == 1 + 3 + 1  # the expiry's, then the folds'
    finally:
        log.close()


def test_a_failed_upkeep_leaves_the_writer_writing(monkeypatch: Any) -> None:
    monkeypatch.setattr(
        "app.service.traffic.log.EXPIRE_EVERY_SECONDS", 0.0
    )  # upkeep after every flush
    database = FakeDatabase()
    failures = []

    def broken(now: Any, before: Any) -> None:
        failures.append(now)
        raise RuntimeError("partition DDL failed")

    database.maintain_traffic = broken  # type: ignore[method-assign]
    log = make(database, flush_seconds=0.05)
    try:
        record(log, ["a"])
        deadline = time.monotonic() + 10
        while len(failures) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        record(log, ["b"])  # written by the same thread, after its upkeep failed twice
        while ("churn", "b") not in database.rows and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(failures) >= 2
        assert {("churn", "a"), ("churn", "b")} <= database.rows.keys()
    finally:
        log.close()
