"""The reads of a list of calibrators: each one's latest version and aliases, in two queries
for a whole page (not two per calibrator)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, tuple_

from app.store.models import Alias, Calibrator, Version
from app.store.queries import version_record
from app.store.records import CalibratorSummary, VersionRecord
from app.store.session import RepositoryBase


class ListingReads(RepositoryBase):
    """The latest versions and aliases of a page of calibrators."""

    def latest_with_aliases(
        self, listed: Sequence[CalibratorSummary]
    ) -> dict[str, tuple[VersionRecord | None, dict[str, int]]]:
        """For each calibrator of ``listed``: its latest version (None when it has none left)
        and every alias it has, by alias name; one query for the versions, one for the aliases."""
        names = [summary.name for summary in listed]
        if not names:
            return {}
        aliases: dict[str, dict[str, int]] = {name: {} for name in names}
        by_version: dict[int, list[str]] = {}
        pointing = self._session.execute(
            select(Calibrator.name, Alias.name, Alias.version_id, Version.version)
            .join(Version, Version.id == Alias.version_id)
            .join(Calibrator, Calibrator.id == Alias.calibrator_id)
            .where(Calibrator.name.in_(names), Calibrator.deleted_at.is_(None))
            .order_by(Alias.name)
        )
        for name, alias, version_id, version in pointing:
            aliases[name][alias] = int(version)
            by_version.setdefault(version_id, []).append(alias)
        latest = [(s.name, s.latest_version) for s in listed if s.latest_version is not None]
        rows = (
            self._session.execute(
                select(Calibrator.name, Version)
                .join(Calibrator, Calibrator.id == Version.calibrator_id)
                .where(
                    Calibrator.deleted_at.is_(None),
                    tuple_(Calibrator.name, Version.version).in_(latest),
                )
            ).all()
            if latest
            else []
        )
        records = {
            name: version_record(name, row, tuple(by_version.get(row.id, ()))) for name, row in rows
        }
        return {name: (records.get(name), aliases[name]) for name in names}
