"""Each calibrator's finished days of stored hours folded into one rollup a version: what a
window of a day or a week reads in place of its 24 hours (:mod:`app.service.traffic.gathering`).

A day is folded once it has been over for :data:`GRACE`, by the log's upkeep
(:meth:`RollupDays.fold_days`, under the calibrator's row lock), which moves the calibrator's
watermark, the first day not folded (``traffic_rollup_folds``), past it. The hours stay: a
window of an hour, or one whose edge is not on a day, reads them. From then on every write
to an hour before the watermark adds to its day as well (:meth:`RollupDays.add_rollups`, in
the same transaction and under the same lock), so a stored day, where there is one, sums its
hours: a reader takes a version's day or its hours, never both, and its figures differ only
by the rounding of the float32 sums each stored rollup keeps (docs/traffic.md). A folded
day stores every version with traffic that day, or none (folded without traffic, or
expired): a reader that finds one version's day has every version's there is.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta

from sqlalchemy import delete, or_, select

from app.store.models import Calibrator
from app.store.queries import upsert
from app.store.traffic.deltas import Key, Rollup
from app.store.traffic.periods import DAY, EPOCH, day_of
from app.store.traffic.rollups import Added, RollupOperations, add_to, decoded
from app.store.traffic.tables import RollupFold, TrafficRollup, TrafficRollupDay

GRACE = timedelta(hours=1)
"""How long after its end a day is folded: the flush of its last predictions comes before."""
FOLD_DAYS = 7
"""The most days of one calibrator one transaction folds (a backlog goes a week at a time)."""


class RollupDays(RollupOperations):
    """The hours' rollups, and their finished days folded and kept their sums."""

    def first_unfolded(self, name: str) -> datetime:
        """The first day of ``name`` not folded (the epoch before any fold)."""
        found = self._session.scalar(
            select(RollupFold.first_unfolded).where(RollupFold.name == name)
        )
        return found or EPOCH

    def names_to_fold(self, now: datetime) -> list[str]:
        """The live calibrators with a day over for :data:`GRACE` by ``now`` not yet folded."""
        before = day_of(now - GRACE)
        query = (
            select(Calibrator.name)
            .outerjoin(RollupFold, RollupFold.name == Calibrator.name)
            .where(
                Calibrator.deleted_at.is_(None),
                or_(RollupFold.first_unfolded.is_(None), RollupFold.first_unfolded < before),
            )
            .order_by(Calibrator.name)
        )
        return list(self._session.scalars(query))

    def fold_days(self, name: str, now: datetime, kept_from: datetime = EPOCH) -> bool:
        """Fold ``name``'s next days over for :data:`GRACE` by ``now``, at most
        :data:`FOLD_DAYS` of them from the first with a stored hour, under the calibrator's
        row lock; whether days are left to fold (404 for a calibrator deleted meanwhile).
        Only days after the one holding ``kept_from`` are folded: the retention's expiry,
        which another replica may be running, deletes the hours before it."""
        self._lock(name)
        before = day_of(now - GRACE)
        start = max(self.first_unfolded(name), day_of(kept_from) + DAY)
        if start >= before:
            return False  # folded that far already (by a replica whose clock is ahead)
        first = self._session.scalar(
            select(TrafficRollup.hour)
            .where(TrafficRollup.name == name, TrafficRollup.hour >= start)
            .where(TrafficRollup.hour < before)
            .order_by(TrafficRollup.hour)
            .limit(1)
        )
        end = before if first is None else min(day_of(first) + FOLD_DAYS * DAY, before)
        if first is not None:
            days: dict[tuple[datetime, int], Rollup | None] = {}
            for hour, version, rollup in self.rollups(name, day_of(first), end):
                _fold(days, (day_of(hour), version), rollup)
            for (day, version), summed in days.items():
                self._put_day(name, version, day, summed)
        self._session.execute(
            upsert(self._session, RollupFold)
            .values(name=name, first_unfolded=end)
            .on_conflict_do_update(index_elements=["name"], set_={"first_unfolded": end})
        )
        return end < before

    def add_rollups(self, deltas: Mapping[Key, Rollup]) -> list[Added]:
        """Add each rollup to its hour's (:meth:`RollupOperations.add_rollups`), and to its
        day's when the day is folded. A day takes the rollup as its hour did; it is summed
        afresh from its hours when the hour kept a count at zero, or the day would, or the
        version has no stored day yet."""
        added = super().add_rollups(deltas)
        watermarks: dict[str, datetime] = {}
        for (name, version, hour), delta, exact in added:
            if name not in watermarks:
                watermarks[name] = self.first_unfolded(name)
            if hour < watermarks[name]:
                self._add_to_day(name, version, day_of(hour), delta, exact)
        return added

    def day_rollups(
        self, name: str, since: datetime, until: datetime, version: int | None = None
    ) -> Iterator[tuple[datetime, int, Rollup | None]]:
        """The stored days of ``name`` (of one ``version``) that start in [since, until), in
        time order: a version's rollup, or None for a k-class version's day with an hour
        marked before its rollups. Read within the unit of work."""
        query = select(TrafficRollupDay.day, TrafficRollupDay.version, TrafficRollupDay.data)
        query = query.where(
            TrafficRollupDay.name == name,
            TrafficRollupDay.day >= since,
            TrafficRollupDay.day < until,
        )
        if version is not None:
            query = query.where(TrafficRollupDay.version == version)
        for day, v, data in self._session.execute(query.order_by(TrafficRollupDay.day)):
            yield day, v, decoded(data)

    def delete_rollups(self, name: str) -> None:
        """With the calibrator's traffic: its hours, days and watermark."""
        super().delete_rollups(name)
        self._session.execute(delete(TrafficRollupDay).where(TrafficRollupDay.name == name))
        self._session.execute(delete(RollupFold).where(RollupFold.name == name))

    def expire_rollups(self, cutoff: datetime) -> int:
        """Delete the hours that end by ``cutoff`` (:meth:`RollupOperations.expire_rollups`)
        and every day one of them was in; how many hours."""
        self._session.execute(delete(TrafficRollupDay).where(TrafficRollupDay.day < cutoff))
        return super().expire_rollups(cutoff)

    def _add_to_day(
        self, name: str, version: int, day: datetime, delta: Rollup, exact: bool
    ) -> None:
        """Add what went into an hour of ``day`` (folded) to the version's stored day."""
        stored = dict(
            self._session.execute(
                select(TrafficRollupDay.version, TrafficRollupDay.data).where(
                    TrafficRollupDay.name == name, TrafficRollupDay.day == day
                )
            ).all()
        )
        if not stored:
            return  # a day folded without traffic, or expired: its readers take its hours
        if stored.get(version) == b"":
            return  # a k-class day marked: its rows are read, this one's with them
        if stored.get(version) and exact:
            merged = add_to(decoded(stored[version]), delta)
            if not merged.clamp():
                self._put_day(name, version, day, merged)
                return
        days: dict[tuple[datetime, int], Rollup | None] = {}
        for _, _, rollup in self.rollups(name, day, day + DAY, version):
            _fold(days, (day, version), rollup)
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

    def _put_day(self, name: str, version: int, day: datetime, rollup: Rollup | None) -> None:
        """Store a version's day (None: a k-class version's mark) over the one stored."""
        data = b"" if rollup is None else rollup.to_bytes()
        self._session.execute(
            upsert(self._session, TrafficRollupDay)
            .values(name=name, day=day, version=version, data=data)
            .on_conflict_do_update(index_elements=["name", "day", "version"], set_={"data": data})
        )


def _fold(
    days: dict[tuple[datetime, int], Rollup | None],
    key: tuple[datetime, int],
    hour: Rollup | None,
) -> None:
    """Add a stored hour to its day's sum in ``days``. A k-class version's hour marked
    before its rollups (None) marks the day: its rows are read."""
    if hour is None or (key in days and days[key] is None):
        days[key] = None
        return
    days[key] = add_to(days.get(key), hour)
