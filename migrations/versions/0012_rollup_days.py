"""Monitoring from rollups: each calibrator's finished days of stored hours folded into one
rollup a version, and how far the folding has gone.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``traffic_rollup_days`` and ``traffic_rollup_folds``
    (:mod:`app.store.traffic.days`), empty: the log's upkeep folds the days there are, a
    week of a calibrator at a time, and monitoring reads the hours until then."""
    op.create_table(
        "traffic_rollup_days",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("day", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("name", "day", "version", name="pk_traffic_rollup_days"),
    )
    op.create_index("ix_traffic_rollup_days_day", "traffic_rollup_days", ["day"])
    if op.get_bind().dialect.name == "postgresql":  # a few KB, already zlib'd: kept in line
        op.execute("ALTER TABLE traffic_rollup_days ALTER COLUMN data SET STORAGE MAIN")
    op.create_table(
        "traffic_rollup_folds",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("first_unfolded", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_traffic_rollup_folds"),
    )


def downgrade() -> None:
    """Drop them: the hours hold everything the days summed."""
    op.drop_table("traffic_rollup_folds")
    op.drop_index("ix_traffic_rollup_days_day", table_name="traffic_rollup_days")
    op.drop_table("traffic_rollup_days")
