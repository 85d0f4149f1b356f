"""The prediction log and the outcomes joined to it, within a repository's session.

Logged predictions are written many at a time by :class:`app.service.traffic.log.TrafficLog`. Each
id's first record wins across every day's partition through its key (``prediction_keys``, see
:class:`app.store.models.PredictionKey`): a row is written only when its key is new. On
PostgreSQL the rows are copied into a staging table of the session (binary ``COPY``), then a
few set-wise statements keep each id's first row, insert its key and its prediction, and
join the outcomes that waited for it in ``pending_outcomes``. On SQLite, where the database
runs in this process and a statement more costs the event loop, each chunk's keys go in one
``INSERT … ON CONFLICT DO NOTHING``, and the predictions of the new keys in one more. An
outcome finds its prediction through the key (:mod:`app.store.traffic.outcomes`).

Every writer of a calibrator's traffic holds the calibrator's row lock (flushes take theirs
in name order), so keys are checked and inserted without a race, and an outcome and the
flush of its prediction run one after the other.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import select

from app.errors import NotFound
from app.store.models import Version
from app.store.sql import chunks, placeholder, postgresql, sqlite_time
from app.store.traffic.days import RollupDays
from app.store.traffic.partitions import analyze_new
from app.store.traffic.periods import day_of
from app.store.traffic.rows import (
    COLUMNS,
    ROW_MARKS,
    STAGED_TYPES,
    STAGING,
    LogCounts,
    LoggedPrediction,
)

INSERT_ROWS = 1000
"""Rows per multi-row INSERT on SQLite (8 parameters each: within its 32,766)."""

LOOKUP_IDS = 1000
"""Client ids per ``IN (…)`` lookup of pending outcomes (SQLite)."""


class TrafficOperations(RollupDays):
    """Log predictions, record outcomes, expire and delete traffic."""

    def log_predictions(self, rows: Sequence[LoggedPrediction]) -> LogCounts:
        """Insert ``rows`` (an id already logged for its calibrator keeps its first record)
        and join the outcomes that were waiting for them; the rows of a version deleted
        meanwhile are discarded, the calibrator's traffic having gone with it.

        Takes the row lock of each calibrator logged, in name order, before it inserts: an
        outcome writer holds the same lock (:meth:`record_outcomes`), so the two run one
        after the other. An outcome that committed first is pending when the join looks; one
        that waited finds the prediction logged. Without the lock, at READ COMMITTED each
        missed the other: the outcome's lookup ran before the insert committed and its
        pending row committed after the join had looked, so it waited for ever. A delete of
        the calibrator holds the lock too (:meth:`delete_traffic`): it deletes what was
        logged before it, and a flush that waited for it finds the version gone, also once
        the name is fitted again (the new versions are numbered after every old one). Name
        order: two flushes never wait on each other in a cycle, and every other writer holds
        one calibrator's lock only.
        """
        live = self._lock_versions(rows)
        kept = [row for row in rows if (row.name, row.version) in live]
        if not kept:
            return LogCounts(new=0, discarded=len(rows))
        names = sorted({row.name for row in kept})
        if not postgresql(self._session):
            fresh = self._insert_new(kept)
            joined = self._join_pending_sqlite(names, fresh)
            new_rows = [row for row, _ in fresh]
            self.roll_up(new_rows, [joined.get((r.name, r.client_id)) for r in new_rows])
            return LogCounts(new=len(fresh), discarded=len(rows) - len(kept))
        # Set-wise SQL over the staging table binary COPY fills: 93,000 rows/s here, where
        # the 1,000-row INSERTs SQLite keeps made 26,000 (bench/traffic.py).
        self._stage(kept)
        connection = self._session.connection()
        marked = connection.exec_driver_sql(
            "UPDATE incoming_predictions SET fresh = 1 "
            "WHERE ord IN (SELECT min(ord) FROM incoming_predictions GROUP BY name, client_id) "
            "AND NOT EXISTS (SELECT 1 FROM prediction_keys AS k "
            "WHERE k.name = incoming_predictions.name "
            "AND k.client_id = incoming_predictions.client_id)"
        )
        connection.exec_driver_sql(
            "INSERT INTO prediction_keys (name, client_id, predicted_at) "
            "SELECT name, client_id, predicted_at FROM incoming_predictions WHERE fresh = 1"
        )
        pending = self._any_pending(names)  # one probe for both steps
        staged = self._staged_labels(pending, every=marked.rowcount == len(kept))
        new = self._insert_staged(pending)
        fresh_rows = kept if staged is None else [kept[i] for i in staged]
        self.roll_up(fresh_rows, [None] * len(kept) if staged is None else list(staged.values()))
        analyze_new(connection, {day_of(row.predicted_at).date() for row in kept})
        return LogCounts(new=new, discarded=len(rows) - len(kept))

    def _staged_labels(self, pending: bool, *, every: bool) -> dict[int, int | None] | None:
        """PostgreSQL: the staged rows that are new (their order in the flush) and the label
        each will be joined to (None: none waits); None when ``every`` row is new and no
        outcome of the flush's calibrators is ``pending`` (the usual flush: nothing is read)."""
        if every and not pending:
            return None
        connection = self._session.connection()
        found = connection.exec_driver_sql(
            "SELECT i.ord, po.label FROM incoming_predictions AS i LEFT JOIN pending_outcomes "
            "AS po ON po.name = i.name AND po.client_id = i.client_id AND "
            f"{'TRUE' if pending else 'FALSE'} WHERE i.fresh = 1 ORDER BY i.ord"
        )
        return {int(o): None if label is None else int(label) for o, label in found}

    def delete_traffic(self, name: str) -> None:
        """Delete the logged predictions, their keys and the pending outcomes of ``name``
        (with the calibrator, whose row lock the caller holds: a calibrator fitted again
        under the name starts without them)."""
        mark = placeholder(self._session)
        for table in ("predictions", "prediction_keys", "pending_outcomes"):
            self._session.connection().exec_driver_sql(
                f"DELETE FROM {table} WHERE name = {mark}", (name,)
            )
        self.delete_rollups(name)

    def _lock_versions(self, rows: Sequence[LoggedPrediction]) -> set[tuple[str, int]]:
        """Lock the calibrator of each name in ``rows``, in name order; which of their
        (name, version) pairs are versions that exist (none of a deleted calibrator)."""
        versions: dict[str, set[int]] = {}
        for row in rows:
            versions.setdefault(row.name, set()).add(row.version)
        live: set[tuple[str, int]] = set()
        for name in sorted(versions):
            try:
                calibrator_id = self._lock(name)
            except NotFound:  # deleted, and its traffic with it
                continue
            found = self._session.scalars(
                select(Version.version).where(
                    Version.calibrator_id == calibrator_id, Version.version.in_(versions[name])
                )
            )
            live.update((name, version) for version in found)
        return live

    def _stage(self, rows: Sequence[LoggedPrediction]) -> None:
        """Copy ``rows`` into the session's ``incoming_predictions`` (PostgreSQL's binary
        ``COPY``; the table is emptied at every commit), numbered in order."""
        connection = self._session.connection()
        connection.exec_driver_sql(STAGING)
        connection.exec_driver_sql("TRUNCATE incoming_predictions")  # a second flush in one
        raw: Any = connection.connection.driver_connection
        with (
            raw.cursor() as cursor,
            cursor.copy(
                f"COPY incoming_predictions (ord, {COLUMNS}) FROM STDIN (FORMAT binary)"
            ) as copy,
        ):
            copy.set_types(STAGED_TYPES)
            for number, row in enumerate(rows):
                copy.write_row((number, *row))

    def _insert_new(self, rows: Sequence[LoggedPrediction]) -> list[tuple[LoggedPrediction, str]]:
        """SQLite: insert the keys of ``rows``, many a statement, and the predictions of
        those that were new (an id's first row in ``rows``); those rows, with their time as
        stored.

        The keys a chunk added are read back only when its insert skipped some (an id logged
        before, or twice in the chunk); otherwise every row is new and nothing is read. They
        are the rows inserted last: one writer at a time holds SQLite, and a rowid table
        (``prediction_keys`` has no AUTOINCREMENT) numbers each new row one past its
        largest rowid, which stays far below 2^63 - 1, where SQLite would pick them at
        random. On the driver's own connection, within the session's transaction:
        SQLAlchemy's result rows, and ``RETURNING``'s, made the flush a third slower, time
        the request path waits for the GIL.
        """
        raw = cast(sqlite3.Connection, self._session.connection().connection.driver_connection)
        times: dict[datetime, str] = {}  # a request's rows share one time: format it once
        fresh: list[tuple[LoggedPrediction, str]] = []
        for chunk in chunks(rows, INSERT_ROWS):
            at = [times.get(r[3]) or times.setdefault(r[3], sqlite_time(r[3])) for r in chunk]
            keys: list[object] = []
            for r, t in zip(chunk, at, strict=True):
                keys += (r[0], r[1], t)
            inserted = raw.execute(
                "INSERT INTO prediction_keys (name, client_id, predicted_at) VALUES "
                f"{', '.join(['(?, ?, ?)'] * len(chunk))} ON CONFLICT (name, client_id) DO NOTHING",
                keys,
            )
            if inserted.rowcount == len(chunk):  # every key new: the usual flush
                firsts = list(zip(chunk, at, strict=True))
            else:
                new = set()
                if inserted.rowcount > 0:  # lastrowid is this insert's last new row
                    new = set(
                        raw.execute(
                            "SELECT name, client_id FROM prediction_keys WHERE rowid > ?",
                            ((inserted.lastrowid or 0) - inserted.rowcount,),
                        ).fetchall()
                    )
                firsts = []
                for r, t in zip(chunk, at, strict=True):
                    if (r[0], r[1]) in new:
                        new.discard((r[0], r[1]))  # a later row of the id is a duplicate
                        firsts.append((r, t))
            if firsts:
                values: list[object] = []
                for r, t in firsts:
                    values += (r[0], r[1], r[2], t, *r[4:])
                raw.execute(
                    f"INSERT INTO predictions ({COLUMNS}) VALUES "
                    f"{', '.join([ROW_MARKS] * len(firsts))}",
                    values,
                )
            fresh += firsts
        return fresh

    def _join_pending_sqlite(
        self, names: Sequence[str], fresh: Sequence[tuple[LoggedPrediction, str]]
    ) -> dict[tuple[str, str], int]:
        """SQLite: give the predictions just logged the outcomes that waited for them (when
        some outcome of these calibrators waits: else one index probe); the labels given,
        by (name, id)."""
        joined: dict[tuple[str, str], int] = {}
        if not fresh or not self._any_pending(names):
            return joined
        connection = self._session.connection()
        for name in names:
            logged = {r.client_id: at for r, at in fresh if r.name == name}
            for chunk in chunks(list(logged), LOOKUP_IDS):
                marks = ", ".join(["?"] * len(chunk))
                waiting = connection.exec_driver_sql(
                    "SELECT client_id, label, received_at FROM pending_outcomes "
                    f"WHERE name = ? AND client_id IN ({marks})",
                    (name, *chunk),
                ).all()
                if not waiting:
                    continue
                joined.update(((name, i), int(y)) for i, y, _ in waiting)
                connection.exec_driver_sql(
                    "UPDATE predictions SET label = ?, labelled_at = ? "
                    "WHERE name = ? AND client_id = ? AND predicted_at = ?",
                    [(y, when, name, i, logged[i]) for i, y, when in waiting],
                )
                connection.exec_driver_sql(
                    f"DELETE FROM pending_outcomes WHERE name = ? AND client_id IN ({marks})",
                    (name, *chunk),
                )
        return joined

    def _any_pending(self, names: Sequence[str]) -> bool:
        """Whether an outcome of one of these calibrators waits for its prediction."""
        mark = placeholder(self._session)
        found = self._session.connection().exec_driver_sql(
            f"SELECT 1 FROM pending_outcomes WHERE name IN ({', '.join([mark] * len(names))}) "
            "LIMIT 1",
            tuple(names),
        )
        return found.first() is not None

    def _insert_staged(self, pending: bool) -> int:
        """PostgreSQL: insert the staged fresh predictions, each with the outcome that waited
        for it, if any (when some outcome of the flush's calibrators is ``pending``), and
        delete those outcomes; how many were inserted.

        The outcomes are joined on the way in. Joined after, by an ``UPDATE`` of the rows
        just inserted, PostgreSQL read the day's (name, time) index once per staged row
        when the day's statistics were a few rows old, and one predict's rows share their
        time: 20,000 of them took 46 s, past the statement timeout, at every retry of the
        flush, which held every later flush of the process behind it."""
        connection = self._session.connection()
        if not pending:
            return int(
                connection.exec_driver_sql(
                    f"INSERT INTO predictions ({COLUMNS}) "
                    f"SELECT {COLUMNS} FROM incoming_predictions WHERE fresh = 1"
                ).rowcount
            )
        staged = ", ".join(f"i.{column}" for column in COLUMNS.split(", "))
        new = connection.exec_driver_sql(
            f"INSERT INTO predictions ({COLUMNS}, label, labelled_at) "
            f"SELECT {staged}, po.label, po.received_at FROM incoming_predictions AS i "
            "LEFT JOIN pending_outcomes AS po ON po.name = i.name AND po.client_id = i.client_id "
            "WHERE i.fresh = 1"
        ).rowcount
        connection.exec_driver_sql(
            "DELETE FROM pending_outcomes WHERE EXISTS (SELECT 1 FROM incoming_predictions AS i "
            "WHERE i.fresh = 1 AND i.name = pending_outcomes.name "
            "AND i.client_id = pending_outcomes.client_id)"
        )
        return int(new)
