"""Fits' idempotency keys: the fingerprint of the parsed batch, stored with the version.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``fit_keys.content`` (:mod:`app.store.fit_keys`); the keys already stored match a
    retry by its bytes alone until they expire."""
    with op.batch_alter_table("fit_keys") as batch:
        batch.add_column(sa.Column("content", sa.String(length=64), nullable=True))


def downgrade() -> None:
    """Drop ``content``: retries are then matched by their bytes."""
    with op.batch_alter_table("fit_keys") as batch:
        batch.drop_column("content")
