"""The tables monitoring reads in place of the prediction log: each binary version's hours
summed (:mod:`app.store.traffic.rollups`) and its finished days (:mod:`.days`), its fitting
batch's score bins, and since when the hours are summed."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from app.store.models import Base, UTCDateTime


class TrafficRollup(Base):
    """One binary version's predictions of one hour of a calibrator, summed
    (:class:`~app.calibration.BinaryRollup`, a few kilobytes): written with every flush of
    the log, and again when an outcome labels one of them."""

    __tablename__ = "traffic_rollups"
    __table_args__ = (Index("ix_traffic_rollups_hour", "hour"),)  # expiry

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    hour: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class TrafficRollupDay(Base):
    """One version's stored hours of one finished UTC day of a calibrator, summed (a k-class
    version's: marked, as its hours are) by :mod:`app.store.traffic.days`: what a window of
    a day or a week reads in place of its 24 hours."""

    __tablename__ = "traffic_rollup_days"
    __table_args__ = (Index("ix_traffic_rollup_days_day", "day"),)  # expiry

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    day: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class RollupFold(Base):
    """A calibrator's watermark: the first day whose hours are not folded into stored days."""

    __tablename__ = "traffic_rollup_folds"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    first_unfolded: Mapped[datetime] = mapped_column(UTCDateTime())


class StoredScoreReference(Base):
    """A binary version's score bins (:class:`~app.calibration.ScoreReference`): made with
    the version, or from its batch the first time its traffic is logged (a version fitted
    before these tables)."""

    __tablename__ = "score_references"

    version_id: Mapped[int] = mapped_column(
        ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True
    )
    data: Mapped[bytes] = mapped_column(LargeBinary)


class RollupStart(Base):
    """One row: the hour from which every logged prediction is in the rollups (the epoch for
    a database made with them; the hour after the upgrade for one that had traffic before)."""

    __tablename__ = "traffic_rollup_start"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
