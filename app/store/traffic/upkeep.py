"""The prediction log's upkeep: the coming days' partitions, and the traffic past retention.

Run by the log's periodic task (:meth:`app.service.traffic.log.TrafficLog.expire`): first
:meth:`TrafficUpkeep.maintain_traffic` (PostgreSQL: make the coming days' partitions, drop
the expired days whole, :mod:`app.store.traffic.partitions`), then
:meth:`TrafficUpkeep.expire_traffic` in bounded batches, a transaction each, until a batch finds
less than its bound.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from app.store.sql import placeholder, postgresql, sqlite_time
from app.store.traffic.partitions import AHEAD_DAYS, DEFAULT, drop_partitions, ensure_partitions
from app.store.traffic.rollups import RollupOperations


class TrafficUpkeep(RollupOperations):
    """Partitions made ahead and dropped; expired keys, rows and pending outcomes deleted."""

    def maintain_traffic(self, now: datetime, before: datetime) -> None:
        """PostgreSQL: give the days from yesterday to
        :data:`~app.store.traffic.partitions.AHEAD_DAYS` past ``now`` their partitions, and drop the
        partitions of the days before ``before``'s (nothing to do on SQLite)."""
        if not postgresql(self._session):
            return
        connection = self._session.connection()
        today = now.astimezone(UTC).date()
        ensure_partitions(connection, today - timedelta(days=1), today + timedelta(AHEAD_DAYS))
        drop_partitions(connection, before.astimezone(UTC).date())

    def expire_traffic(self, before: datetime, limit: int) -> int:
        """Delete at most ``limit`` of each: the keys and logged predictions made before
        ``before``, and the outcomes that waited since before it for a prediction that never
        came; the most any of them lost (below ``limit``: nothing is left).

        On PostgreSQL a day goes whole, its partition dropped by :meth:`maintain_traffic`:
        the keys and the default partition's rows go up to the start of ``before``'s day, so
        that no key outlives its prediction, and a prediction outlives the retention by less
        than a day.
        """
        connection = self._session.connection()
        if postgresql(self._session):
            day = before.astimezone(UTC).date()
            cutoff: Any = datetime(day.year, day.month, day.day, tzinfo=UTC)
            received: Any = before
            row, rows = "ctid", (DEFAULT, "prediction_keys")
        else:
            cutoff = received = sqlite_time(before)
            row, rows = "rowid", ("predictions", "prediction_keys")
        mark = placeholder(self._session)
        gone = [
            connection.exec_driver_sql(
                f"DELETE FROM {table} WHERE {row} IN (SELECT {row} FROM {table} "
                f"WHERE {column} < {mark} LIMIT {mark})",
                (moment, limit),
            ).rowcount
            for table, column, moment in (
                (rows[0], "predicted_at", cutoff),
                (rows[1], "predicted_at", cutoff),
                ("pending_outcomes", "received_at", received),
            )
        ]
        self.expire_rollups(before)
        return int(max(gone))
