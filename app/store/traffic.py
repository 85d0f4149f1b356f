"""The prediction log and the outcomes joined to it, within a repository's session.

Logged predictions are written many at a time by :class:`app.traffic.TrafficLog`: one
multi-row ``INSERT … ON CONFLICT DO NOTHING`` per chunk, so the first record of an id wins
and a duplicate costs nothing but a count. Outcomes posted before their prediction wait in
``pending_outcomes`` and are joined in the transaction that logs the prediction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple, cast

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Table, and_, bindparam, delete, exists, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from app.errors import Conflict, NotFound, invalid
from app.store.models import PendingOutcome, Prediction, Version
from app.store.session import RepositoryBase

FloatArray = NDArray[np.float64]

INSERT_ROWS = 1000
"""Rows per INSERT statement (8 parameters each: within SQLite's 32,766)."""

LOOKUP_IDS = 1000
"""Client ids per ``IN (…)`` lookup (SQLite)."""

FETCH_ROWS = 10_000
"""Rows fetched at a time when SQLite reads traffic into arrays."""

TRAFFIC_COLUMNS = ("seconds", "version", "score", "probability", "label")
"""The columns of :meth:`TrafficOperations.traffic_columns`, in order."""

ARRAY_IDS = 100_000
"""Client ids per array parameter (PostgreSQL)."""


class LoggedPrediction(NamedTuple):  # a tuple: one is made per logged prediction
    """One prediction to log; binary versions fill ``score`` and ``probability``, k-class
    versions the rows (float64, little-endian)."""

    name: str
    client_id: str
    version: int
    predicted_at: datetime
    score: float | None = None
    probability: float | None = None
    scores_row: bytes | None = None
    probabilities_row: bytes | None = None


class LogCounts(NamedTuple):
    """What :meth:`TrafficOperations.log_predictions` did with its rows: ``new`` ones
    written, ``discarded`` ones of a version deleted before they were (the rest were
    duplicates)."""

    new: int
    discarded: int


@dataclass(frozen=True)
class LabelledTraffic:
    """The labelled predictions of a range: binary rows as ``scores`` and ``labels``, k-class
    rows as ``score_rows`` (n, k) and ``row_labels``; ``counts`` maps each version that
    answered in the range to its (predictions, labelled) counts."""

    scores: FloatArray
    labels: FloatArray
    score_rows: FloatArray
    row_labels: FloatArray
    counts: dict[int, tuple[int, int]]


@dataclass(frozen=True)
class OutcomeCounts:
    """What ``POST …/outcomes`` did with the ids it was given."""

    matched: int
    pending: int
    duplicates: int
    overwritten: int


class TrafficOperations(RepositoryBase):
    """Log predictions, record outcomes."""

    def log_predictions(self, rows: Sequence[LoggedPrediction]) -> LogCounts:
        """Insert ``rows`` (an id already logged for its calibrator keeps its first record)
        and join the outcomes that were waiting for them; the rows of a version deleted
        meanwhile are discarded, the calibrator's traffic having gone with it.

        Takes the row lock of each calibrator logged, in name order, before it inserts: an
        outcome writer holds the same lock (:meth:`record_outcomes`), so the two run one
        after the other. An outcome that committed first is pending when the join looks; one
        that waited finds the prediction logged. Without the lock, at READ COMMITTED each
        missed the other: the outcome's lookup ran before the insert committed and its
        pending row committed after the join's UPDATE had looked, so the join's DELETE then
        removed it as joined, or it waited for ever. A delete of the calibrator holds the
        lock too (:meth:`delete_traffic`): it deletes what was logged before it, and a flush
        that waited for it finds the version gone, also once the name is fitted again (the
        new versions are numbered after every old one). Name order: two flushes never wait
        on each other in a cycle, and every other writer holds one calibrator's lock only.
        """
        live = self._lock_versions(rows)
        kept = [row for row in rows if (row.name, row.version) in live]
        # Plain SQL, many rows a statement: SQLAlchemy building statements of thousands of
        # rows, or the driver stepping row by row, took much of a core from the event loop
        # that shares this process.
        connection = self._session.connection()
        sqlite = connection.dialect.name == "sqlite"
        mark = "?" if sqlite else "%s"
        row_marks = f"({', '.join([mark] * len(_COLUMNS))})"
        when = _sqlite_time if sqlite else _aware_time
        inserted = 0
        for chunk in _chunks(kept, INSERT_ROWS):
            statement = (
                f"INSERT INTO predictions ({', '.join(_COLUMNS)}) "
                f"VALUES {', '.join([row_marks] * len(chunk))} "
                "ON CONFLICT (name, client_id) DO NOTHING"
            )
            values = tuple(
                value for row in chunk for value in (row[0], row[1], row[2], when(row[3]), *row[4:])
            )
            inserted += connection.exec_driver_sql(statement, values).rowcount
        for name in sorted({name for name, _ in live}):
            self._join_pending(name)
        return LogCounts(new=inserted, discarded=len(rows) - len(kept))

    def delete_traffic(self, name: str) -> None:
        """Delete the logged predictions and pending outcomes of ``name`` (with the
        calibrator, whose row lock the caller holds: a calibrator fitted again under the name
        starts without them)."""
        for table in (Prediction, PendingOutcome):
            self._session.execute(
                delete(table).where(table.name == name).execution_options(synchronize_session=False)
            )

    def record_outcomes(
        self,
        name: str,
        outcomes: Sequence[tuple[str, int]],
        received_at: datetime,
        *,
        overwrite: bool = False,
    ) -> OutcomeCounts:
        """Label the logged predictions of ``name`` (or keep the outcome pending until its
        prediction is logged). A label that differs from one already stored is a 409 for the
        whole request unless ``overwrite``; the same label again changes nothing. Takes the
        calibrator's row lock first, as every writer does, so that concurrent posts for one
        id end in one of their serial orders (404 when there is no such calibrator)."""
        self._lock(name)
        wanted = dict(outcomes)
        logged = self._labels(Prediction, name, list(wanted))
        pending = self._labels(PendingOutcome, name, [i for i in wanted if i not in logged])
        known = {**pending, **logged}
        conflicts = [i for i, label in wanted.items() if known.get(i, label) not in (None, label)]
        if conflicts and not overwrite:
            shown = ", ".join(repr(i) for i in conflicts[:5])
            raise Conflict(
                f"{len(conflicts)} ids already have a different label ({shown}); "
                "send ?overwrite=true to replace them"
            )
        duplicates = sum(1 for i, label in wanted.items() if known.get(i) == label)
        label_now = [
            (i, label) for i, label in wanted.items() if i in logged and logged[i] != label
        ]
        self._label_logged(name, label_now, received_at)
        waiting = [
            (i, label) for i, label in wanted.items() if i not in logged and pending.get(i) != label
        ]
        self._keep_pending(name, waiting, received_at)
        return OutcomeCounts(
            matched=sum(1 for i in wanted if i in logged and logged[i] is None),
            pending=sum(1 for i in wanted if i not in logged and i not in pending),
            duplicates=duplicates,
            overwritten=len(conflicts),
        )

    def traffic_columns(
        self,
        name: str,
        since: datetime,
        until: datetime,
        version: int | None = None,
        *,
        labelled: bool = False,
    ) -> FloatArray:
        """The logged predictions of ``name`` in [since, until) (of one ``version``, or only
        the ``labelled`` ones), in time order, as one float64 array of :data:`TRAFFIC_COLUMNS`
        (seconds since the epoch, version, raw score, probability, label): NaN score and
        probability for rows of k-class versions, label -1 while there is none.

        Read without a Python object per row: PostgreSQL sends the rows as binary ``COPY``,
        parsed by numpy as fixed-size records; SQLite's rows come :data:`FETCH_ROWS` at a time.
        """
        sqlite = not self._postgresql()
        seconds = (
            "CAST(strftime('%s', predicted_at) AS REAL) + CAST(substr(predicted_at, 20) AS REAL)"
            if sqlite
            else "extract(epoch FROM predicted_at)"
        )
        nan = "NULL" if sqlite else "'NaN'"
        columns = (
            seconds,
            "version",
            f"coalesce(score, {nan})",
            f"coalesce(probability, {nan})",
            "coalesce(label, -1)",
        )
        where, params = self._traffic_filter(
            name, since, until, version, *(["label IS NOT NULL"] if labelled else [])
        )
        statement = (
            f"SELECT {self._numbers(columns)} FROM predictions WHERE {where} ORDER BY predicted_at"
        )
        return self._float_rows(statement, params, len(TRAFFIC_COLUMNS))

    def labelled_traffic(
        self, name: str, since: datetime | None, until: datetime, version: int | None = None
    ) -> LabelledTraffic:
        """The labelled predictions of ``name`` in [since, until) (of one ``version``) as a
        batch to fit on, with the counts of the whole range by version.

        Binary rows come pooled: one (score, label, count) per distinct pair, from a
        ``GROUP BY`` in the database, expanded back to rows by numpy (in score order), so
        that tied scores cross the wire once and no row becomes a Python object. k-class
        rows (their float64 rows of scores) come :data:`FETCH_ROWS` at a time, in time order.
        """
        where, params = self._traffic_filter(name, since, until, version)
        counted = self._session.connection().exec_driver_sql(
            f"SELECT version, count(*), count(label) FROM predictions WHERE {where} "
            "GROUP BY version ORDER BY version",
            params,
        )
        counts = {int(v): (int(n), int(labelled)) for v, n, labelled in counted}
        pairs = self._float_rows(
            f"SELECT {self._numbers(('score', 'label', 'count(*)'))} FROM predictions "
            f"WHERE {where} AND label IS NOT NULL AND score IS NOT NULL "
            "GROUP BY score, label ORDER BY score, label",
            params,
            3,
        )
        repeats = pairs[:, 2].astype(np.int64)
        scores = np.repeat(pairs[:, 0], repeats)
        labels = np.repeat(pairs[:, 1], repeats)
        rows = self._session.connection().exec_driver_sql(
            f"SELECT scores_row, label FROM predictions WHERE {where} "
            "AND label IS NOT NULL AND scores_row IS NOT NULL ORDER BY predicted_at",
            params,
        )
        matrix, row_labels = _score_rows(rows)
        return LabelledTraffic(scores, labels, matrix, row_labels, counts)

    def _traffic_filter(
        self,
        name: str,
        since: datetime | None,
        until: datetime,
        version: int | None,
        *more: str,
    ) -> tuple[str, tuple[Any, ...]]:
        """The WHERE clause (and its parameters) of ``name``'s predictions in [since, until),
        of one ``version``, with ``more`` conditions."""
        sqlite = not self._postgresql()
        mark = "?" if sqlite else "%s"
        when = _sqlite_time if sqlite else _aware_time
        where = [f"name = {mark}", f"predicted_at < {mark}", *more]
        params: list[Any] = [name, when(until)]
        if since is not None:
            where.append(f"predicted_at >= {mark}")
            params.append(when(since))
        if version is not None:
            where.append(f"version = {mark}")
            params.append(version)
        return " AND ".join(where), tuple(params)

    def _numbers(self, columns: Sequence[str]) -> str:
        """``columns`` for a SELECT whose rows :meth:`_float_rows` reads: each a float8 on
        PostgreSQL, as its binary ``COPY`` parser expects."""
        if self._postgresql():
            return ", ".join(f"({column})::float8" for column in columns)
        return ", ".join(columns)

    def _float_rows(self, statement: str, params: tuple[Any, ...], width: int) -> FloatArray:
        """The rows of ``statement`` (``width`` columns, each a number, none NULL but on
        SQLite, where NULL reads as NaN) as an (n, width) float64 array."""
        connection = self._session.connection()
        if connection.dialect.name == "postgresql":
            raw = connection.connection.driver_connection
            with raw.cursor() as cursor:  # type: ignore[union-attr]
                copy = f"COPY ({statement}) TO STDOUT (FORMAT binary)"
                with cursor.copy(copy, params) as stream:
                    data = b"".join(bytes(block) for block in stream)
            return _binary_copy(data, width)
        result = connection.exec_driver_sql(statement, params)
        blocks = [np.empty((0, width))]
        while chunk := result.fetchmany(FETCH_ROWS):
            blocks.append(np.array(chunk, dtype=np.float64))
        return np.concatenate(blocks)

    def expire_traffic(self, before: datetime, limit: int) -> int:
        """Delete at most ``limit`` logged predictions made before ``before``, and the pending
        outcomes received before it (their predictions never came); how many predictions
        went. Bounded, so that one call never holds the table long."""
        oldest = (
            select(Prediction.id)
            .where(Prediction.predicted_at < before)
            .order_by(Prediction.predicted_at)
            .limit(limit)
        )
        gone = self._session.execute(
            delete(Prediction)
            .where(Prediction.id.in_(oldest.scalar_subquery()))
            .execution_options(synchronize_session=False)
        ).rowcount  # type: ignore[attr-defined]
        self._session.execute(
            delete(PendingOutcome)
            .where(PendingOutcome.received_at < before)
            .execution_options(synchronize_session=False)
        )
        return int(gone)

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

    def _postgresql(self) -> bool:
        return self._session.get_bind().dialect.name == "postgresql"

    def _labels(self, table: Any, name: str, ids: Sequence[str]) -> dict[str, int | None]:
        """The stored label of each of ``ids`` found in ``table`` (None: logged, unlabelled).

        On PostgreSQL the ids go as one array a :data:`ARRAY_IDS` chunk, joined with
        ``unnest``: a thousand-value ``IN`` list a query was planned as a scan of the whole
        table once it held 10^6 rows (117 s for 10^6 outcomes, against ... s now).
        """
        found: dict[str, int | None] = {}
        if self._postgresql():
            connection = self._session.connection()
            statement = (
                f"SELECT t.client_id, t.label FROM unnest(%s::text[]) AS u(client_id) "
                f"JOIN {table.__tablename__} AS t ON t.name = %s AND t.client_id = u.client_id"
            )
            for chunk in _chunks(ids, ARRAY_IDS):
                rows = connection.exec_driver_sql(statement, (list(chunk), name))
                found.update((client_id, label) for client_id, label in rows)
            return found
        for chunk in _chunks(ids, LOOKUP_IDS):
            query = select(table.client_id, table.label).where(
                table.name == name, table.client_id.in_(chunk)
            )
            found.update((client_id, label) for client_id, label in self._session.execute(query))
        return found

    def _label_logged(
        self, name: str, outcomes: Sequence[tuple[str, int]], received_at: datetime
    ) -> None:
        """Set the label of these logged predictions of ``name``."""
        if not outcomes:
            return
        if self._postgresql():
            statement = (
                "UPDATE predictions AS p SET label = u.label, labelled_at = %s "
                "FROM unnest(%s::text[], %s::integer[]) AS u(client_id, label) "
                "WHERE p.name = %s AND p.client_id = u.client_id"
            )
            connection = self._session.connection()
            for chunk in _chunks(outcomes, ARRAY_IDS):
                ids, labels = zip(*chunk, strict=True)
                connection.exec_driver_sql(statement, (received_at, list(ids), list(labels), name))
            return
        table = cast(Table, Prediction.__table__)  # Core: one executemany, not ORM rows
        self._session.execute(
            update(table)
            .where(table.c.name == bindparam("n"), table.c.client_id == bindparam("c"))
            .values(label=bindparam("l"), labelled_at=bindparam("t")),
            [{"n": name, "c": i, "l": label, "t": received_at} for i, label in outcomes],
        )

    def _keep_pending(
        self, name: str, outcomes: Sequence[tuple[str, int]], received_at: datetime
    ) -> None:
        """Keep these outcomes of ``name`` until their predictions are logged (a later
        outcome of the same id replaces the earlier)."""
        if self._postgresql():
            statement = (
                "INSERT INTO pending_outcomes (name, client_id, label, received_at) "
                "SELECT %s, u.client_id, u.label, %s "
                "FROM unnest(%s::text[], %s::integer[]) AS u(client_id, label) "
                "ON CONFLICT (name, client_id) DO UPDATE "
                "SET label = excluded.label, received_at = excluded.received_at"
            )
            connection = self._session.connection()
            for chunk in _chunks(outcomes, ARRAY_IDS):
                ids, labels = zip(*chunk, strict=True)
                connection.exec_driver_sql(statement, (name, received_at, list(ids), list(labels)))
            return
        for chunk in _chunks(outcomes, INSERT_ROWS):
            values = [
                {"name": name, "client_id": i, "label": label, "received_at": received_at}
                for i, label in chunk
            ]
            upsert = sqlite_insert(PendingOutcome).values(values)
            excluded = upsert.excluded
            self._session.execute(
                upsert.on_conflict_do_update(
                    index_elements=["name", "client_id"],
                    set_={"label": excluded.label, "received_at": excluded.received_at},
                )
            )

    def _join_pending(self, name: str) -> None:
        """Give the predictions of ``name`` just logged the outcomes that waited for them."""
        waiting = and_(
            PendingOutcome.name == Prediction.name,
            PendingOutcome.client_id == Prediction.client_id,
        )
        if self._session.scalar(select(exists().where(PendingOutcome.name == name))) is not True:
            return
        label = select(PendingOutcome.label).where(waiting).scalar_subquery()
        received = select(PendingOutcome.received_at).where(waiting).scalar_subquery()
        self._session.execute(
            update(Prediction)
            .where(Prediction.name == name, Prediction.label.is_(None), exists().where(waiting))
            .values(label=label, labelled_at=received)
            .execution_options(synchronize_session=False)
        )
        logged = exists().where(
            Prediction.name == PendingOutcome.name,
            Prediction.client_id == PendingOutcome.client_id,
        )
        self._session.execute(
            delete(PendingOutcome)
            .where(PendingOutcome.name == name, logged)
            .execution_options(synchronize_session=False)
        )


def _score_rows(rows: Any) -> tuple[FloatArray, FloatArray]:
    """The (n, k) float64 scores and n labels of ``(scores_row, label)`` rows, read
    :data:`FETCH_ROWS` at a time (a k-class calibrator's versions may differ in k: 422)."""
    blocks: list[bytes] = []
    labels: list[float] = []
    widths: set[int] = set()
    while chunk := rows.fetchmany(FETCH_ROWS):
        widths.update(len(row[0]) for row in chunk)
        blocks.append(b"".join(bytes(row[0]) for row in chunk))
        labels.extend(float(row[1]) for row in chunk)
    if len(widths) > 1:
        classes = ", ".join(str(w // 8) for w in sorted(widths))
        raise invalid(
            ("body", "from_traffic", "version"),
            f"the traffic holds rows of {classes} classes; choose one version",
        )
    k = widths.pop() // 8 if widths else 0
    matrix = np.frombuffer(b"".join(blocks), dtype="<f8").reshape(-1, max(k, 1))
    return matrix.astype(np.float64), np.array(labels, dtype=np.float64)


def _binary_copy(data: bytes, width: int) -> FloatArray:
    """The rows of a PostgreSQL binary ``COPY`` whose ``width`` fields are all float8 or
    int8 (never NULL), as float64: after the 19-byte header each row is an int16 field count,
    then per field an int32 length (8) and 8 big-endian bytes; an int16 -1 ends the data."""
    header = 19 + int.from_bytes(data[15:19], "big")  # flags, then the extension's length
    fields = [("count", ">i2")]
    for k in range(width):
        fields += [(f"size{k}", ">i4"), (f"value{k}", ">f8")]
    rows = (len(data) - header - 2) // (2 + 12 * width)
    records = np.frombuffer(data, dtype=np.dtype(fields), offset=header, count=rows)
    return np.column_stack([records[f"value{k}"] for k in range(width)]).astype(np.float64)


_COLUMNS = LoggedPrediction._fields
"""The columns a logged prediction fills, in its fields' order."""


def _sqlite_time(moment: datetime) -> str:
    """As SQLAlchemy's DateTime stores a UTC instant on SQLite (naive, microseconds)."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def _aware_time(moment: datetime) -> datetime:
    return moment


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
