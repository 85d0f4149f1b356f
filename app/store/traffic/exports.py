"""The prediction log's side of the traffic history (:mod:`app.store.history`): which days to
export, their rows streamed and fingerprinted, the record of each exported day, and the
rows dropped once it is recorded.

A day's **fingerprint** is its rows' count, labelled count, sum of labels and sum of their
labelling times (in microseconds), all in the database: an outcome posted after the file
was read changes it, whatever the clock of the process that posted it. The export compares
it under the calibrator's row lock, which every writer of the calibrator's traffic holds
(:mod:`app.store.traffic.log`), before it records the day and before its rows go.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import delete, exists, select, text
from sqlalchemy.orm import Session

from app.errors import NotFound
from app.store.models import Calibrator, ExportedDay, Prediction
from app.store.session import RepositoryBase
from app.store.sql import placeholder, postgresql, sqlite_time, time_param
from app.store.traffic.day_files import GROUP_ROWS, DayFile
from app.store.traffic.partitions import (
    ADVISORY_LOCK,
    DEFAULT,
    LOCK_TIMEOUT,
    partition_days,
    partition_name,
)
from app.store.traffic.periods import midnight


@dataclass(frozen=True)
class ExportRecord:
    """One calibrator's exported day, as ``exported_days`` keeps it."""

    name: str
    day: date
    object_key: str
    sha256: str
    rows: int
    labelled: int
    counts: dict[str, list[int]]
    fingerprint: str
    last_labelled_at: datetime | None

    @classmethod
    def of(cls, name: str, day: date, key: str, written: DayFile, fingerprint: str) -> ExportRecord:
        """The record of ``written``, uploaded as ``key``."""
        return cls(
            name,
            day,
            key,
            written.sha256,
            written.rows,
            written.labelled,
            written.counts,
            fingerprint,
            written.last_labelled_at,
        )

    @property
    def start(self) -> datetime:
        """The first instant of the day (UTC)."""
        return midnight(self.day)


def microseconds(session: Session, column: str) -> str:
    """``column`` (a time) as whole microseconds since the epoch, in SQL."""
    if postgresql(session):
        return f"(extract(epoch FROM {column}) * 1000000)::int8"
    seconds = f"CAST(strftime('%s', {column}) AS INTEGER)"
    return f"{seconds} * 1000000 + CAST(substr({column}, 21) AS INTEGER)"


