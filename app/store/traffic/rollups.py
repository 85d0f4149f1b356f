"""Each version's traffic summed by the hour, written with the prediction log: what
monitoring reads in place of the rows (:class:`~app.calibration.BinaryRollup`, a k-class
version's :class:`~app.calibration.ClassRollup`; :mod:`.deltas` makes them).

A flush of the log adds its new predictions (and the outcomes that waited for them) to their
hours' rollups, and an outcome posted later adds its label to its prediction's hour (an
overwritten one is taken out first), in the same transaction as the rows, under the
calibrator's row lock every writer of its traffic holds: a rollup is read, added to and
written back without a race, and it always sums exactly the rows committed. A raw score is
counted in its version's score bins (:class:`~app.calibration.ScoreReference`), stored with
the version (migration 0010 made them for the versions before it, from their batches; a
flush never reads a batch).

A database upgraded with traffic in it has rollups from the hour after the upgrade
(:meth:`RollupOperations.rollup_start`); monitoring reads the rows before it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime

from sqlalchemy import and_, delete, or_, select

from app.calibration import BinaryRollup, ClassRollup, ScoreReference
from app.store.models import Calibrator, Version
from app.store.queries import upsert
from app.store.session import RepositoryBase
from app.store.traffic.deltas import Key, Rollup, rollup_deltas
from app.store.traffic.periods import EPOCH, HOUR
from app.store.traffic.rows import LoggedPrediction
from app.store.traffic.tables import RollupStart, StoredScoreReference, TrafficRollup

logger = logging.getLogger("app.traffic")

Added = tuple[Key, Rollup, bool]
"""A rollup added to its stored hour, and whether it went in as it was (not kept at zero by
:meth:`~app.calibration.BinaryRollup.clamp`)."""
SPANS_PER_QUERY = 100
"""The most time spans one read of stored hours names (:meth:`RollupOperations.rollups_within`)."""


class RollupOperations(RepositoryBase):
    """Read and add to the hours' rollups; the versions' score bins. (The folded days,
    :class:`~app.store.traffic.days.RollupDays`, extend these.)"""

    def rollup_start(self) -> datetime:
        """The hour from which every logged prediction is in the rollups."""
        found = self._session.scalar(select(RollupStart.started_at))
        return found or EPOCH

    def score_references(
        self, name: str, versions: Iterable[int]
    ) -> dict[int, ScoreReference | None]:
        """The stored score bins of these versions of ``name``; None for a k-class version,
        one deleted, or one whose bins migration 0010 could not make (its batch was in
        object storage): its stored hours then count no raw scores."""
        wanted = list(versions)
        found: dict[int, ScoreReference | None] = dict.fromkeys(wanted)  # None: deleted
        rows = self._session.execute(
            select(Version.version, Version.n_classes, StoredScoreReference.data)
            .join(Calibrator, Calibrator.id == Version.calibrator_id)
            .outerjoin(StoredScoreReference, StoredScoreReference.version_id == Version.id)
            .where(Calibrator.name == name, Version.version.in_(wanted))
        ).all()
        for version, n_classes, data in rows:
            reference = None
            if n_classes == 2 and data is not None:
                reference = ScoreReference.from_bytes(data)
            found[version] = reference
        return found

    def roll_up(self, rows: Sequence[LoggedPrediction], labels: Sequence[int | None]) -> None:
        """Add new predictions, with the outcomes they were joined to (``labels``, None for
        none), to their hours' rollups."""
        binary: dict[str, set[int]] = {}
        for row in rows:
            if row.probability is not None:
                binary.setdefault(row.name, set()).add(row.version)
        references: dict[tuple[str, int], ScoreReference | None] = {}
        for name, versions in binary.items():
            found = self.score_references(name, versions)
            references.update(((name, v), reference) for v, reference in found.items())
        self.add_rollups(rollup_deltas(rows, labels, references, self.rollup_start()))

    def keep_score_reference(self, version_id: int, data: bytes) -> None:
        """Store a new version's score bins (with its row)."""
        self._session.add(StoredScoreReference(version_id=version_id, data=data))

    def add_rollups(self, deltas: Mapping[Key, Rollup]) -> list[Added]:
        """Add each rollup to its hour's, or mark a k-class version's hour (None) as having
        traffic (the caller holds the calibrators' row locks); what went in."""
        added = []
        for (name, version, hour), delta in deltas.items():
            exact = self._add_to_hour(name, version, hour, delta)
            if exact is not None:
                added.append(((name, version, hour), delta, exact))
        return added

    def _add_to_hour(self, name: str, version: int, hour: datetime, delta: Rollup) -> bool | None:
        """Add ``delta`` to the stored hour; whether it went in as it was (False: kept at
        zero by :meth:`BinaryRollup.clamp`), None when there was nothing to add it to. A
        k-class hour marked before its rollups stays a mark: its rows are read."""
        stored = self._session.scalar(
            select(TrafficRollup.data).where(
                TrafficRollup.name == name,
                TrafficRollup.hour == hour,
                TrafficRollup.version == version,
            )
        )
        merged = delta
        if stored == b"":
            return True  # a mark: monitoring reads the hour's rows, this one's with them
        if stored:
            merged = add_to(decoded(stored), delta)
        elif not delta.n:
            return None  # labels of an hour no longer summed (expired): nothing to add to
        clamped = merged.clamp()
        if clamped:
            logger.warning(
                "the rollup of %s v%d at %s took out labels it never had (rows logged "
                "without rollups, by a replica older than them?): kept at zero",
                name,
                version,
                hour.isoformat(),
            )
        values = {"name": name, "hour": hour, "version": version, "data": merged.to_bytes()}
        self._session.execute(
            upsert(self._session, TrafficRollup)
            .values(**values)
            .on_conflict_do_update(
                index_elements=["name", "hour", "version"], set_={"data": values["data"]}
            )
        )
        return not clamped

    def rollups(
        self, name: str, since: datetime, until: datetime, version: int | None = None
    ) -> Iterator[tuple[datetime, int, Rollup | None]]:
        """The stored hours of ``name`` (of one ``version``) that start in [since, until), in
        time order: a version's rollup, or None for a k-class version's hour marked before
        its rollups (:func:`decoded`). Read within the unit of work."""
        return self.rollups_within(name, [(since, until)], version)

    def rollups_within(
        self, name: str, spans: Sequence[tuple[datetime, datetime]], version: int | None = None
    ) -> Iterator[tuple[datetime, int, Rollup | None]]:
        """:meth:`rollups` of the hours that start in any of ``spans`` (disjoint, in time
        order), :data:`SPANS_PER_QUERY` spans a query."""
        for first in range(0, len(spans), SPANS_PER_QUERY):
            chosen = spans[first : first + SPANS_PER_QUERY]
            query = select(TrafficRollup.hour, TrafficRollup.version, TrafficRollup.data).where(
                TrafficRollup.name == name,
                or_(*(and_(TrafficRollup.hour >= a, TrafficRollup.hour < b) for a, b in chosen)),
            )
            if version is not None:
                query = query.where(TrafficRollup.version == version)
            for hour, v, data in self._session.execute(query.order_by(TrafficRollup.hour)):
                yield hour, v, decoded(data)

    def rollup_versions(
        self, name: str, since: datetime, until: datetime, version: int | None = None
    ) -> list[int]:
        """The versions with a stored hour of ``name`` in [since, until) (or the one
        ``version``, if it has one)."""
        query = select(TrafficRollup.version).where(
            TrafficRollup.name == name, TrafficRollup.hour >= since, TrafficRollup.hour < until
        )
        if version is not None:
            query = query.where(TrafficRollup.version == version)
        return list(self._session.scalars(query.distinct()))

    def delete_rollups(self, name: str) -> None:
        """With the calibrator's traffic."""
        self._session.execute(delete(TrafficRollup).where(TrafficRollup.name == name))

    def expire_rollups(self, cutoff: datetime) -> int:
        """Delete the hours that end by ``cutoff``, before which every row has expired; how
        many."""
        gone = self._session.execute(
            delete(TrafficRollup).where(TrafficRollup.hour <= cutoff - HOUR)
        )
        return int(gone.rowcount)  # type: ignore[attr-defined]


def decoded(data: bytes) -> Rollup | None:
    """A stored rollup's bytes read back: a binary version's or a k-class version's (their
    first byte says which); None for the mark a k-class version's hour had before its
    rollups (``b""``), whose rows monitoring reads."""
    if not data:
        return None
    if ClassRollup.wrote(data):
        return ClassRollup.from_bytes(data)
    return BinaryRollup.from_bytes(data)


def add_to(stored: Rollup | None, delta: Rollup) -> Rollup:
    """``delta`` added to a stored rollup of the same kind (to a new one, for None)."""
    if isinstance(delta, BinaryRollup):
        binary = BinaryRollup(delta.scores.size) if stored is None else stored
        if isinstance(binary, BinaryRollup):
            binary.add(delta)
            return binary
    else:
        classes = ClassRollup(delta.k) if stored is None else stored
        if isinstance(classes, ClassRollup):
            classes.add(delta)
            return classes
    raise ValueError("a binary and a k-class rollup do not add up")
