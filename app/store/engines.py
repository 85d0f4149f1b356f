"""Engines for SQLite and PostgreSQL, configured for the service.

On SQLite: WAL (readers never block the writer), a busy timeout, enforced foreign keys, and
transactions the service opens itself (:func:`_begin_sqlite`): ``BEGIN IMMEDIATE`` for a
writer, so that it holds the only writer lock before it reads anything.

On PostgreSQL every wait for the server is bounded on the client, so a hung server (frozen,
or behind a partition that drops packets) gives a 503 in bounded time rather than a request
that never ends. ``statement_timeout`` is enforced by the server, so it cannot help when the
server does not run; TCP keepalives and ``tcp_user_timeout`` cannot either, because the frozen
server's kernel still acknowledges every packet. The bounds, with C the connect timeout and S
the statement timeout:

- connecting (a new pooled connection): C, enforced by psycopg (at least 2 s, as libpq does);
- the pool pre-ping of an idle connection: C; when it fails the pool is invalidated and one
  new connection is tried, so a checkout gives up after at most 2 C;
- waiting for a free pooled connection: ``db_pool_timeout_seconds``;
- each statement, commit or rollback: S + :data:`CLIENT_GRACE_SECONDS` (the server cancels at
  S; the client gives up a little later, when the server did not even do that).

A connection that timed out on the client is closed (its protocol state is unknown), which
SQLAlchemy takes for a disconnect: it is discarded, and the pool with it. Those bounds are
:mod:`app.store.postgres_bounds`'s.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.pool import ConnectionPoolEntry, NullPool

from app.settings import Settings
from app.store.models import dump_json

SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long an SQLite writer waits for another writer's lock before giving up."""


def normalize_url(url: str) -> str:
    """Return ``url`` as SQLAlchemy should see it, preparing the ground for SQLite files.

    ``postgres://`` and ``postgresql://`` (as Heroku-style environments spell them) select the
    psycopg 3 driver; for an SQLite file the parent directory is created.
    """
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            url = "postgresql+psycopg://" + url.removeprefix(prefix)
    parsed = make_url(url)
    database = parsed.database or ":memory:"
    if parsed.get_backend_name() == "sqlite" and not database.startswith((":memory:", "file:")):
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    return url


CLIENT_GRACE_SECONDS = 1.0
"""How long after the server's statement timeout the client stops waiting for an answer."""


def _set_sqlite_pragmas(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    """WAL (readers never block the writer), a busy timeout, and enforced foreign keys.

    The driver's own transaction handling is switched off (it would BEGIN only before the
    first INSERT/UPDATE/DELETE, leaving earlier reads outside the transaction):
    :func:`_begin_sqlite` opens every transaction itself.
    """
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


SQLITE_BEGIN = "calibration_sqlite_begin"
"""The execution option naming how :func:`_begin_sqlite` begins: ``DEFERRED`` or ``IMMEDIATE``."""


def _begin_sqlite(connection: Connection) -> None:
    """Open the transaction: ``BEGIN IMMEDIATE`` for a writer, which takes SQLite's single
    writer lock at once (waiting up to the busy timeout), so that everything it reads after
    is what it writes over; ``BEGIN`` (a snapshot, no lock) for a reader."""
    mode = connection.get_execution_options().get(SQLITE_BEGIN, "DEFERRED")
    connection.exec_driver_sql(f"BEGIN {mode}")


def make_engine(url: str, settings: Settings, *, pooled: bool = True) -> Engine:
    """Build the engine for ``url`` with the backend-specific settings of the service (no
    pool of connections unless ``pooled``)."""
    url = normalize_url(url)
    backend = make_url(url).get_backend_name()
    options: dict[str, Any] = {
        "json_serializer": dump_json,
        "json_deserializer": orjson.loads,
    }
    if not pooled:
        options["poolclass"] = NullPool
    else:
        options["pool_size"] = settings.db_pool_size
    if backend == "postgresql":
        statement_ms = round(settings.db_statement_timeout_seconds * 1000)
        if pooled:
            options["pool_pre_ping"] = True
            options["pool_timeout"] = settings.db_pool_timeout_seconds
        options["connect_args"] = {
            # libpq takes whole seconds, and treats anything below 2 as 2.
            "connect_timeout": max(2, math.ceil(settings.db_connect_timeout_seconds)),
            "options": f"-c statement_timeout={statement_ms}",
            # Idle pooled connections to a host that vanished are noticed by the kernel.
            "keepalives": 1,
            "keepalives_idle": 30,
            "keepalives_interval": 10,
            "keepalives_count": 3,
        }
    engine = create_engine(url, **options)
    if backend == "sqlite":
        event.listen(engine, "connect", _set_sqlite_pragmas)
        event.listen(engine, "begin", _begin_sqlite)
    elif backend == "postgresql":
        # psycopg only here: a server on SQLite never imports it (0.4 s of CPU a process)
        from app.store.postgres_bounds import set_postgres_bounds

        set_postgres_bounds(engine, settings)
    return engine
