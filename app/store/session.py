"""What every part of a repository stands on: its session, and the calibrator lookup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import NotFound
from app.store.models import Calibrator
from app.store.queries import live

if TYPE_CHECKING:
    from app.store.objects import ObjectStore


class RepositoryBase:
    """The session a repository works in, the object store its blobs go to (None: the
    database), and the lookup every operation starts with."""

    def __init__(self, session: Session, objects: ObjectStore | None = None) -> None:
        self._session = session
        self._objects = objects

    def _calibrator_id(self, name: str, *, lock: bool = False) -> int:
        """The live calibrator's id (404 when there is none), its row locked with ``lock``."""
        query = select(Calibrator.id).where(*live(name))
        calibrator_id = self._session.scalar(query.with_for_update() if lock else query)
        if calibrator_id is None:
            raise NotFound(f"calibrator '{name}' not found")
        return calibrator_id

    def _lock(self, name: str) -> int:
        """The live calibrator's id, with its row locked until the transaction ends.

        Every write but a fit starts here, before it checks anything: ``SELECT .. FOR UPDATE``
        on PostgreSQL (SQLite's writer transaction already holds the only lock there is, see
        :meth:`app.store.db.Database.transaction`). A writer that waited re-reads the row as
        the other left it, so a calibrator deleted meanwhile is not found.
        """
        return self._calibrator_id(name, lock=True)
