"""Query building blocks shared by the repository's methods."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, exists, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.store.models import Alias, Base, Calibrator, Version
from app.store.records import CalibratorSummary, VersionRecord


def utc_now() -> datetime:
    """Now, timezone-aware UTC: every timestamp the store writes."""
    return datetime.now(UTC)


def live(name: str) -> tuple[ColumnElement[bool], ...]:
    """The conditions selecting the live (not deleted) calibrator called ``name``."""
    return (Calibrator.name == name, Calibrator.deleted_at.is_(None))


def tagged(session: Session, key: str, value: str) -> Select[int]:
    """The ids of calibrators with a version tagged ``key: value``, keys of any characters.

    SQLite's JSON paths (``$."key"``) have no escape for a ``"`` in the key and read ``\\``
    as an escape, so there the tags are scanned with ``json_each`` and compared as bound
    parameters; PostgreSQL's ``->>`` takes the key as a bound parameter already.
    """
    if session.get_bind().dialect.name == "sqlite":
        pairs = func.json_each(Version.tags).table_valued("key", "value", "type")
        found = exists().where(pairs.c.key == key, pairs.c.type == "text", pairs.c.value == value)
        return select(Version.calibrator_id).where(found)
    return select(Version.calibrator_id).where(Version.tags[key].as_string() == value)


def upsert(session: Session, table: type[Base]) -> Any:
    """The dialect's INSERT for ``table``, which knows ``ON CONFLICT``."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise ValueError(f"unsupported database dialect {dialect!r}; use SQLite or PostgreSQL")


def version_record(name: str, row: Version, aliases: tuple[str, ...]) -> VersionRecord:
    """The record of a version row of the calibrator ``name``."""
    return VersionRecord(
        id=row.id,
        name=name,
        version=row.version,
        method=row.method,
        params=row.params,
        n_samples=row.n_samples,
        n_positive=row.n_positive,
        n_classes=row.n_classes,
        class_counts=list(row.class_counts or []),
        created_at=row.created_at,
        description=row.description,
        tags=row.tags,
        metrics=row.metrics,
        selection=row.selection,
        artifact_sha256=row.artifact_sha256,
        artifact_bytes=row.artifact_bytes,
        aliases=aliases,
        source=row.source,
    )


def aliases_of(session: Session, version_ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
    """The sorted alias names pointing at each of ``version_ids`` (absent: none)."""
    if not version_ids:
        return {}
    found: dict[int, list[str]] = {}
    rows = session.execute(
        select(Alias.version_id, Alias.name)
        .where(Alias.version_id.in_(version_ids))
        .order_by(Alias.name)
    )
    for version_id, alias in rows:
        found.setdefault(version_id, []).append(alias)
    return {version_id: tuple(names) for version_id, names in found.items()}


def summaries(
    session: Session, page: Sequence[tuple[int, str, datetime]]
) -> list[CalibratorSummary]:
    """Summaries of the given (id, name, updated_at) calibrators, in one grouped query."""
    stats = (
        select(
            Version.calibrator_id,
            func.max(Version.version).label("latest"),
            func.count().label("n_versions"),
        )
        .where(Version.calibrator_id.in_([calibrator_id for calibrator_id, _, _ in page]))
        .group_by(Version.calibrator_id)
        .subquery()
    )
    rows = session.execute(
        select(stats.c.calibrator_id, stats.c.latest, stats.c.n_versions, Version.method).join(
            Version,
            (Version.calibrator_id == stats.c.calibrator_id) & (Version.version == stats.c.latest),
        )
    )
    by_id = {row.calibrator_id: row for row in rows}
    result = []
    for calibrator_id, name, updated_at in page:
        stat = by_id.get(calibrator_id)
        result.append(
            CalibratorSummary(
                name=name,
                latest_version=None if stat is None else int(stat.latest),
                method=None if stat is None else stat.method,
                n_versions=0 if stat is None else int(stat.n_versions),
                updated_at=updated_at,
            )
        )
    return result
