"""The tables: calibrators, their versions, the versions' blobs, aliases and their moves,
traffic, and the fits' idempotency keys.

The schema itself is created by the hand-written Alembic migrations in ``migrations/``; these
mapped classes describe the same tables to the ORM and must agree with them (a test checks).

Blobs (the artifact and the fitting batch) live in ``version_blobs``, apart from the version's
metadata, so that listings and ``latest`` lookups never read them.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import orjson
from sqlalchemy import (
    JSON,
    Date,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeEngine

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Deterministic constraint names, so that migrations (and SQLite batch mode) can name them."""


def dump_json(value: Any) -> str:
    """The JSON columns' serialiser on every backend: orjson, numpy-aware.

    JSON has no NaN or infinity; orjson writes them as null, which is what a stored metric
    that could not be computed reads back as.
    """
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def as_stored_json(value: Any) -> Any:
    """``value`` as a JSON column will read it back (numpy → lists, NaN → None)."""
    return orjson.loads(dump_json(value))


def json_document(*, none_as_null: bool = False) -> TypeEngine[Any]:
    """A JSON column: JSONB on PostgreSQL, JSON text elsewhere."""
    return JSON(none_as_null=none_as_null).with_variant(
        JSONB(none_as_null=none_as_null), "postgresql"
    )


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware (SQLite keeps no zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Refuse naive datetimes; store UTC (naive on SQLite, which has no zone type)."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given for a UTC timestamp column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Return the stored instant as an aware UTC datetime."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    """The declarative base of every table of the service."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Calibrator(Base):
    """A named calibrator; a deleted one stays as a tombstone that keeps its version counter.

    ``last_version`` is the highest version number ever handed out under this name. It is never
    decreased, also not by deletes, so a (name, version) pair always denotes one fit.
    """

    __tablename__ = "calibrators"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_version: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class Version(Base):
    """One fit of a calibrator: its metadata, parameters and metrics, without the blobs.

    The unique (calibrator_id, version) index also serves ``latest`` lookups: the highest
    version of a calibrator is one backward step in that index.
    """

    __tablename__ = "versions"
    __table_args__ = (UniqueConstraint("calibrator_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    calibrator_id: Mapped[int] = mapped_column(ForeignKey("calibrators.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    method: Mapped[str] = mapped_column(String(64))
    params: Mapped[dict[str, Any]] = mapped_column(json_document())
    n_samples: Mapped[int] = mapped_column(Integer)
    n_positive: Mapped[int | None] = mapped_column(Integer, nullable=True)
    n_classes: Mapped[int] = mapped_column(Integer)
    class_counts: Mapped[list[int] | None] = mapped_column(
        json_document(none_as_null=True), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    description: Mapped[str] = mapped_column(Text)
    tags: Mapped[dict[str, str]] = mapped_column(json_document())
    metrics: Mapped[dict[str, Any]] = mapped_column(json_document())
    selection: Mapped[dict[str, Any] | None] = mapped_column(
        json_document(none_as_null=True), nullable=True
    )
    source: Mapped[dict[str, Any] | None] = mapped_column(
        json_document(none_as_null=True), nullable=True
    )
    artifact_sha256: Mapped[str] = mapped_column(String(64))
    artifact_bytes: Mapped[int] = mapped_column(Integer)


class VersionBlob(Base):
    """The two blobs of a version: the artifact (JSON) and the fitting batch (binary), or,
    with object storage (:mod:`app.store.objects`), their sha256 keys there and no bytes."""

    __tablename__ = "version_blobs"

    version_id: Mapped[int] = mapped_column(
        ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True
    )
    artifact: Mapped[bytes] = mapped_column(LargeBinary)
    batch: Mapped[bytes] = mapped_column(LargeBinary)
    artifact_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    batch_key: Mapped[str | None] = mapped_column(String(64), nullable=True)


class Alias(Base):
    """A movable name for one version of a calibrator (``production`` → version 3).

    It goes with its version: deleting the version (or the calibrator) deletes the alias.
    """

    __tablename__ = "aliases"

    calibrator_id: Mapped[int] = mapped_column(
        ForeignKey("calibrators.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    version_id: Mapped[int] = mapped_column(
        ForeignKey("versions.id", ondelete="CASCADE"), index=True
    )
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class AliasMove(Base):
    """One move of an alias, kept for the record: where it pointed before (None: nowhere,
    it was set) and after (None: removed, by itself or with its version), and when. Written
    with the move, in its transaction; deleted with the calibrator."""

    __tablename__ = "alias_moves"
    __table_args__ = (Index("ix_alias_moves_calibrator_id_id", "calibrator_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    calibrator_id: Mapped[int] = mapped_column(ForeignKey("calibrators.id", ondelete="CASCADE"))
    alias: Mapped[str] = mapped_column(String(128))
    from_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    to_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    moved_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Prediction(Base):
    """One logged prediction: the client's id, the version used, the raw score and the
    probability (``*_row``: float64 little-endian rows for multiclass), and its outcome once
    known. Keyed by the calibrator's name; deleted with the calibrator, so that one fitted
    again under the name starts without it.

    On PostgreSQL the table is partitioned by day of ``predicted_at`` (migration 0005,
    :mod:`app.store.traffic.partitions`), which every unique index must then hold: the first record
    of an id is kept by :class:`PredictionKey`, whose time tells an outcome which day to read.
    """

    __tablename__ = "predictions"
    __table_args__ = (
        Index("ix_predictions_name_predicted_at", "name", "predicted_at"),
        {"postgresql_partition_by": "RANGE (predicted_at)"},
    )

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    client_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    probability: Mapped[float | None] = mapped_column(Float, nullable=True)
    scores_row: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    probabilities_row: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    predicted_at: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    labelled_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class PredictionKey(Base):
    """The first record of a logged id: when it was made. Logging an id inserts its key
    first, and only a new key's prediction is written; an outcome finds its prediction's
    partition by this time. Expires in batches after the day it points to
    (:mod:`app.store.traffic.upkeep`)."""

    __tablename__ = "prediction_keys"
    __table_args__ = (Index("ix_prediction_keys_predicted_at", "predicted_at"),)

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    client_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    predicted_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ExportedDay(Base):
    """A calibrator's day of the prediction log, in object storage as one Parquet file
    (:mod:`app.store.history`): its key and sha256, its rows, labelled rows and counts by
    version (``{"1": [predictions, labelled]}``), what the rows were when read
    (``fingerprint``, ``last_labelled_at``: a later outcome changes them) and when."""

    __tablename__ = "exported_days"
    __table_args__ = (Index("ix_exported_days_day", "day"),)

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    object_key: Mapped[str] = mapped_column(String(1024))
    sha256: Mapped[str] = mapped_column(String(64))
    rows: Mapped[int] = mapped_column(Integer)
    labelled: Mapped[int] = mapped_column(Integer)
    counts: Mapped[dict[str, list[int]]] = mapped_column(json_document())
    fingerprint: Mapped[str] = mapped_column(String(128))
    last_labelled_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    exported_at: Mapped[datetime] = mapped_column(UTCDateTime())


class PendingOutcome(Base):
    """An outcome posted before its prediction was logged: joined when the prediction is."""

    __tablename__ = "pending_outcomes"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    client_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    label: Mapped[int] = mapped_column(Integer)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime())


class FitKey(Base):
    """A fit's idempotency key: the request that claimed it (its payload's fingerprint, the
    claim's owner and lease) and, once stored, the version it made and its parsed batch's
    fingerprint (:mod:`app.store.fit_keys`).
    Keyed by the calibrator's name, which need not exist yet when a first fit claims a key."""

    __tablename__ = "fit_keys"
    __table_args__ = (Index("ix_fit_keys_created_at", "created_at"),)

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    owner: Mapped[str] = mapped_column(String(32))
    lease_until: Mapped[datetime] = mapped_column(UTCDateTime())
    version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    content: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
