"""The traffic history: which calibrators' days of the prediction log are Parquet files in
object storage (``python -m app.store.history``).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``exported_days`` (:class:`app.store.models.ExportedDay`), empty: no day has
    been exported yet."""
    op.create_table(
        "exported_days",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("object_key", sa.String(length=1024), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("rows", sa.Integer(), nullable=False),
        sa.Column("labelled", sa.Integer(), nullable=False),
        sa.Column("counts", sa.JSON().with_variant(JSONB(), "postgresql"), nullable=False),
        sa.Column("fingerprint", sa.String(length=128), nullable=False),
        sa.Column("last_labelled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("exported_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", "day", name="pk_exported_days"),
    )
    op.create_index("ix_exported_days_day", "exported_days", ["day"])


def downgrade() -> None:
    """Drop ``exported_days``; refused while a day is exported (its rows are only in the
    bucket, and the reads would no longer find them)."""
    exported = op.get_bind().execute(sa.text("SELECT count(*) FROM exported_days")).scalar_one()
    if exported:
        raise RuntimeError(
            f"{exported} calibrator-days of traffic are exported to object storage: "
            "downgrading below 0011 would lose them from every read"
        )
    op.drop_index("ix_exported_days_day", table_name="exported_days")
    op.drop_table("exported_days")
