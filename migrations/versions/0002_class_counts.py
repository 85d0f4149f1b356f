"""Multiclass versions: per-class label counts, and n_positive only for binary versions.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``class_counts`` (backfilled for the binary versions already stored)."""
    with op.batch_alter_table("versions") as batch:
        batch.add_column(
            sa.Column(
                "class_counts",
                sa.JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql"),
                nullable=True,
            )
        )
        batch.alter_column("n_positive", existing_type=sa.Integer(), nullable=True)
    build = "jsonb_build_array" if op.get_bind().dialect.name == "postgresql" else "json_array"
    op.execute(
        f"UPDATE versions SET class_counts = {build}(n_samples - n_positive, n_positive) "
        "WHERE n_classes = 2"
    )


def downgrade() -> None:
    """Drop ``class_counts``; multiclass versions cannot be kept by the older schema."""
    op.execute("DELETE FROM versions WHERE n_positive IS NULL")
    with op.batch_alter_table("versions") as batch:
        batch.alter_column("n_positive", existing_type=sa.Integer(), nullable=False)
        batch.drop_column("class_counts")
