"""Aliases: movable names for versions (``production``, ``candidate``), per calibrator.

An alias is a selector wherever a version number is. Moving one is a single upsert, so a
reader sees either the old or the new target, never none; two clients moving the same alias
at once leave it at one of their versions.
"""

from __future__ import annotations

from sqlalchemy import delete, select

from app.errors import NotFound
from app.store.models import Alias, Version
from app.store.queries import upsert, utc_now
from app.store.session import RepositoryBase


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
