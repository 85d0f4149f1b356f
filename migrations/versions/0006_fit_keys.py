"""Fits' idempotency keys: the claim, fingerprint and version of each (name, key).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``fit_keys`` (:mod:`app.store.fit_keys`), indexed by age for its expiry."""
    op.create_table(
        "fit_keys",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=32), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", "key", name="pk_fit_keys"),
    )
    op.create_index("ix_fit_keys_created_at", "fit_keys", ["created_at"])


def downgrade() -> None:
    """Drop ``fit_keys``: fits sent again with a key then fit again."""
    op.drop_index("ix_fit_keys_created_at", table_name="fit_keys")
    op.drop_table("fit_keys")
