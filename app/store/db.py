"""The database: one engine per process, one session per unit of work.

:meth:`Database.transaction` is the only way the service talks to the database: it yields a
:class:`~app.store.repository.Repository` on a fresh session, commits when the block ends
normally and rolls back when it raises, so a fit is stored completely or not at all. Lost
connections, refused connections and timeouts become :class:`~app.errors.DatabaseUnavailable`
(503 with ``Retry-After``). How the engines bound every wait: :mod:`app.store.engines`.
With ``CALIBRATION_BLOB_URL`` the versions' blobs go to object storage
(:mod:`app.store.objects`), uploaded by :meth:`Database.offloaded` before the unit of work.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm import Session, sessionmaker

from app.errors import DatabaseUnavailable, ObjectStoreUnavailable
from app.settings import Settings
from app.store.engines import SQLITE_BEGIN, make_engine
from app.store.objects import ObjectStore
from app.store.records import NewVersion
from app.store.repository import Repository

logger = logging.getLogger(__name__)

_UNAVAILABLE_ERRORS = (OperationalError, InterfaceError, PoolTimeoutError)
"""Connection trouble, lock or statement timeouts, an exhausted pool: the database is not
answering, which a client should retry (503), unlike a bug in a statement (500)."""


class Database:
    """The engine and session factory of one database; create one per process."""

    def __init__(self, url: str, settings: Settings, *, pooled: bool = True) -> None:
        """``pooled=False`` opens a connection per unit of work and keeps none (a worker
        process, which must hold no connection while idle)."""
        self.engine = make_engine(url, settings, pooled=pooled)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.objects = (
            None
            if settings.blob_url is None
            else ObjectStore(settings.blob_url, settings.blob_endpoint_url)
        )
        self._failing_since: float | None = None
        if self.engine.dialect.name == "postgresql":
            self._read_options: dict[str, Any] = {
                "isolation_level": "REPEATABLE READ",
                "postgresql_readonly": True,
            }
            self._write_options: dict[str, Any] = {}
        else:
            self._read_options = {SQLITE_BEGIN: "DEFERRED"}
            self._write_options = {SQLITE_BEGIN: "IMMEDIATE"}

    @property
    def unavailable(self) -> bool:
        """Whether the last unit of work or ping found the database unavailable (and none
        has succeeded since): callers may then prefer what they have cached to a wait."""
        return self._failing_since is not None

    def _succeeded(self) -> None:
        if self._failing_since is not None:
            logger.info(
                "database available again after %.1f s", time.monotonic() - self._failing_since
            )
            self._failing_since = None

    def _failed(self) -> None:
        if self._failing_since is None:
            self._failing_since = time.monotonic()

    @contextmanager
    def transaction(self, *, write: bool = False) -> Iterator[Repository]:
        """One unit of work: commit on success, roll back on any error.

        A reader (the default) sees one snapshot of the database from its first statement to
        its last: ``REPEATABLE READ, READ ONLY`` on PostgreSQL, a deferred transaction on
        SQLite. A writer (``write=True``) runs at PostgreSQL's ``READ COMMITTED`` and takes
        its calibrator's row lock before it reads anything (see
        :meth:`~app.store.repository.Repository.create_version` and the ``_lock`` of every
        other write); on SQLite it takes the database's writer lock when it begins. Either
        way, writers to one calibrator run one after the other, and the outcome of a race
        is one of the serial orders.

        Raises
        ------
        DatabaseUnavailable
            When the database cannot be reached, drops the connection or times out.
        """
        options = self._write_options if write else self._read_options
        with self._sessions() as session:
            try:
                session.connection(execution_options=options)
                yield Repository(session, self.objects)
                session.commit()
            except _UNAVAILABLE_ERRORS as exc:
                _rollback_quietly(session)
                self._failed()
                logger.warning("database unavailable: %s", exc)
                raise DatabaseUnavailable("the database is unavailable; retry later") from exc
            except BaseException:
                _rollback_quietly(session)
                raise
            self._succeeded()

    def offloaded(self, new: NewVersion) -> NewVersion:
        """``new`` with its artifact and batch uploaded to object storage and their keys in
        :attr:`NewVersion.blob_keys`, before the unit of work that stores its row (an upload
        in it would hold SQLite's one writer lock, or the calibrator's row lock, for as long);
        ``new`` itself without object storage."""
        if self.objects is None:
            return new
        return replace(new, blob_keys=(self.objects.put(new.artifact), self.objects.put(new.batch)))

    def kept(self, new: NewVersion) -> None:
        """After the unit of work that stored ``new``: upload again what a collection
        (:mod:`app.store.collect`) deleted between its upload and its commit, had it listed
        an older copy of the same content before. Never raises: the version is stored, and
        its answer must say so; a bucket that fails here is logged."""
        if self.objects is None or new.blob_keys is None:
            return
        try:
            for key, data in zip(new.blob_keys, (new.artifact, new.batch), strict=True):
                if not self.objects.has(key):
                    logger.warning("object %s was collected while its version was stored", key)
                    self.objects.put(data)
        except ObjectStoreUnavailable as exc:  # stored all the same: say so, never fail it
            logger.error("a new version's objects could not be checked after its commit: %s", exc)

    def ping(self) -> bool:
        """Whether the database answers ``SELECT 1`` (the readiness check)."""
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except SQLAlchemyError as exc:
            self._failed()
            logger.warning("database ping failed: %s", exc)
            return False
        self._succeeded()
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
