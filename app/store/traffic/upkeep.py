"""The prediction log's upkeep: the coming days' partitions, and the traffic (rows, keys,
pending outcomes, stored hours) past retention.

Run by the log's periodic task (:meth:`app.service.traffic.log.TrafficLog.expire`): first
:meth:`TrafficUpkeep.maintain_traffic` (the stored hours past the retention; on PostgreSQL
also the coming days' partitions made and the expired days dropped whole,
:mod:`app.store.traffic.partitions`), then
:meth:`TrafficUpkeep.expire_traffic` in bounded batches, a transaction each, until a batch finds
less than its bound.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from app.store.sql import placeholder, postgresql, sqlite_time
from app.store.traffic.days import RollupDays
from app.store.traffic.partitions import AHEAD_DAYS, DEFAULT, drop_partitions, ensure_partitions
from app.store.traffic.periods import day_of, hour_of


class TrafficUpkeep(RollupDays):
    """Partitions made ahead and dropped; expired keys, rows and pending outcomes deleted."""

    def maintain_traffic(self, now: datetime, before: datetime) -> None:
        """Delete the stored hours whose rows are gone past the retention, and on PostgreSQL
        give the days from yesterday to :data:`~app.store.traffic.partitions.AHEAD_DAYS` past
        ``now`` their partitions and drop the partitions of the days before ``before``'s."""
        if not postgresql(self._session):
            self.expire_rollups(hour_of(before))  # as expire_traffic's rows
            return
        self.expire_rollups(day_of(before))  # as the rows
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
        than a day. On SQLite the keys and rows go up to the start of ``before``'s hour. So
        the rows go as their stored hours do (:meth:`maintain_traffic`): monitoring and the
        rows agree at the retention's edge.
        """
        connection = self._session.connection()
        if postgresql(self._session):
            cutoff: Any = day_of(before)
            received: Any = before
            row, rows = "ctid", (DEFAULT, "prediction_keys")
        else:  # by whole hours, as the stored hours go
            cutoff, received = sqlite_time(hour_of(before)), sqlite_time(before)
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
        return int(max(gone))
