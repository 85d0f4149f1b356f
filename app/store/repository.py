"""Reads and writes of calibrators, versions and aliases, within one session.

A :class:`Repository` is handed out by :meth:`app.store.db.Database.transaction`, which owns
the commit; the repository itself never commits. Every method returns records
(:mod:`app.store.records`), never ORM objects, and raises :class:`~app.errors.NotFound` with
a message a client can read.

Version numbers are allocated race-free on SQLite and PostgreSQL alike: see
:meth:`Repository.create_version`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from sqlalchemy import ColumnElement, delete, func, select, update

from app.errors import Conflict, NotFound, invalid
from app.store.aliases import AliasOperations
from app.store.artifacts import sha256_hex
from app.store.blobs import BlobOperations
from app.store.fit_keys import FitKeyOperations
from app.store.listing import ListingReads
from app.store.models import Alias, AliasMove, Calibrator, Version, as_stored_json
from app.store.queries import (
    aliases_of,
    live,
    summaries,
    tagged,
    upsert,
    utc_now,
    version_record,
)
from app.store.records import MAX_TAGS, CalibratorSummary, NewVersion, VersionRecord
from app.store.traffic.history import HistoryReads
from app.store.traffic.log import TrafficOperations
from app.store.traffic.names import TrafficNames
from app.store.traffic.outcomes import OutcomeOperations
from app.store.traffic.upkeep import TrafficUpkeep

Selector = int | Literal["latest"] | str
"""A version number, ``"latest"``, or an alias name."""


class Repository(
    AliasOperations,
    BlobOperations,
    FitKeyOperations,
    ListingReads,
    TrafficOperations,
    OutcomeOperations,
    HistoryReads,
    TrafficUpkeep,
    TrafficNames,
):
    """The store's operations on one session (one transaction)."""

    # -- writes ---------------------------------------------------------------------------

    def derive_version(self, parent: VersionRecord, new: NewVersion) -> VersionRecord:
        """Store ``new`` as the next version of ``parent``'s calibrator, made from ``parent``
        (an adjust): the calibrator's row locked first, then ``parent`` looked for, so a
        delete of either that committed meanwhile is a 404 and nothing is stored. Unlike a
        fit, it never revives a deleted calibrator."""
        self._lock(parent.name)
        # by number, then by row: SQLite gives a deleted version's row id to the next
        if self.get_version(parent.name, parent.version).id != parent.id:
            raise NotFound(f"{parent.name!r} v{parent.version} was deleted meanwhile")
        return self.create_version(parent.name, new)

    def create_version(self, name: str, new: NewVersion) -> VersionRecord:
        """Store ``new`` as the next version of ``name``, creating (or reviving) the calibrator.

        The number comes from the calibrator row's counter, in the same transaction as the
        inserts: ``INSERT .. ON CONFLICT DO NOTHING`` makes sure the row exists, and
        ``UPDATE .. SET last_version = last_version + 1 .. RETURNING`` takes the row lock and
        the next number at once. Concurrent fits of one name queue on that lock (PostgreSQL)
        or on the write lock the first statement takes (SQLite, within its busy timeout), so
        no number is handed out twice, and a rolled-back fit leaves the counter untouched.
        """
        now = utc_now()
        self._session.execute(
            upsert(self._session, Calibrator)
            .values(name=name, created_at=now, updated_at=now, last_version=0)
            .on_conflict_do_nothing(index_elements=["name"])
        )
        calibrator_id, number = self._session.execute(
            update(Calibrator)
            .where(Calibrator.name == name)
            .values(last_version=Calibrator.last_version + 1, updated_at=now, deleted_at=None)
            .returning(Calibrator.id, Calibrator.last_version)
            .execution_options(synchronize_session=False)
        ).one()
        row = Version(
            calibrator_id=calibrator_id,
            version=number,
            method=new.method,
            params=as_stored_json(new.params),
            n_samples=new.n_samples,
            n_positive=new.n_positive,
            n_classes=new.n_classes,
            class_counts=list(new.class_counts),
            created_at=now,
            description=new.description,
            tags=as_stored_json(new.tags),
            metrics=as_stored_json(new.metrics),
            selection=as_stored_json(new.selection),
            source=as_stored_json(new.source),
            artifact_sha256=sha256_hex(new.artifact),
            artifact_bytes=len(new.artifact),
        )
        self._session.add(row)
        self._session.flush()
        self.add_blobs(row.id, new.artifact, new.batch, new.blob_keys)
        if new.score_reference is not None:
            self.keep_score_reference(row.id, new.score_reference)
        return version_record(name, row, ())

    def delete_version(self, name: str, version: int, *, force: bool = False) -> None:
        """Delete one version with its blobs; its number is never handed out again.

        A version that aliases point to is a :class:`~app.errors.Conflict` unless ``force``,
        which removes those aliases with it.
        """
        calibrator_id = self._lock(name)
        pointing = self._aliases_pointing_at(calibrator_id, version)
        if pointing and not force:
            names = ", ".join(pointing)
            raise Conflict(
                f"version {version} of '{name}' is aliased as {names}; move the alias first "
                "or delete with ?force=true, which removes the alias too"
            )
        for alias in pointing:  # removed with it (the rows go by the foreign key's cascade)
            self._record_move(calibrator_id, alias, version, None)
        deleted = self._session.execute(
            delete(Version)
            .where(Version.calibrator_id == calibrator_id, Version.version == version)
            .returning(Version.id)
            .execution_options(synchronize_session=False)
        ).first()
        if deleted is None:
            raise NotFound(f"version {version} of '{name}' not found")
        self._touch(calibrator_id)

    def delete_calibrator(self, name: str) -> None:
        """Delete every version of ``name`` and its traffic (logged predictions, pending
        outcomes, exported days); a tombstone keeps the counter for a re-creation.

        The row lock comes first: a fit that holds it (its version not yet committed) is
        waited for, and its version is deleted with the others; a fit that comes after finds
        the tombstone and starts a new calibrator, numbered after every number given out.
        """
        calibrator_id = self._lock(name)
        self._session.execute(
            delete(Version)
            .where(Version.calibrator_id == calibrator_id)
            .execution_options(synchronize_session=False)
        )
        self._session.execute(  # a calibrator made again under the name starts its own
            delete(AliasMove)
            .where(AliasMove.calibrator_id == calibrator_id)
            .execution_options(synchronize_session=False)
        )
        self.delete_traffic(name)
        self.delete_history(name)
        now = utc_now()
        self._session.execute(
            update(Calibrator)
            .where(Calibrator.id == calibrator_id)
            .values(deleted_at=now, updated_at=now)
            .execution_options(synchronize_session=False)
        )

    # -- reads ----------------------------------------------------------------------------

    def get_version(self, name: str, selector: Selector) -> VersionRecord:
        """The version of ``name`` that ``selector`` (number, ``"latest"`` or alias) denotes."""
        query = select(Version).join(Calibrator).where(*live(name))
        if isinstance(selector, int):
            query = query.where(Version.version == selector)
            missing = f"version {selector} of '{name}' not found"
        elif selector == "latest":
            query = query.order_by(Version.version.desc()).limit(1)
            missing = f"calibrator '{name}' has no versions"
        else:
            query = query.join(Alias, Alias.version_id == Version.id).where(Alias.name == selector)
            missing = f"alias '{selector}' of '{name}' not found"
        row = self._session.scalar(query)
        if row is None:
            self._calibrator_id(name)  # a missing calibrator is the better message
            raise NotFound(missing)
        return version_record(name, row, aliases_of(self._session, [row.id]).get(row.id, ()))

    def latest_version_number(self, name: str) -> int:
        """The highest live version of ``name``: one index read, for ``latest`` caches."""
        number = self._session.scalar(
            select(func.max(Version.version)).join(Calibrator).where(*live(name))
        )
        if number is None:
            self._calibrator_id(name)
            raise NotFound(f"calibrator '{name}' has no versions")
        return int(number)

    def list_calibrators(
        self, limit: int, offset: int, tag: tuple[str, str] | None = None
    ) -> tuple[list[CalibratorSummary], int]:
        """A page of the live calibrators in name order, and how many there are in all.

        With ``tag`` = (key, value), only calibrators with a live version tagged so.
        """
        conditions: list[ColumnElement[bool]] = [Calibrator.deleted_at.is_(None)]
        if tag is not None:
            conditions.append(Calibrator.id.in_(tagged(self._session, *tag)))
        total = self._session.scalar(
            select(func.count()).select_from(Calibrator).where(*conditions)
        )
        page = self._session.execute(
            select(Calibrator.id, Calibrator.name, Calibrator.updated_at)
            .where(*conditions)
            .order_by(Calibrator.name)
            .limit(limit)
            .offset(offset)
        ).all()
        items = summaries(self._session, [(r.id, r.name, r.updated_at) for r in page])
        return items, int(total or 0)

    def update_version(
        self,
        name: str,
        selector: Selector,
        *,
        description: str | None = None,
        tags: Mapping[str, str | None] | None = None,
    ) -> VersionRecord:
        """Change a version's description and merge ``tags`` into its tags (a None value
        deletes that key). The fitted numbers never change: a version is immutable."""
        self._lock(name)
        record = self.get_version(name, selector)
        row = self._session.get_one(Version, record.id)
        if description is not None:
            row.description = description
        if tags:
            merged = {**row.tags, **{k: v for k, v in tags.items() if v is not None}}
            merged = {k: v for k, v in merged.items() if tags.get(k, "") is not None}
            if len(merged) > MAX_TAGS:
                raise invalid(
                    ("tags",),
                    f"would leave v{record.version} with {len(merged)} tags; the limit is "
                    f"{MAX_TAGS} (a null value deletes a key)",
                )
            row.tags = merged
        self._session.flush()
        return version_record(name, row, record.aliases)

    def get_calibrator(
        self, name: str, limit: int, offset: int
    ) -> tuple[CalibratorSummary, list[VersionRecord], int]:
        """``name``'s summary, a page of its versions newest first, and its version count."""
        row = self._session.execute(
            select(Calibrator.id, Calibrator.updated_at).where(*live(name))
        ).first()
        if row is None:
            raise NotFound(f"calibrator '{name}' not found")
        (summary,) = summaries(self._session, [(row.id, name, row.updated_at)])
        versions = self._session.scalars(
            select(Version)
            .where(Version.calibrator_id == row.id)
            .order_by(Version.version.desc())
            .limit(limit)
            .offset(offset)
        ).all()
        aliases = aliases_of(self._session, [v.id for v in versions])
        records = [version_record(name, v, aliases.get(v.id, ())) for v in versions]
        return summary, records, summary.n_versions

    # -- helpers -----------------------------------------------------------------------

    def _touch(self, calibrator_id: int) -> None:
        self._session.execute(
            update(Calibrator)
            .where(Calibrator.id == calibrator_id)
            .values(updated_at=utc_now())
            .execution_options(synchronize_session=False)
        )
