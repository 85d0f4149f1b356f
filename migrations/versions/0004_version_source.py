"""Lineage: where a version's fitting batch came from (null for a posted batch).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``versions.source``; the versions already stored were fitted on posted batches."""
    with op.batch_alter_table("versions") as batch:
        batch.add_column(
            sa.Column(
                "source",
                sa.JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql"),
                nullable=True,
            )
        )


def downgrade() -> None:
    """Drop ``source``: the versions stay, without their lineage."""
    with op.batch_alter_table("versions") as batch:
        batch.drop_column("source")
