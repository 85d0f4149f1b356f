"""Traffic: the predictions logged under the client's ids, and outcomes awaiting theirs.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``predictions`` and ``pending_outcomes``."""
    op.create_table(
        "predictions",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("client_id", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("probability", sa.Float(), nullable=True),
        sa.Column("scores_row", sa.LargeBinary(), nullable=True),
        sa.Column("probabilities_row", sa.LargeBinary(), nullable=True),
        sa.Column("predicted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("label", sa.Integer(), nullable=True),
        sa.Column("labelled_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_predictions"),
        sa.UniqueConstraint("name", "client_id", name="uq_predictions_name_client_id"),
    )
    op.create_index("ix_predictions_name_predicted_at", "predictions", ["name", "predicted_at"])
    op.create_table(
        "pending_outcomes",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("client_id", sa.String(length=128), nullable=False),
        sa.Column("label", sa.Integer(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", "client_id", name="pk_pending_outcomes"),
    )


def downgrade() -> None:
    """Drop the traffic tables (and the traffic)."""
    op.drop_table("pending_outcomes")
    op.drop_index("ix_predictions_name_predicted_at", table_name="predictions")
    op.drop_table("predictions")
