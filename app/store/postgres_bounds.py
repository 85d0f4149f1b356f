"""The client-side bounds of every wait for a PostgreSQL server (:mod:`app.store.engines`
explains them): psycopg's connection with a bounded wait, and the engine events that set the
bound. Imported only for a PostgreSQL URL, so that a server on SQLite never loads psycopg."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.abc import RV, PQGen
from psycopg.errors import _WaitTimeout
from psycopg.rows import TupleRow
from sqlalchemy import Engine, event
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from app.settings import Settings
from app.store.engines import CLIENT_GRACE_SECONDS

_WAIT_INTERVAL_SECONDS = 0.1
"""psycopg's polling interval while it waits for the server (its own default)."""


class BoundedConnection(psycopg.Connection[TupleRow]):
    """A psycopg connection that stops waiting for a server that does not answer.

    :attr:`wait_timeout` bounds every wait of the connection for its server (sending a
    statement and reading its result, commit, rollback). When it expires the connection is
    closed, since the server may still be in the middle of the statement, and a
    :class:`psycopg.OperationalError` is raised, which SQLAlchemy treats as a disconnect.
    """

    wait_timeout: float | None = None

    def wait(
        self,
        gen: PQGen[RV],
        interval: float = _WAIT_INTERVAL_SECONDS,
        timeout: float | None = None,
    ) -> RV:
        bound = self.wait_timeout if timeout is None else None
        try:
            return super().wait(gen, interval, timeout if bound is None else bound)
        except _WaitTimeout:
            if bound is None:
                raise  # the caller's own timeout (e.g. notifies): theirs to handle
            self.pgconn.finish()
            raise psycopg.OperationalError(
                f"the database did not answer within {bound:g} s; connection closed"
            ) from None


def set_postgres_bounds(engine: Engine, settings: Settings) -> None:
    """Bound every wait of the engine's connections (see the module docstring)."""
    statement_seconds = settings.db_statement_timeout_seconds + CLIENT_GRACE_SECONDS
    ping_seconds = max(2.0, settings.db_connect_timeout_seconds)

    def connect(
        _dialect: Dialect,
        _record: ConnectionPoolEntry,
        cargs: tuple[Any, ...],
        cparams: dict[str, Any],
    ) -> BoundedConnection:
        connection = BoundedConnection.connect(*cargs, **cparams)
        connection.wait_timeout = statement_seconds
        return connection

    def checkin(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # The next use of an idle pooled connection is the pre-ping: bound it like a connect.
        if isinstance(dbapi_connection, BoundedConnection):
            dbapi_connection.wait_timeout = ping_seconds

    def checkout(
        dbapi_connection: Any, _record: ConnectionPoolEntry, _proxy: PoolProxiedConnection
    ) -> None:
        if isinstance(dbapi_connection, BoundedConnection):
            dbapi_connection.wait_timeout = statement_seconds

    event.listen(engine, "do_connect", connect)
    event.listen(engine, "checkin", checkin)
    event.listen(engine, "checkout", checkout)
