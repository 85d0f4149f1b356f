"""The database: one engine per process, one session per unit of work.

:meth:`Database.transaction` is the only way the service talks to the database: it yields a
:class:`~app.store.repository.Repository` on a fresh session, commits when the block ends
normally and rolls back when it raises, so a fit is stored completely or not at all. Lost
connections, refused connections and timeouts become :class:`~app.errors.DatabaseUnavailable`
(503 with ``Retry-After``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from app.errors import DatabaseUnavailable
from app.settings import Settings
from app.store.models import dump_json
from app.store.repository import Repository

logger = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long an SQLite writer waits for another writer's lock before giving up."""

_UNAVAILABLE_ERRORS = (OperationalError, InterfaceError, PoolTimeoutError)
"""Connection trouble, lock or statement timeouts, an exhausted pool: the database is not
answering, which a client should retry (503), unlike a bug in a statement (500)."""


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


def _set_sqlite_pragmas(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    """WAL (readers never block the writer), a busy timeout, and enforced foreign keys."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def make_engine(url: str, settings: Settings) -> Engine:
    """Build the engine for ``url`` with the backend-specific settings of the service."""
    url = normalize_url(url)
    backend = make_url(url).get_backend_name()
    options: dict[str, Any] = {
        "json_serializer": dump_json,
        "json_deserializer": orjson.loads,
        "pool_size": settings.db_pool_size,
    }
    if backend == "postgresql":
        statement_ms = round(settings.db_statement_timeout_seconds * 1000)
        options["pool_pre_ping"] = True
        options["connect_args"] = {
            # libpq takes whole seconds, and treats anything below 2 as 2.
            "connect_timeout": max(2, math.ceil(settings.db_connect_timeout_seconds)),
            "options": f"-c statement_timeout={statement_ms}",
        }
    engine = create_engine(url, **options)
    if backend == "sqlite":
        event.listen(engine, "connect", _set_sqlite_pragmas)
    return engine


class Database:
    """The engine and session factory of one database; create one per process."""

    def __init__(self, url: str, settings: Settings) -> None:
        self.engine = make_engine(url, settings)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def transaction(self) -> Iterator[Repository]:
        """One unit of work: commit on success, roll back on any error.

        Raises
        ------
        DatabaseUnavailable
            When the database cannot be reached, drops the connection or times out.
        """
        with self._sessions() as session:
            try:
                yield Repository(session)
                session.commit()
            except _UNAVAILABLE_ERRORS as exc:
                _rollback_quietly(session)
                logger.warning("database unavailable: %s", exc)
                raise DatabaseUnavailable("the database is unavailable; retry later") from exc
            except BaseException:
                _rollback_quietly(session)
                raise

    def ping(self) -> bool:
        """Whether the database answers ``SELECT 1`` (the readiness check)."""
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except SQLAlchemyError as exc:
            logger.warning("database ping failed: %s", exc)
            return False
        return True

    def dispose(self) -> None:
        """Close every pooled connection (at shutdown, or after a fork)."""
        self.engine.dispose()


def _rollback_quietly(session: Session) -> None:
    """Roll back, without letting a dead connection hide the error that got us here."""
    try:
        session.rollback()
    except SQLAlchemyError as exc:
        logger.warning("rollback failed: %s", exc)
