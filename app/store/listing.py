"""The reads of a list of calibrators: each one's latest version, its aliases and the versions
they point to, in two queries for a whole page (not two per calibrator), and which of its
versions answered traffic in a range, in one."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import exists, literal, or_, select, tuple_, union_all

from app.store.models import Alias, Calibrator, Prediction, Version
from app.store.queries import version_record
from app.store.records import CalibratorSummary, VersionRecord
from app.store.session import RepositoryBase


class ListingReads(RepositoryBase):
    """The latest and aliased versions, and the aliases, of a page of calibrators."""

    def listed_versions(
        self, listed: Sequence[CalibratorSummary]
    ) -> dict[str, tuple[dict[int, VersionRecord], dict[str, int]]]:
        """For each calibrator of ``listed``: the records of its latest version and of every
        version an alias points to, by number, and every alias it has, by alias name; one
        query for the aliases, one for the versions."""
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
        wanted = []
        if latest:
            wanted.append(tuple_(Calibrator.name, Version.version).in_(latest))
        if by_version:
            wanted.append(Version.id.in_(list(by_version)))
        rows = (
            self._session.execute(
                select(Calibrator.name, Version)
                .join(Calibrator, Calibrator.id == Version.calibrator_id)
                .where(Calibrator.deleted_at.is_(None), or_(*wanted))
            ).all()
            if wanted
            else []
        )
        records: dict[str, dict[int, VersionRecord]] = {name: {} for name in names}
        for name, row in rows:
            aliased = tuple(by_version.get(row.id, ()))
            records[name][row.version] = version_record(name, row, aliased)
        return {name: (records[name], aliases[name]) for name in names}

    def answered(
        self, pairs: Sequence[tuple[str, int]], since: datetime, until: datetime
    ) -> set[tuple[str, int]]:
        """Those (calibrator, version) ``pairs`` that answered a prediction logged in
        [since, until): one statement, a probe per pair that stops at its first row (found
        through the index on (name, predicted_at)), never a count of the traffic."""
        if not pairs:
            return set()
        probes = [
            select(literal(i)).where(
                exists().where(
                    Prediction.name == name,
                    Prediction.predicted_at >= since,
                    Prediction.predicted_at < until,
                    Prediction.version == version,
                )
            )
            for i, (name, version) in enumerate(pairs)
        ]
        found = self._session.scalars(union_all(*probes))
        return {pairs[int(i)] for i in found}
