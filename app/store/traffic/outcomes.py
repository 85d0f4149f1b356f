"""Outcomes posted by id, joined to the predictions logged under those ids.

An outcome finds its prediction through the id's key (``prediction_keys``): the key gives
the time of the first record, so the update reads only the days those times fall in (their
bounds are part of the statement, which PostgreSQL prunes the day partitions by when it
plans it). An id not logged yet waits in ``pending_outcomes`` until its prediction is
(:meth:`app.store.traffic.log.TrafficOperations.log_predictions` joins it). Every writer holds the
calibrator's row lock, so concurrent posts for one id end in one of their serial orders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select

from app.errors import Conflict, invalid
from app.store.models import Version
from app.store.sql import chunks, postgresql, sqlite_time
from app.store.traffic.days import RollupDays
from app.store.traffic.deltas import label_deltas

LOOKUP_IDS = 1000
"""Client ids per ``IN (…)`` lookup (SQLite)."""

ARRAY_IDS = 100_000
"""Client ids per array parameter (PostgreSQL)."""


Logged = tuple[Any, int | None, int, float | None, bytes | None]
"""A logged prediction as an outcome finds it: its time (as the database answers it), label,
version, and probability (binary) or probabilities row (k classes)."""


@dataclass(frozen=True)
class OutcomeCounts:
    """What ``POST …/outcomes`` did with the ids it was given."""

    matched: int
    pending: int
    duplicates: int
    overwritten: int


class OutcomeOperations(RollupDays):
    """Record outcomes of logged predictions."""

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
        calibrator_id = self._lock(name)
        self._check_classes(calibrator_id, outcomes)
        wanted = dict(outcomes)
        logged = self._logged(name, list(wanted))
        pending = self._pending(name, [i for i in wanted if i not in logged])
        known = {**pending, **{i: found[1] for i, found in logged.items()}}
        conflicts = [i for i, label in wanted.items() if known.get(i, label) not in (None, label)]
        if conflicts and not overwrite:
            shown = ", ".join(repr(i) for i in conflicts[:5])
            raise Conflict(
                f"{len(conflicts)} ids already have a different label ({shown}); "
                "send ?overwrite=true to replace them"
            )
        changed = [i for i, label in wanted.items() if i in logged and logged[i][1] != label]
        self._label_logged(name, [(i, logged[i][0], wanted[i]) for i in changed], received_at)
        changes = [
            (logged[i][2], _moment(logged[i][0]), logged[i][3], logged[i][4], logged[i][1],
             wanted[i])
            for i in changed
        ]  # fmt: skip
        self.add_rollups(label_deltas(name, changes, self.rollup_start()))
        waiting = [(i, y) for i, y in wanted.items() if i not in logged and pending.get(i) != y]
        self._keep_pending(name, waiting, received_at)
        return OutcomeCounts(
            matched=sum(1 for i in wanted if i in logged and logged[i][1] is None),
            pending=sum(1 for i in wanted if i not in logged and i not in pending),
            duplicates=sum(1 for i, label in wanted.items() if known.get(i) == label),
            overwritten=len(conflicts),
        )

    def _check_classes(self, calibrator_id: int, outcomes: Sequence[tuple[str, int]]) -> None:
        """422 for a label no version of the calibrator has: 0/1 for binary versions,
        0..k-1 for k classes (the most any version has)."""
        classes = self._session.scalar(
            select(func.max(Version.n_classes)).where(Version.calibrator_id == calibrator_id)
        )
        k = int(classes or 2)
        for index, (_, label) in enumerate(outcomes):
            if label >= k:
                raise invalid(
                    ("labels", index),
                    f"is {label}; the versions of this calibrator have the classes 0..{k - 1}",
                )

    def _logged(self, name: str, ids: Sequence[str]) -> dict[str, Logged]:
        """The logged ones of ``ids``: each one's time (as the database answers it, to be
        sent back), stored label (None: unlabelled), version, and probability (binary) or
        probabilities row (k classes), through its key.

        On PostgreSQL the ids go as one array a :data:`ARRAY_IDS` chunk, joined with
        ``unnest`` (a thousand-value ``IN`` list a query was planned as a scan of the whole
        table once it held 10^6 rows), and in two steps: the keys, then the labels of the
        predictions within the keys' first and last times, which PostgreSQL prunes the days
        by when it plans the statement.
        """
        found: dict[str, Logged] = {}
        connection = self._session.connection()
        if not postgresql(self._session):
            for chunk in chunks(ids, LOOKUP_IDS):
                rows = connection.exec_driver_sql(
                    f"SELECT k.client_id, k.predicted_at, {_LOGGED} FROM prediction_keys AS k "
                    f"{_PREDICTION_OF_KEY} WHERE k.name = ? "
                    f"AND k.client_id IN ({', '.join(['?'] * len(chunk))})",
                    (name, *chunk),
                )
                found.update((i, (at, *rest)) for i, at, *rest in rows)
            return found
        for chunk in chunks(ids, ARRAY_IDS):
            keys: dict[str, Any] = dict(
                connection.exec_driver_sql(_KEYS, (list(chunk), name)).all()
            )
            if not keys:
                continue
            rows = connection.exec_driver_sql(
                f"SELECT k.client_id, {_LOGGED} {_KEYS_FROM} {_PREDICTION_OF_KEY} "
                "WHERE p.predicted_at >= %s AND p.predicted_at <= %s",
                (list(keys), name, min(keys.values()), max(keys.values())),
            )
            found.update((i, (keys[i], *rest)) for i, *rest in rows)
        return found

    def _pending(self, name: str, ids: Sequence[str]) -> dict[str, int]:
        """The pending label of each of ``ids`` that has one."""
        found: dict[str, int] = {}
        connection = self._session.connection()
        if postgresql(self._session):
            statement = (
                "SELECT po.client_id, po.label FROM unnest(%s::text[]) AS u(client_id) "
                "JOIN pending_outcomes AS po ON po.name = %s AND po.client_id = u.client_id"
            )
            for chunk in chunks(ids, ARRAY_IDS):
                rows = connection.exec_driver_sql(statement, (list(chunk), name))
                found.update((i, label) for i, label in rows)
            return found
        for chunk in chunks(ids, LOOKUP_IDS):
            rows = connection.exec_driver_sql(
                "SELECT client_id, label FROM pending_outcomes WHERE name = ? "
                f"AND client_id IN ({', '.join(['?'] * len(chunk))})",
                (name, *chunk),
            )
            found.update((i, label) for i, label in rows)
        return found

    def _label_logged(
        self, name: str, labels: Sequence[tuple[str, Any, int]], labelled_at: datetime
    ) -> None:
        """Set (client id, logged time, label) on these predictions of ``name``.

        PostgreSQL finds each one's time through its key in the statement (sending 10^5
        times back as an array cost more than the update: psycopg builds arrays in Python),
        and reads only the days between the first and the last of them.
        """
        if not labels:
            return
        connection = self._session.connection()
        if postgresql(self._session):
            statement = (
                "UPDATE predictions SET label = u.label, labelled_at = %s "
                "FROM unnest(%s::text[], %s::integer[]) AS u(client_id, label) "
                "JOIN prediction_keys AS k ON k.name = %s AND k.client_id = u.client_id "
                "WHERE predictions.name = k.name AND predictions.client_id = k.client_id "
                "AND predictions.predicted_at = k.predicted_at "
                "AND predictions.predicted_at >= %s AND predictions.predicted_at <= %s"
            )
            for chunk in chunks(labels, ARRAY_IDS):
                ids = [i for i, _, _ in chunk]
                values = [label for _, _, label in chunk]
                first, last = min(at for _, at, _ in chunk), max(at for _, at, _ in chunk)
                connection.exec_driver_sql(statement, (labelled_at, ids, values, name, first, last))
            return
        when = sqlite_time(labelled_at)
        connection.exec_driver_sql(
            "UPDATE predictions SET label = ?, labelled_at = ? "
            "WHERE name = ? AND client_id = ? AND predicted_at = ?",
            [(label, when, name, i, at) for i, at, label in labels],
        )

    def _keep_pending(
        self, name: str, outcomes: Sequence[tuple[str, int]], received_at: datetime
    ) -> None:
        """Keep these outcomes of ``name`` until their predictions are logged (a later
        outcome of the same id replaces the earlier)."""
        if not outcomes:
            return
        upsert = (
            "ON CONFLICT (name, client_id) DO UPDATE "
            "SET label = excluded.label, received_at = excluded.received_at"
        )
        connection = self._session.connection()
        if postgresql(self._session):
            statement = (
                "INSERT INTO pending_outcomes (name, client_id, label, received_at) "
                "SELECT %s, u.client_id, u.label, %s "
                f"FROM unnest(%s::text[], %s::integer[]) AS u(client_id, label) {upsert}"
            )
            for chunk in chunks(outcomes, ARRAY_IDS):
                ids, labels = zip(*chunk, strict=True)
                connection.exec_driver_sql(statement, (name, received_at, list(ids), list(labels)))
            return
        when = sqlite_time(received_at)
        connection.exec_driver_sql(
            "INSERT INTO pending_outcomes (name, client_id, label, received_at) "
            f"VALUES (?, ?, ?, ?) {upsert}",
            [(name, i, label, when) for i, label in outcomes],
        )


_LOGGED = "p.label, p.version, p.probability, p.probabilities_row"
"""What an outcome reads of its logged prediction (:data:`Logged` but the time)."""

_KEYS_FROM = (
    "FROM unnest(%s::text[]) AS u(client_id) "
    "JOIN prediction_keys AS k ON k.name = %s AND k.client_id = u.client_id"
)
_KEYS = f"SELECT k.client_id, k.predicted_at {_KEYS_FROM}"
"""The keys of an array of ids (PostgreSQL)."""

_PREDICTION_OF_KEY = (
    "JOIN predictions AS p ON p.name = k.name AND p.client_id = k.client_id "
    "AND p.predicted_at = k.predicted_at"
)


def _moment(at: Any) -> datetime:
    """A logged time as the database answers it (SQLite: text in UTC) as an aware datetime."""
    moment = datetime.fromisoformat(at) if isinstance(at, str) else at
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
