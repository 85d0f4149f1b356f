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

from sqlalchemy import Table, and_, bindparam, delete, exists, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from app.errors import Conflict
from app.store.models import PendingOutcome, Prediction
from app.store.session import RepositoryBase

INSERT_ROWS = 1000
"""Rows per INSERT statement (8 parameters each: within SQLite's 32,766)."""

LOOKUP_IDS = 1000
"""Client ids per ``IN (…)`` lookup."""


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


@dataclass(frozen=True)
class OutcomeCounts:
    """What ``POST …/outcomes`` did with the ids it was given."""

    matched: int
    pending: int
    duplicates: int
    overwritten: int


class TrafficOperations(RepositoryBase):
    """Log predictions, record outcomes."""

    def log_predictions(self, rows: Sequence[LoggedPrediction]) -> int:
        """Insert ``rows`` (an id already logged for its calibrator keeps its first record)
        and join the outcomes that were waiting for them; how many rows were new."""
        # Plain SQL, many rows a statement: SQLAlchemy building statements of thousands of
        # rows, or the driver stepping row by row, took much of a core from the event loop
        # that shares this process.
        connection = self._session.connection()
        sqlite = connection.dialect.name == "sqlite"
        mark = "?" if sqlite else "%s"
        row_marks = f"({', '.join([mark] * len(_COLUMNS))})"
        when = _sqlite_time if sqlite else _aware_time
        inserted = 0
        for chunk in _chunks(rows, INSERT_ROWS):
            statement = (
                f"INSERT INTO predictions ({', '.join(_COLUMNS)}) "
                f"VALUES {', '.join([row_marks] * len(chunk))} "
                "ON CONFLICT (name, client_id) DO NOTHING"
            )
            values = tuple(
                value for row in chunk for value in (row[0], row[1], row[2], when(row[3]), *row[4:])
            )
            inserted += connection.exec_driver_sql(statement, values).rowcount
        for name in sorted({row.name for row in rows}):
            self._join_pending(name)
        return inserted

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
        logged = self._labels(Prediction, name, wanted)
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
            {"n": name, "c": i, "l": label, "t": received_at}
            for i, label in wanted.items()
            if i in logged and logged[i] != label
        ]
        if label_now:
            table = cast(Table, Prediction.__table__)  # Core: one executemany, not ORM rows
            self._session.execute(
                update(table)
                .where(table.c.name == bindparam("n"), table.c.client_id == bindparam("c"))
                .values(label=bindparam("l"), labelled_at=bindparam("t")),
                label_now,
            )
        waiting = [
            {"name": name, "client_id": i, "label": label, "received_at": received_at}
            for i, label in wanted.items()
            if i not in logged and pending.get(i) != label
        ]
        insert = self._insert()
        for chunk in _chunks(waiting, INSERT_ROWS):
            statement = insert(PendingOutcome).values(list(chunk))
            excluded = statement.excluded
            self._session.execute(
                statement.on_conflict_do_update(
                    index_elements=["name", "client_id"],
                    set_={"label": excluded.label, "received_at": excluded.received_at},
                )
            )
        return OutcomeCounts(
            matched=sum(1 for i in wanted if i in logged and logged[i] is None),
            pending=sum(1 for i in wanted if i not in logged and i not in pending),
            duplicates=duplicates,
            overwritten=len(conflicts),
        )

    def traffic_rows(
        self, name: str, since: datetime, until: datetime, version: int | None = None
    ) -> list[tuple[datetime, int, float | None, float | None, int | None]]:
        """The logged predictions of ``name`` in [since, until), in time order: (time,
        version, raw score, probability, label); score and probability are None for rows of
        k-class versions."""
        query = select(
            Prediction.predicted_at,
            Prediction.version,
            Prediction.score,
            Prediction.probability,
            Prediction.label,
        ).where(
            Prediction.name == name,
            Prediction.predicted_at >= since,
            Prediction.predicted_at < until,
        )
        if version is not None:
            query = query.where(Prediction.version == version)
        rows = self._session.execute(query.order_by(Prediction.predicted_at))
        return [(t, v, s, p, y) for t, v, s, p, y in rows]

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

    def _insert(self) -> Any:
        """The dialect's INSERT, which knows ``ON CONFLICT``."""
        dialect = self._session.get_bind().dialect.name
        return postgresql_insert if dialect == "postgresql" else sqlite_insert

    def _labels(self, table: Any, name: str, ids: Any) -> dict[str, int | None]:
        """The stored label of each of ``ids`` found in ``table`` (None: logged, unlabelled)."""
        found: dict[str, int | None] = {}
        for chunk in _chunks(list(ids), LOOKUP_IDS):
            query = select(table.client_id, table.label).where(
                table.name == name, table.client_id.in_(chunk)
            )
            found.update((client_id, label) for client_id, label in self._session.execute(query))
        return found

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
