"""Aliases: movable names for versions (``production``, ``candidate``), per calibrator.

An alias is a selector wherever a version number is. Moving one is a single upsert, so a
reader sees either the old or the new target, never none; two clients moving the same alias
at once leave it at one of their versions.
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.errors import NotFound
from app.store.models import Alias, Calibrator, Version
from app.store.queries import live, upsert, utc_now


class RepositoryBase:
    """The session a repository works in, and the lookup every operation starts with."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def _calibrator_id(self, name: str) -> int:
        calibrator_id = self._session.scalar(select(Calibrator.id).where(*live(name)))
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
        calibrator_id = self._session.scalar(
            select(Calibrator.id).where(*live(name)).with_for_update()
        )
        if calibrator_id is None:
            raise NotFound(f"calibrator '{name}' not found")
        return calibrator_id


class AliasOperations(RepositoryBase):
    """Set, move, delete and list aliases."""

    def set_alias(self, name: str, alias: str, version: int) -> None:
        """Point ``alias`` of ``name`` at ``version``, creating or moving it."""
        calibrator_id = self._lock(name)
        version_id = self._session.scalar(
            select(Version.id).where(
                Version.calibrator_id == calibrator_id, Version.version == version
            )
        )
        if version_id is None:
            raise NotFound(f"version {version} of '{name}' not found")
        now = utc_now()
        self._session.execute(
            upsert(self._session, Alias)
            .values(calibrator_id=calibrator_id, name=alias, version_id=version_id, updated_at=now)
            .on_conflict_do_update(
                index_elements=["calibrator_id", "name"],
                set_={"version_id": version_id, "updated_at": now},
            )
        )

    def delete_alias(self, name: str, alias: str) -> None:
        """Remove ``alias`` of ``name``."""
        calibrator_id = self._lock(name)
        deleted = self._session.execute(
            delete(Alias)
            .where(Alias.calibrator_id == calibrator_id, Alias.name == alias)
            .returning(Alias.name)
            .execution_options(synchronize_session=False)
        ).first()
        if deleted is None:
            raise NotFound(f"alias '{alias}' of '{name}' not found")

    def calibrator_aliases(self, name: str) -> dict[str, int]:
        """Every alias of ``name`` with the version it points to, by alias name."""
        calibrator_id = self._calibrator_id(name)
        rows = self._session.execute(
            select(Alias.name, Version.version)
            .join(Version, Version.id == Alias.version_id)
            .where(Alias.calibrator_id == calibrator_id)
            .order_by(Alias.name)
        )
        return {alias: int(version) for alias, version in rows}

    def _aliases_pointing_at(self, calibrator_id: int, version: int) -> list[str]:
        rows = self._session.scalars(
            select(Alias.name)
            .join(Version, Version.id == Alias.version_id)
            .where(Alias.calibrator_id == calibrator_id, Version.version == version)
            .order_by(Alias.name)
        )
        return list(rows)
