"""The dialect's details the traffic tables' plain SQL needs: placeholders, how a time is
sent, and chunks of a long list."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session


def postgresql(session: Session) -> bool:
    """Whether ``session`` works on PostgreSQL (else SQLite)."""
    return session.get_bind().dialect.name == "postgresql"


def placeholder(session: Session) -> str:
    """The driver's parameter mark: ``%s`` (psycopg) or ``?`` (sqlite3)."""
    return "%s" if postgresql(session) else "?"


def sqlite_time(moment: datetime) -> str:
    """As SQLAlchemy's DateTime stores a UTC instant on SQLite (naive, microseconds)."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def time_param(session: Session, moment: datetime) -> Any:
    """``moment`` as a parameter of plain SQL: as SQLAlchemy stores it on SQLite
    (:func:`sqlite_time`), unchanged for psycopg."""
    return moment if postgresql(session) else sqlite_time(moment)


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """``items`` ``size`` at a time."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
