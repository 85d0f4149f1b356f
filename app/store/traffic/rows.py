"""A logged prediction as a row of the prediction log, and the SQL that stages rows on
PostgreSQL before :class:`~app.store.traffic.log.TrafficOperations` keeps each id's first."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class LoggedPrediction(NamedTuple):  # a tuple: one is made per logged prediction
    """One prediction to log; binary versions fill ``score`` and ``probability``, k-class
    versions the rows (float64, little-endian)."""

    name: str
    client_id: str
    version: int
    predicted_at: datetime
    score: float | None = None
    probability: float | None = None
    scores_row: bytes | None = None
    probabilities_row: bytes | None = None


class LogCounts(NamedTuple):
    """What :meth:`TrafficOperations.log_predictions` did with its rows: ``new`` ones
    written, ``discarded`` ones of a version deleted before they were (the rest were
    duplicates)."""

    new: int
    discarded: int


COLUMNS = ", ".join(LoggedPrediction._fields)
"""The columns a logged prediction fills, in its fields' order."""

ROW_MARKS = f"({', '.join(['?'] * len(LoggedPrediction._fields))})"

STAGING = (
    "CREATE TEMP TABLE IF NOT EXISTS incoming_predictions (ord bigint NOT NULL, "
    "name text NOT NULL, client_id text NOT NULL, version integer NOT NULL, "
    "score float8, probability float8, scores_row bytea, probabilities_row bytea, "
    "predicted_at timestamptz NOT NULL, fresh smallint NOT NULL DEFAULT 0) "
    "ON COMMIT DELETE ROWS"
)
"""The session's staging table on PostgreSQL (emptied at every commit)."""

STAGED_TYPES = [
    "int8",
    "text",
    "text",
    "int4",
    "timestamptz",
    "float8",
    "float8",
    "bytea",
    "bytea",
]
"""The types of ``ord`` and the columns of :class:`LoggedPrediction`, for binary ``COPY``."""
