"""Versions' blobs in object storage: their sha256 keys beside the (then empty) bytes.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``artifact_key`` and ``batch_key`` to ``version_blobs`` (:mod:`app.store.objects`):
    null for blobs kept in the database, as every existing one is."""
    op.add_column("version_blobs", sa.Column("artifact_key", sa.String(length=64), nullable=True))
    op.add_column("version_blobs", sa.Column("batch_key", sa.String(length=64), nullable=True))


def downgrade() -> None:
    """Drop the keys; refused while a version's blobs are in object storage (its row would
    name nothing): bring them back into the database first."""
    in_objects = (
        op.get_bind()
        .execute(
            sa.text(
                "SELECT count(*) FROM version_blobs "
                "WHERE artifact_key IS NOT NULL OR batch_key IS NOT NULL"
            )
        )
        .scalar_one()
    )
    if in_objects:
        raise RuntimeError(
            f"{in_objects} versions keep their blobs in object storage: downgrading below 0009 "
            "would leave them without; bring their blobs back into the database first"
        )
    with op.batch_alter_table("version_blobs") as batch:
        batch.drop_column("batch_key")
        batch.drop_column("artifact_key")
