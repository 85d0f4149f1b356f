"""The prediction log: predictions sent with ids, buffered in memory, written in batches.

Predict hands each logged prediction to :meth:`TrafficLog.record`, which only appends to a
bounded buffer: the request never waits for the database. A writer thread takes what has
gathered every ``CALIBRATION_TRAFFIC_FLUSH_SECONDS`` (at most 1 s), or as soon as
``CALIBRATION_TRAFFIC_FLUSH_ROWS`` wait, and writes it in one transaction
(:meth:`app.store.traffic.log.TrafficOperations.log_predictions`), which also joins the outcomes
that arrived first. While the database is down the rows stay buffered and are written
again; what does not fit in ``CALIBRATION_TRAFFIC_BUFFER_ROWS`` is dropped, counted
(``calibration_traffic_dropped_total``) and logged. The guarantee: a prediction is durable
once its flush committed; a process that dies loses at most what gathered since the last
flush (≤ 1 s), and a graceful shutdown flushes first (:meth:`TrafficLog.close`). Rows of a
version deleted before they are written are discarded (``calibration_traffic_discarded_total``):
a deleted calibrator's traffic goes with it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
from numpy.typing import NDArray

from app.errors import DatabaseUnavailable, NotFound
from app.observability import record_traffic
from app.store import Database, LoggedPrediction

logger = logging.getLogger("app.traffic")

CLOSE_SECONDS = 10.0
"""How long a shutdown waits for the last flush."""

EXPIRE_EVERY_SECONDS = 300.0
"""How often traffic past the retention is deleted."""

FOLD_SECONDS = 30.0
"""How long one upkeep folds days at most, the log flushed between its transactions."""

EXPIRE_BATCH_ROWS = 10_000
"""Rows deleted per table and transaction when traffic expires (keys, predictions, pending
outcomes; on PostgreSQL a day's predictions go with its partition)."""


class TrafficLog:
    """A bounded buffer of logged predictions and the thread that writes it."""

    def __init__(
        self,
        database: Database,
        *,
        capacity: int,
        flush_rows: int,
        flush_seconds: float,
        retention_days: float = 30.0,
        writer: bool = True,
    ) -> None:
        """``writer=False`` starts no writer thread (a worker process's service, which logs
        nothing and must not run the log's upkeep)."""
        self.database = database
        self.capacity = capacity
        self.flush_rows = flush_rows
        self.flush_seconds = flush_seconds
        self.retention = timedelta(days=retention_days)
        self._expired_at = time.monotonic()
        self._buffer: deque[LoggedPrediction] = deque()
        self._lock = threading.Lock()
        self._flushing = threading.Lock()  # one flush at a time: see flush()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._dropped_unreported = 0  # since the last warning (at most one a second)
        self._warned_at = 0.0
        self._thread = threading.Thread(target=self._run, name="traffic-log", daemon=True)
        if writer:
            self._thread.start()

    def record(
        self,
        name: str,
        version: int,
        ids: Sequence[str],
        scores: NDArray[np.float64],
        probabilities: NDArray[np.float64],
    ) -> int:
        """Buffer one prediction per id (the request's scores and answers, row for row); how
        many the buffer took (the rest are dropped and counted: it is full, because the
        database is down or the predicts outrun the writer)."""
        now = datetime.now(UTC)
        if scores.ndim == 1:
            rows = [  # positional: a NamedTuple's keywords cost a third more
                LoggedPrediction(name, i, version, now, s, p)
                for i, s, p in zip(ids, scores.tolist(), probabilities.tolist(), strict=True)
            ]
        else:
            raw, calibrated = _rows(scores), _rows(probabilities)
            rows = [
                LoggedPrediction(name, i, version, now, None, None, r, c)
                for i, r, c in zip(ids, raw, calibrated, strict=True)
            ]
        with self._lock:
            room = self.capacity - len(self._buffer)
            kept = rows[: max(room, 0)]
            self._buffer.extend(kept)
            full = len(self._buffer) >= self.flush_rows
        if len(kept) < len(rows):
            self._drop(len(rows) - len(kept))
        if full and not self._wake.is_set():  # set() takes a lock: once per flush will do
            self._wake.set()
        return len(kept)

    def flush(self) -> int:
        """Write what is buffered now; how many rows were written (0 if the database is
        unavailable: they stay buffered, as far as there is room).

        Flushes run one at a time, so when it returns every row recorded before the call is
        written (or back in the buffer), including rows another flush had taken and was still
        writing."""
        with self._flushing:
            return self._flush()

    def _flush(self) -> int:
        with self._lock:
            taken = list(self._buffer)
            self._buffer.clear()
        if not taken:
            return 0
        try:
            with self.database.transaction(write=True) as repo:
                counts = repo.log_predictions(taken)
        except DatabaseUnavailable:
            self._put_back(taken)
            return 0
        except Exception:
            logger.exception("could not log %d predictions; they are dropped", len(taken))
            self._drop(len(taken))
            return 0
        record_traffic("logged", counts.new)
        record_traffic("discarded", counts.discarded)
        record_traffic("duplicate", len(taken) - counts.new - counts.discarded)
        return len(taken)

    def expire(self) -> int:
        """Give the coming days their partitions (PostgreSQL), delete the traffic older than
        the retention, a batch per transaction, then fold the days that are over
        (:meth:`fold_days`); how many logged ids went (stops quietly while the database is
        unavailable, or a partition's lock is not had in time)."""
        now = datetime.now(UTC)
        before = now - self.retention
        total = 0
        try:
            with self.database.transaction(write=True) as repo:
                repo.maintain_traffic(now, before)
            while True:
                with self.database.transaction(write=True) as repo:
                    gone = repo.expire_traffic(before, EXPIRE_BATCH_ROWS)
                total += gone
                if gone < EXPIRE_BATCH_ROWS or self._closed.is_set():
                    break
            self.fold_days(now)
        except DatabaseUnavailable:
            pass
        return total

    def fold_days(self, now: datetime) -> int:
        """Fold the calibrators' days over by ``now`` into stored days
        (:mod:`app.store.traffic.days`): a transaction per calibrator and week, the log
        flushed between them, for at most :data:`FOLD_SECONDS` (the rest next time); how
        many transactions folded. A calibrator that fails is logged and left for the next
        time; the others go on."""
        with self.database.transaction() as repo:
            names = repo.names_to_fold(now)
        kept_from = now - self.retention  # the hours before it are expiring
        deadline = time.monotonic() + FOLD_SECONDS
        folds = 0
        for name in names:
            more = True
            while more and time.monotonic() < deadline and not self._closed.is_set():
                try:
                    with self.database.transaction(write=True) as repo:
                        more = repo.fold_days(name, now, kept_from)
                except NotFound:  # deleted meanwhile: its traffic went with it
                    break
                except DatabaseUnavailable:
                    raise
                except Exception:
                    logger.exception("could not fold the days of %r; tried again later", name)
                    break
                folds += 1
                self.flush()
        return folds

    def close(self) -> None:
        """Stop the writer after one last flush (at shutdown)."""
        self._closed.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(CLOSE_SECONDS)

    @property
    def buffered(self) -> int:
        """How many rows wait to be written."""
        return len(self._buffer)

    def _run(self) -> None:
        while not self._closed.is_set():
            self._wake.wait(self.flush_seconds)
            self._wake.clear()
            started = time.monotonic()
            self.flush()
            if started - self._expired_at >= EXPIRE_EVERY_SECONDS:
                self._expired_at = started
                try:
                    self.expire()
                except Exception:  # the writer must outlive a failed upkeep: tried again later
                    logger.exception("traffic upkeep failed; the log goes on")
            if self.database.unavailable:  # do not hammer a database that is down
                self._closed.wait(max(0.0, self.flush_seconds - (time.monotonic() - started)))
        self.flush()

    def _put_back(self, taken: list[LoggedPrediction]) -> None:
        """Return unwritten rows to the front of the buffer, oldest first, within capacity."""
        with self._lock:
            room = max(self.capacity - len(self._buffer), 0)
            kept = taken[:room]
            self._buffer.extendleft(reversed(kept))
        if len(kept) < len(taken):
            self._drop(len(taken) - len(kept))

    def _drop(self, rows: int) -> None:
        record_traffic("dropped", rows)
        logger.warning(
            "dropped %d logged predictions: the traffic buffer (%d rows) is full",
            rows,
            self.capacity,
        )


def _rows(matrix: NDArray[np.float64]) -> list[bytes]:
    """Each row of ``matrix`` as float64 little-endian bytes."""
    data = np.ascontiguousarray(matrix, dtype="<f8")
    return [row.tobytes() for row in data]
