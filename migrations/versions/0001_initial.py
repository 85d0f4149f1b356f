"""The initial schema: calibrators, versions, version_blobs, aliases.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json(*, none_as_null: bool = False) -> sa.types.TypeEngine[Any]:
    """JSONB on PostgreSQL, JSON text elsewhere (as ``app.store.models.json_document``)."""
    return sa.JSON(none_as_null=none_as_null).with_variant(
        JSONB(none_as_null=none_as_null), "postgresql"
    )


def upgrade() -> None:
    """Create the four tables."""
    op.create_table(
        "calibrators",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_version", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_calibrators"),
        sa.UniqueConstraint("name", name="uq_calibrators_name"),
    )
    op.create_table(
        "versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("calibrator_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("method", sa.String(length=64), nullable=False),
        sa.Column("params", _json(), nullable=False),
        sa.Column("n_samples", sa.Integer(), nullable=False),
        sa.Column("n_positive", sa.Integer(), nullable=False),
        sa.Column("n_classes", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("tags", _json(), nullable=False),
        sa.Column("metrics", _json(), nullable=False),
        sa.Column("selection", _json(none_as_null=True), nullable=True),
        sa.Column("artifact_sha256", sa.String(length=64), nullable=False),
        sa.Column("artifact_bytes", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_versions"),
        sa.ForeignKeyConstraint(
            ["calibrator_id"],
            ["calibrators.id"],
            name="fk_versions_calibrator_id_calibrators",
            ondelete="CASCADE",
        ),
        # Also the "latest" index: max(version) per calibrator is one step in it.
        sa.UniqueConstraint("calibrator_id", "version", name="uq_versions_calibrator_id_version"),
    )
    op.create_table(
        "version_blobs",
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("artifact", sa.LargeBinary(), nullable=False),
        sa.Column("batch", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("version_id", name="pk_version_blobs"),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["versions.id"],
            name="fk_version_blobs_version_id_versions",
            ondelete="CASCADE",
        ),
    )
    op.create_table(
        "aliases",
        sa.Column("calibrator_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("calibrator_id", "name", name="pk_aliases"),
        sa.ForeignKeyConstraint(
            ["calibrator_id"],
            ["calibrators.id"],
            name="fk_aliases_calibrator_id_calibrators",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["versions.id"],
            name="fk_aliases_version_id_versions",
            ondelete="CASCADE",
        ),
    )
    op.create_index("ix_aliases_version_id", "aliases", ["version_id"])


def downgrade() -> None:
    """Drop the four tables, dependents first."""
    op.drop_index("ix_aliases_version_id", table_name="aliases")
    op.drop_table("aliases")
    op.drop_table("version_blobs")
    op.drop_table("versions")
    op.drop_table("calibrators")
