"""Aliases: movable names for versions (``production``, ``candidate``), per calibrator.

An alias is a selector wherever a version number is. Moving one is a single upsert, so a
reader sees either the old or the new target, never none; two clients moving the same alias
at once leave it at one of their versions. Every change is recorded in ``alias_moves`` in the
same transaction (:class:`AliasMoved`), so the record and the aliases never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, insert, select

from app.errors import NotFound
from app.store.models import Alias, AliasMove, Version
from app.store.queries import upsert, utc_now
from app.store.session import RepositoryBase


@dataclass(frozen=True)
class AliasMoved:
    """A recorded move of ``alias``: from ``before`` (None: it was set) to ``after`` (None:
    removed, by itself or with its version) at ``at``."""

    alias: str
    before: int | None
    after: int | None
    at: datetime


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
        before = self._alias_target(calibrator_id, alias)
        now = utc_now()
        if before != version:
            self._record_move(calibrator_id, alias, before, version)
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
        before = self._alias_target(calibrator_id, alias)
        if before is None:
            raise NotFound(f"alias '{alias}' of '{name}' not found")
        self._session.execute(
            delete(Alias)
            .where(Alias.calibrator_id == calibrator_id, Alias.name == alias)
            .execution_options(synchronize_session=False)
        )
        self._record_move(calibrator_id, alias, before, None)

    def alias_moves(self, name: str, limit: int) -> list[AliasMoved]:
        """The last ``limit`` moves of ``name``'s aliases, newest first."""
        calibrator_id = self._calibrator_id(name)
        rows = self._session.execute(
            select(
                AliasMove.alias, AliasMove.from_version, AliasMove.to_version, AliasMove.moved_at
            )
            .where(AliasMove.calibrator_id == calibrator_id)
            .order_by(AliasMove.id.desc())
            .limit(limit)
        )
        return [AliasMoved(*row) for row in rows]

    def _record_move(
        self, calibrator_id: int, alias: str, before: int | None, after: int | None
    ) -> None:
        """Record a move of ``alias`` (the caller holds the calibrator's lock)."""
        self._session.execute(
            insert(AliasMove).values(
                calibrator_id=calibrator_id,
                alias=alias,
                from_version=before,
                to_version=after,
                moved_at=utc_now(),
            )
        )

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

    def _alias_target(self, calibrator_id: int, alias: str) -> int | None:
        """The version ``alias`` points to, None when it does not exist."""
        return self._session.scalar(
            select(Version.version)
            .join(Alias, Alias.version_id == Version.id)
            .where(Alias.calibrator_id == calibrator_id, Alias.name == alias)
        )

    def _aliases_pointing_at(self, calibrator_id: int, version: int) -> list[str]:
        rows = self._session.scalars(
            select(Alias.name)
            .join(Version, Version.id == Alias.version_id)
            .where(Alias.calibrator_id == calibrator_id, Version.version == version)
            .order_by(Alias.name)
        )
        return list(rows)
