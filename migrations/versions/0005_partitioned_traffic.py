"""The prediction log by day: PostgreSQL partitions, and the ids' first records apart.

``predictions`` becomes range-partitioned by ``predicted_at`` on PostgreSQL, one partition a
day (``predictions_pYYYYMMDD``, created ahead by the service, dropped when they expire) and a
default one for a row no day holds yet. A unique index of a partitioned table must hold the
partition key, so the first record of an id can no longer be kept by ``UNIQUE (name,
client_id)`` there: ``prediction_keys`` holds it, one row per logged id with the time of its
record, and both backends log through it alike. ``predictions`` is keyed by (name,
client_id, predicted_at): what an outcome finds through ``prediction_keys``, in the
partition of the key's day. The rows already logged are kept.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AHEAD_DAYS = 7
"""Days past today given a partition now (the service keeps :data:`AHEAD_DAYS` ahead)."""

_COLUMNS = (
    "name, client_id, version, score, probability, scores_row, probabilities_row, "
    "predicted_at, label, labelled_at"
)


def _columns() -> list[sa.Column[object]]:
    return [
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
    ]


def upgrade() -> None:
    """Key the ids apart, then rebuild ``predictions`` (partitioned on PostgreSQL)."""
    op.create_table(
        "prediction_keys",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("client_id", sa.String(length=128), nullable=False),
        sa.Column("predicted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", "client_id", name="pk_prediction_keys"),
    )
    op.create_index("ix_prediction_keys_predicted_at", "prediction_keys", ["predicted_at"])
    op.execute(
        "INSERT INTO prediction_keys (name, client_id, predicted_at) "
        "SELECT name, client_id, predicted_at FROM predictions"
    )
    postgresql = op.get_bind().dialect.name == "postgresql"
    _set_aside("predictions", "predictions_before_0005", postgresql)
    op.create_table(
        "predictions",
        *_columns(),
        sa.PrimaryKeyConstraint("name", "client_id", "predicted_at", name="pk_predictions"),
        postgresql_partition_by="RANGE (predicted_at)",
    )
    op.create_index("ix_predictions_name_predicted_at", "predictions", ["name", "predicted_at"])
    if postgresql:
        _partitions()
    op.execute(
        f"INSERT INTO predictions ({_COLUMNS}) SELECT {_COLUMNS} FROM predictions_before_0005"
    )
    op.drop_table("predictions_before_0005")


def _set_aside(table: str, aside: str, postgresql: bool) -> None:
    """Rename ``table`` to ``aside``, freeing the names the new table takes: its index, and
    on PostgreSQL its primary key's (an index there, named in the schema's namespace)."""
    op.rename_table(table, aside)
    op.drop_index("ix_predictions_name_predicted_at", table_name=aside)
    if postgresql:
        op.execute(f"ALTER TABLE {aside} RENAME CONSTRAINT pk_predictions TO pk_{aside}")


def _partitions() -> None:
    """The default partition, and one a day from the oldest logged row's day (or today's)
    to :data:`AHEAD_DAYS` past today."""
    op.execute("CREATE TABLE predictions_default PARTITION OF predictions DEFAULT")
    oldest = op.get_bind().scalar(sa.text("SELECT min(predicted_at) FROM predictions_before_0005"))
    today = datetime.now(UTC).date()
    day = min(today, oldest.astimezone(UTC).date()) if oldest is not None else today
    while day <= today + timedelta(days=AHEAD_DAYS):
        op.execute(
            f"CREATE TABLE predictions_p{day:%Y%m%d} PARTITION OF predictions "
            f"FOR VALUES FROM ('{_midnight(day)}') TO ('{_midnight(day + timedelta(days=1))}')"
        )
        day += timedelta(days=1)


def _midnight(day: date) -> str:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).isoformat()


def downgrade() -> None:
    """One plain table again, with its unique (name, client_id); the partitions go."""
    _set_aside("predictions", "predictions_after_0005", op.get_bind().dialect.name == "postgresql")
    op.create_table(
        "predictions",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        *_columns(),
        sa.PrimaryKeyConstraint("id", name="pk_predictions"),
        sa.UniqueConstraint("name", "client_id", name="uq_predictions_name_client_id"),
    )
    op.create_index("ix_predictions_name_predicted_at", "predictions", ["name", "predicted_at"])
    op.execute(
        f"INSERT INTO predictions ({_COLUMNS}) SELECT {_COLUMNS} FROM predictions_after_0005"
    )
    op.drop_table("predictions_after_0005")  # on PostgreSQL, with its partitions
    op.drop_table("prediction_keys")