class ExportOperations(RepositoryBase):
    """What the traffic history's command asks the database."""

    def names_logged_on(self, day: date) -> list[str]:
        """The live calibrators with logged predictions on ``day``, in name order (an
        index probe each)."""
        start, end = midnight(day), midnight(day + timedelta(days=1))
        logged = exists().where(
            Prediction.name == Calibrator.name,
            Prediction.predicted_at >= start,
            Prediction.predicted_at < end,
        )
        query = select(Calibrator.name).where(Calibrator.deleted_at.is_(None), logged)
        return list(self._session.scalars(query.order_by(Calibrator.name)))

    def day_fingerprint(self, name: str, day: date) -> str:
        """The fingerprint of ``name``'s rows of ``day``: ``rows:labelled:labels:times``."""
        where, params = self._day(name, day)
        row = (
            self._session.connection()
            .exec_driver_sql(
                "SELECT count(*), count(label), coalesce(sum(label), 0), "
                f"coalesce(sum({microseconds(self._session, 'labelled_at')}), 0) "
                f"FROM predictions WHERE {where}",
                params,
            )
            .one()
        )
        return ":".join(str(int(value)) for value in row)

    def day_rows(self, name: str, day: date) -> Iterator[Sequence[tuple[Any, ...]]]:
        """``name``'s rows of ``day`` in the columns of a day's file (times in microseconds),
        in time order, :data:`~app.store.traffic.day_files.GROUP_ROWS` at a time: a
        server-side cursor on PostgreSQL. Read within the unit of work."""
        where, params = self._day(name, day)
        at, labelled = (microseconds(self._session, c) for c in ("predicted_at", "labelled_at"))
        statement = (
            f"SELECT client_id, version, {at}, score, probability, scores_row, "
            f"probabilities_row, label, {labelled} FROM predictions WHERE {where} "
            "ORDER BY predicted_at, client_id"
        )
        raw: Any = self._session.connection().connection.driver_connection
        if postgresql(self._session):
            with raw.cursor(name="history_day") as cursor:
                cursor.execute(statement, params)
                while chunk := cursor.fetchmany(GROUP_ROWS):
                    yield chunk
            return
        rows = raw.execute(statement, params)
        while chunk := rows.fetchmany(GROUP_ROWS):
            yield chunk

    def exported_day(self, name: str, day: date) -> ExportRecord | None:
        """The record of ``name``'s exported ``day``, if it is."""
        found = self.exported_days(name, day, day)
        return found[0] if found else None

    def exported_days(self, name: str, first: date | None, last: date) -> list[ExportRecord]:
        """The records of ``name``'s days exported from ``first`` (None: any) to ``last``,
        in day order."""
        query = select(ExportedDay).where(ExportedDay.name == name, ExportedDay.day <= last)
        if first is not None:
            query = query.where(ExportedDay.day >= first)
        return [_record(row) for row in self._session.scalars(query.order_by(ExportedDay.day))]

    def keep_export(self, record: ExportRecord, fingerprint: str | None) -> bool:
        """Record (or record again) an exported day, after its file was uploaded, under the
        calibrator's row lock: only if its rows' fingerprint is still ``fingerprint`` (None:
        do not compare, the rows have begun to go). False when it is not, or the calibrator
        was deleted meanwhile: the file is not what the database holds."""
        try:
            self._lock(record.name)
        except NotFound:
            return False
        if fingerprint is not None and self.day_fingerprint(record.name, record.day) != fingerprint:
            return False
        now = datetime.now(UTC)
        values = {k: v for k, v in asdict(record).items() if k not in ("name", "day")}
        row = self._session.get(ExportedDay, (record.name, record.day))
        if row is None:
            self._session.add(
                ExportedDay(name=record.name, day=record.day, **values, exported_at=now)
            )
        else:
            for key, value in values.items():
                setattr(row, key, value)
            row.exported_at = now
        self._session.flush()
        return True

    def drop_exported_day(self, day: date) -> list[str]:
        """PostgreSQL: drop ``day``'s partition (and its rows in the default partition) once
        every calibrator with rows that day is recorded with the fingerprint its rows still
        have, checked under their row locks (name order, as flushes take them) and the
        partitions' advisory lock; else drop nothing and name the calibrators to export
        again."""
        connection = self._session.connection()
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK})
        connection.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
        recorded = {r.name: r for r in self._day_records(day)}
        stale = []
        for name in self.names_logged_on(day):
            try:
                self._lock(name)
            except NotFound:  # deleted meanwhile, and its rows with it
                continue
            record = recorded.get(name)
            if record is None or self.day_fingerprint(name, day) != record.fingerprint:
                stale.append(name)
        if stale:
            return stale
        if day in partition_days(connection):
            connection.execute(text(f"DROP TABLE {partition_name(day)}"))
        connection.exec_driver_sql(
            f"DELETE FROM {DEFAULT} WHERE predicted_at >= %s AND predicted_at < %s",
            (midnight(day), midnight(day + timedelta(days=1))),
        )
        return []

    def delete_exported_rows(
        self, record: ExportRecord, limit: int
    ) -> tuple[int, dict[str, tuple[int, int]]]:
        """SQLite: delete the first ``limit`` of the rows of ``record``'s day; how many. None
        is deleted when one of those was labelled after the file was read (later than its
        ``last_labelled_at``: one host's clock, writers one at a time): then every such row
        of the day, client id → (label, time in microseconds), for the file to be patched."""
        try:
            self._lock(record.name)
        except NotFound:
            return 0, {}
        where, params = self._day(record.name, record.day)
        mark = placeholder(self._session)
        late, late_params = "labelled_at IS NOT NULL", tuple[str, ...]()
        if record.last_labelled_at is not None:
            late, late_params = f"labelled_at > {mark}", (sqlite_time(record.last_labelled_at),)
        batch = f"SELECT rowid FROM predictions WHERE {where} ORDER BY predicted_at LIMIT {mark}"
        connection = self._session.connection()
        found = connection.exec_driver_sql(
            f"SELECT 1 FROM predictions WHERE rowid IN ({batch}) AND {late} LIMIT 1",
            (*params, limit, *late_params),
        ).first()
        if found is None:
            deleted = connection.exec_driver_sql(
                f"DELETE FROM predictions WHERE rowid IN ({batch})", (*params, limit)
            )
            return int(deleted.rowcount), {}
        labelled = connection.exec_driver_sql(
            f"SELECT client_id, label, {microseconds(self._session, 'labelled_at')} "
            f"FROM predictions WHERE {where} AND {late}",
            (*params, *late_params),
        )
        return 0, {i: (int(label), int(at)) for i, label, at in labelled}

    def forget_exports(self, before: date) -> None:
        """Forget the days exported before ``before`` (past the retention)."""
        self._session.execute(delete(ExportedDay).where(ExportedDay.day < before))

    def delete_history(self, name: str) -> None:
        """Forget ``name``'s exported days (with the calibrator: its files go at the
        history's next run, which deletes every file no record names)."""
        self._session.execute(delete(ExportedDay).where(ExportedDay.name == name))

    def export_keys(self) -> set[str]:
        """The object key of every exported day."""
        return set(self._session.scalars(select(ExportedDay.object_key)))

    def database_clock(self) -> datetime:
        """PostgreSQL: the database's clock, now (not the transaction's start)."""
        moment: datetime = self._session.execute(text("SELECT clock_timestamp()")).scalar_one()
        return moment

    def older_transactions(self, moment: datetime) -> int:
        """PostgreSQL: how many other clients of this database are in a transaction that
        began before ``moment`` (of those this user may see; autovacuum is none)."""
        return int(
            self._session.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND backend_type = 'client backend' AND pid <> pg_backend_pid() "
                    "AND xact_start < :moment"
                ),
                {"moment": moment},
            ).scalar_one()
        )

    def _day_records(self, day: date) -> list[ExportRecord]:
        return [
            _record(r)
            for r in self._session.scalars(select(ExportedDay).where(ExportedDay.day == day))
        ]

    def _day(self, name: str, day: date) -> tuple[str, tuple[Any, ...]]:
        """The WHERE clause of ``name``'s rows of ``day``, and its parameters."""
        mark = placeholder(self._session)
        start, end = midnight(day), midnight(day + timedelta(days=1))
        where = f"name = {mark} AND predicted_at >= {mark} AND predicted_at < {mark}"
        return where, (name, time_param(self._session, start), time_param(self._session, end))


def _record(row: ExportedDay) -> ExportRecord:
    return ExportRecord(
        row.name,
        row.day,
        row.object_key,
        row.sha256,
        row.rows,
        row.labelled,
        row.counts,
        row.fingerprint,
        row.last_labelled_at,
    )
