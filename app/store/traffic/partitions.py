"""The daily partitions of the prediction log on PostgreSQL: made ahead, dropped on expiry.

``predictions`` is partitioned by range of ``predicted_at``, one partition per UTC day,
``predictions_pYYYYMMDD``, plus ``predictions_default`` for a row no day holds (migration
0005). The traffic log's periodic task (:meth:`app.service.traffic.log.TrafficLog.expire`, through
:mod:`app.store.traffic.upkeep`) keeps the days from yesterday to :data:`AHEAD_DAYS` ahead
partitioned, so rows land in their day's partition, and drops the days past the retention
whole: no row-by-row delete of predictions, no dead rows for vacuum, no index bloat (the
ids' keys, one table, still go row by row). When yesterday or today had rows reach the
default partition (the task was down), its partition is made with those rows moved into
it; rows of older days stay in the default partition until they expire.

Partitions are made as plain tables with the range as a CHECK, then attached: ``ATTACH
PARTITION`` takes a lighter lock on ``predictions`` than ``CREATE TABLE … PARTITION OF``, and
the CHECK spares it the scan of the new table (PostgreSQL's manual, "Partition Maintenance").
Replicas maintain at once safely: one transaction-scoped advisory lock
(:data:`ADVISORY_LOCK`) lets one of them in at a time, and each change is re-checked under it.
A drop waits at most :data:`LOCK_TIMEOUT` for queries on the table, else is tried again at
the next round.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from app.store.traffic.periods import midnight

AHEAD_DAYS = 7
"""Days past today that always have their partition."""

ADVISORY_LOCK = 0x7072_6564  # "pred"
"""The key of ``pg_advisory_xact_lock`` that one maintenance at a time holds."""

LOCK_TIMEOUT = "2s"
"""How long a drop or attach waits for the table's lock."""

DEFAULT = "predictions_default"
_DAY = re.compile(r"^predictions_p(\d{8})$")


def not_a_partition(thing: Any, name: str | None, kind: str, *_: Any) -> bool:
    """Alembic's ``include_object``: leave out the partitions (and their indexes), which
    the service makes and drops, not the migrations."""
    table = thing.table.name if kind == "index" else name
    return not (table == DEFAULT or _DAY.match(table or ""))


def partition_name(day: date) -> str:
    """The partition holding ``day`` (UTC)."""
    return f"predictions_p{day:%Y%m%d}"


def partition_days(connection: Connection) -> list[date]:
    """The days that have a partition, in order."""
    names = connection.scalars(
        text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'predictions'::regclass"
        )
    )
    days = [_DAY.match(name) for name in names]
    return sorted(datetime.strptime(m.group(1), "%Y%m%d").date() for m in days if m)


def ensure_partitions(connection: Connection, first: date, last: date) -> list[date]:
    """Give every day of [first, last] its partition; the days that got one now."""
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK})
    connection.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
    existing = set(partition_days(connection))
    made = []
    day = first
    while day <= last:
        if day not in existing:
            _attach(connection, day)
            made.append(day)
        day += timedelta(days=1)
    return made


def drop_partitions(connection: Connection, before: date) -> list[date]:
    """Drop the partitions of the days before ``before``; the days dropped. (The default
    partition's rows of those days go in batches: :mod:`app.store.traffic.upkeep`.)"""
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK})
    connection.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
    gone = [day for day in partition_days(connection) if day < before]
    for day in gone:
        connection.execute(text(f"DROP TABLE {partition_name(day)}"))
    return gone


_ANALYZED: set[tuple[str, str]] = set()
"""The partitions (database, name) this process has seen analyzed, or analyzed itself."""


def analyze_new(connection: Connection, days: set[date]) -> None:
    """Analyze the partitions of ``days`` that have never been analyzed, once per process.

    A partition made ahead has no statistics until autovacuum's next round (a minute or
    more, and only past 50 changed rows). Meanwhile the planner knows nothing of its
    columns, and the outcomes' lookups of the rows just logged (one predict's rows share
    their time) were planned as nested loops over the ``(name, predicted_at)`` index: 5,000
    outcomes of a fresh day took 19 s, against 0.1 s once analyzed. ``ANALYZE`` counts the
    rows this transaction inserted, and takes a lock that writers do not wait for."""
    database = connection.engine.url.render_as_string()
    for day in sorted(days):
        name = partition_name(day)
        if (database, name) in _ANALYZED:
            continue
        never = connection.execute(
            text(
                "SELECT last_analyze IS NULL AND last_autoanalyze IS NULL "
                "FROM pg_stat_user_tables WHERE relname = :name"
            ),
            {"name": name},
        ).scalar()
        if never:
            connection.execute(text(f"ANALYZE {name}"))
        if never is not None:  # None: no such partition (the rows went to the default)
            _ANALYZED.add((database, name))


def _attach(connection: Connection, day: date) -> None:
    """Make ``day``'s partition, with the rows of that day the default partition holds."""
    name = partition_name(day)
    start, end = midnight(day).isoformat(), midnight(day + timedelta(days=1)).isoformat()
    within = f"predicted_at >= '{start}' AND predicted_at < '{end}'"  # DDL takes no parameters
    connection.execute(text(f"CREATE TABLE {name} (LIKE predictions INCLUDING DEFAULTS)"))
    connection.execute(text(f"ALTER TABLE {name} ADD CONSTRAINT {name}_day CHECK ({within})"))
    # No row of the day may reach the default partition between the move and the attach
    # (which would then fail): writers wait the moment out.
    connection.execute(text(f"LOCK TABLE {DEFAULT} IN SHARE ROW EXCLUSIVE MODE"))
    connection.execute(
        text(
            f"WITH moved AS (DELETE FROM {DEFAULT} WHERE {within} RETURNING *) "
            f"INSERT INTO {name} SELECT * FROM moved"
        )
    )
    connection.execute(
        text(
            f"ALTER TABLE predictions ATTACH PARTITION {name} "
            f"FOR VALUES FROM ('{start}') TO ('{end}')"
        )
    )
    connection.execute(text(f"ALTER TABLE {name} DROP CONSTRAINT {name}_day"))
