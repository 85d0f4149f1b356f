"""Each calibrator's finished days of stored hours folded into one rollup a version: what a
window of a day or a week reads in place of its 24 hours (:mod:`app.service.traffic.gathering`).

A day is folded once it has been over for :data:`GRACE`, by the log's upkeep
(:meth:`RollupDays.fold_days`, under the calibrator's row lock), which advances the
calibrator's watermark past it (``traffic_rollup_folds``). The hours stay: a window of an
hour, or one whose edge is not on a day, reads them. From then on every write to an hour of a
folded day adds to its day as well (:meth:`RollupDays.add_to_day`, in the same transaction
and under the same lock as the hour's), so a stored day, where there is one, is always the
sum of its hours: a reader takes a version's day or its hours, never both, and gets the same
figures either way. A writer looks for a folded day only for an hour before its own day,
which holds as long as the replicas' clocks agree to within :data:`GRACE`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta

from sqlalchemy import delete, or_, select

from app.calibration import BinaryRollup
from app.store.models import Calibrator
from app.store.queries import upsert
from app.store.session import RepositoryBase
from app.store.traffic.periods import DAY, EPOCH, day_of
from app.store.traffic.tables import RollupFold, TrafficRollup, TrafficRollupDay

logger = logging.getLogger("app.traffic")

GRACE = timedelta(hours=1)
"""How long after its end a day is folded: a flush of its last predictions, or a replica
whose clock lags by less, still writes its hours before."""
FOLD_DAYS = 7
"""The most days of one calibrator one transaction folds (a backlog goes a week at a time)."""


class RollupDays(RepositoryBase):
    """Fold finished days of stored hours; keep the folded ones the sums of their hours."""

    def folded_through(self, name: str) -> datetime:
        """The first day of ``name`` not folded (the epoch before any fold)."""
        found = self._session.scalar(select(RollupFold.through).where(RollupFold.name == name))
        return found or EPOCH

    def names_to_fold(self, now: datetime) -> list[str]:
        """The live calibrators with a day over for :data:`GRACE` by ``now`` not yet folded."""
        before = day_of(now - GRACE)
        query = (
            select(Calibrator.name)
            .outerjoin(RollupFold, RollupFold.name == Calibrator.name)
            .where(
                Calibrator.deleted_at.is_(None),
                or_(RollupFold.through.is_(None), RollupFold.through < before),
            )
            .order_by(Calibrator.name)
        )
        return list(self._session.scalars(query))

    def fold_days(self, name: str, now: datetime) -> bool:
        """Fold ``name``'s next days over for :data:`GRACE` by ``now``, at most
        :data:`FOLD_DAYS` of them from the first with a stored hour, under the calibrator's
        row lock; whether days are left to fold (404 for a calibrator deleted meanwhile)."""
        self._lock(name)
        before = day_of(now - GRACE)
        start = self.folded_through(name)
        first = self._session.scalar(
            select(TrafficRollup.hour)
            .where(TrafficRollup.name == name, TrafficRollup.hour >= start)
            .where(TrafficRollup.hour < before)
            .order_by(TrafficRollup.hour)
            .limit(1)
        )
        end = before if first is None else min(day_of(first) + FOLD_DAYS * DAY, before)
        if first is not None:
            days: dict[tuple[datetime, int], BinaryRollup | None] = {}
            for hour, version, data in self._session.execute(
                select(TrafficRollup.hour, TrafficRollup.version, TrafficRollup.data).where(
                    TrafficRollup.name == name,
                    TrafficRollup.hour >= day_of(first),
                    TrafficRollup.hour < end,
                )
            ):
                _fold(days, (day_of(hour), version), data)
            for (day, version), rollup in days.items():
                self._put_day(name, version, day, rollup)
        self._session.execute(
            upsert(self._session, RollupFold)
            .values(name=name, through=end)
            .on_conflict_do_update(index_elements=["name"], set_={"through": end})
        )
        return end < before

    def add_to_day(
        self, name: str, version: int, hour: datetime, delta: BinaryRollup | None, exact: bool
    ) -> None:
        """After ``delta`` went into the stored hour ``hour`` of a folded day: add it to the
        day's too (None: mark a k-class version's day). ``exact``: the hour took it as it
        was (not kept at zero by :meth:`~app.calibration.BinaryRollup.clamp`); otherwise, or
        when the version has no stored day yet, the day is summed afresh from its hours.

        A folded day stores every version with traffic in it, or none (one folded without
        traffic, or expired: its hours are read): so a reader that finds one version's day
        finds every version's there is."""
        day = day_of(hour)
        stored = dict(
            self._session.execute(
                select(TrafficRollupDay.version, TrafficRollupDay.data).where(
                    TrafficRollupDay.name == name, TrafficRollupDay.day == day
                )
            ).all()
        )
        if not stored:
            return  # a day folded without traffic, or expired: its readers take its hours
        if delta is None:
            self._put_day(name, version, day, None, replace=False)
        elif stored.get(version) and exact:
            merged = BinaryRollup.from_bytes(stored[version])
            merged.add(delta)
            if merged.clamp():
                self._refold(name, version, day)
            else:
                self._put_day(name, version, day, merged)
        else:  # the version's first traffic of the day, or an hour kept at zero
            self._refold(name, version, day)

    def day_rollups(
        self, name: str, since: datetime, until: datetime, version: int | None = None
    ) -> Iterator[tuple[datetime, int, BinaryRollup | None]]:
        """The stored days of ``name`` (of one ``version``) that start in [since, until), in
        time order: a binary version's rollup, or None for a k-class version's day with
        traffic. Read within the unit of work."""
        query = select(TrafficRollupDay.day, TrafficRollupDay.version, TrafficRollupDay.data)
        query = query.where(
            TrafficRollupDay.name == name,
            TrafficRollupDay.day >= since,
            TrafficRollupDay.day < until,
        )
        if version is not None:
            query = query.where(TrafficRollupDay.version == version)
        for day, v, data in self._session.execute(query.order_by(TrafficRollupDay.day)):
            yield day, v, BinaryRollup.from_bytes(data) if data else None

    def delete_days(self, name: str) -> None:
        """With the calibrator's traffic: its days and its watermark."""
        self._session.execute(delete(TrafficRollupDay).where(TrafficRollupDay.name == name))
        self._session.execute(delete(RollupFold).where(RollupFold.name == name))

    def expire_days(self, cutoff: datetime) -> None:
        """Delete the days that have an hour ending by ``cutoff`` (their hours expire)."""
        self._session.execute(delete(TrafficRollupDay).where(TrafficRollupDay.day < cutoff))

    def _refold(self, name: str, version: int, day: datetime) -> None:
        """Sum the version's day afresh from its stored hours."""
        days: dict[tuple[datetime, int], BinaryRollup | None] = {}
        for data in self._session.scalars(
            select(TrafficRollup.data).where(
                TrafficRollup.name == name,
                TrafficRollup.version == version,
                TrafficRollup.hour >= day,
                TrafficRollup.hour < day + DAY,
            )
        ):
            _fold(days, (day, version), data)
        if (day, version) in days:
            self._put_day(name, version, day, days[day, version])
        else:  # its hours have expired
            self._session.execute(
                delete(TrafficRollupDay).where(
                    TrafficRollupDay.name == name,
                    TrafficRollupDay.day == day,
                    TrafficRollupDay.version == version,
                )
            )

    def _put_day(
        self,
        name: str,
        version: int,
        day: datetime,
        rollup: BinaryRollup | None,
        *,
        replace: bool = True,
    ) -> None:
        """Store a version's day (None: a k-class version's mark), over the one stored unless
        ``replace`` is false."""
        data = b"" if rollup is None else rollup.to_bytes()
        statement = upsert(self._session, TrafficRollupDay).values(
            name=name, day=day, version=version, data=data
        )
        keys = ["name", "day", "version"]
        self._session.execute(
            statement.on_conflict_do_update(index_elements=keys, set_={"data": data})
            if replace
            else statement.on_conflict_do_nothing(index_elements=keys)
        )


def _fold(
    days: dict[tuple[datetime, int], BinaryRollup | None],
    key: tuple[datetime, int],
    data: bytes,
) -> None:
    """Add a stored hour (``b""``: a k-class version's mark) to its day's sum in ``days``."""
    if not data:
        days.setdefault(key, None)
        return
    hour = BinaryRollup.from_bytes(data)
    summed = days.get(key)
    if summed is None:
        summed = days[key] = BinaryRollup(hour.scores.size)
    summed.add(hour)
