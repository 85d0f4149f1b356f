"""Monitoring from rollups: each binary version's hours of traffic summed, its fitting batch's
score bins, and the hour from which the rollups hold every prediction.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import sqlalchemy as sa
from alembic import op

from app.calibration import ScoreReference
from app.store.batches import decode_batch

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def upgrade() -> None:
    """Make the tables. A database that has logged predictions already has them summed from
    the next hour on (:mod:`app.store.traffic.rollups`); monitoring reads the rows before it."""
    op.create_table(
        "traffic_rollups",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("name", "hour", "version", name="pk_traffic_rollups"),
    )
    op.create_index("ix_traffic_rollups_hour", "traffic_rollups", ["hour"])
    if op.get_bind().dialect.name == "postgresql":  # a few KB, already zlib'd: kept in line
        op.execute("ALTER TABLE traffic_rollups ALTER COLUMN data SET STORAGE MAIN")
    op.create_table(
        "score_references",
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["versions.id"],
            name="fk_score_references_version_id_versions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("version_id", name="pk_score_references"),
    )
    start = op.create_table(
        "traffic_rollup_start",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_traffic_rollup_start"),
    )
    _score_references()
    logged = op.get_bind().execute(sa.text("SELECT 1 FROM predictions LIMIT 1")).first()
    started = EPOCH
    if logged is not None:
        now = datetime.now(UTC)
        started = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    if op.get_bind().dialect.name == "sqlite":
        started = started.replace(tzinfo=None)  # as the service's UTC columns are kept there
    op.bulk_insert(start, [{"id": 1, "started_at": started}])


def _score_references() -> None:
    """The score bins of every binary version whose batch is in the database, made from it
    one version at a time (a version whose batch is in object storage has none: its stored
    hours count no raw scores, and monitoring reads its batch for the shift)."""
    bind = op.get_bind()
    table = sa.table("score_references", sa.column("version_id"), sa.column("data"))
    found = bind.execute(
        sa.text(
            "SELECT v.id FROM versions AS v JOIN version_blobs AS b ON b.version_id = v.id "
            "WHERE v.n_classes = 2 AND b.batch_key IS NULL ORDER BY v.id"
        )
    )
    for (version_id,) in found.all():
        batch = decode_batch(
            bind.execute(
                sa.text("SELECT batch FROM version_blobs WHERE version_id = :id"),
                {"id": version_id},
            ).scalar_one()
        )
        reference = ScoreReference.of_batch(
            np.asarray(batch.scores), batch.labels, np.asarray(batch.weights, dtype=np.float64)
        )
        op.bulk_insert(table, [{"version_id": version_id, "data": reference.to_bytes()}])


def downgrade() -> None:
    op.drop_table("traffic_rollup_start")
    op.drop_table("score_references")
    op.drop_table("traffic_rollups")
