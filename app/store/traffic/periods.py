"""The UTC hours and days the rollups sum traffic by, cut alike by every replica."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

HOUR, DAY = timedelta(hours=1), timedelta(days=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def hour_of(moment: datetime) -> datetime:
    """The start of the UTC hour that holds ``moment`` (a time without a zone is UTC)."""
    return _utc(moment).replace(minute=0, second=0, microsecond=0)


def day_of(moment: datetime) -> datetime:
    """The start of the UTC day that holds ``moment`` (a time without a zone is UTC)."""
    return _utc(moment).replace(hour=0, minute=0, second=0, microsecond=0)


def midnight(day: date) -> datetime:
    """The first instant of ``day`` (UTC)."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def ceil_to(moment: datetime, width: timedelta) -> datetime:
    """The first multiple of ``width`` (an hour or a day) from the epoch at or after
    ``moment``."""
    since = _utc(moment) - EPOCH
    return EPOCH + -(-since // width) * width


def _utc(moment: datetime) -> datetime:
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC)
