"""Aliases' moves: each set, move and removal of an alias, with its time.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``alias_moves`` (:class:`app.store.models.AliasMove`); each alias there is now
    starts it with one move, to its version at its last update (where it was before is not
    known)."""
    op.create_table(
        "alias_moves",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("calibrator_id", sa.Integer(), nullable=False),
        sa.Column("alias", sa.String(length=128), nullable=False),
        sa.Column("from_version", sa.Integer(), nullable=True),
        sa.Column("to_version", sa.Integer(), nullable=True),
        sa.Column("moved_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["calibrator_id"],
            ["calibrators.id"],
            name="fk_alias_moves_calibrator_id_calibrators",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_alias_moves"),
    )
    op.create_index("ix_alias_moves_calibrator_id_id", "alias_moves", ["calibrator_id", "id"])
    op.execute(
        "INSERT INTO alias_moves (calibrator_id, alias, from_version, to_version, moved_at) "
        "SELECT aliases.calibrator_id, aliases.name, NULL, versions.version, aliases.updated_at "
        "FROM aliases JOIN versions ON versions.id = aliases.version_id "
        "ORDER BY aliases.updated_at"
    )


def downgrade() -> None:
    """Drop ``alias_moves``: the aliases stay, their history goes."""
    op.drop_index("ix_alias_moves_calibrator_id_id", table_name="alias_moves")
    op.drop_table("alias_moves")
