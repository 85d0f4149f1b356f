"""What a monitored range is read from: the stored hours where they cover it, the rows where
they do not.

A window's whole hours from the rollups' start on come from the rollups
(:mod:`app.store.traffic.rollups`), a few kilobytes an hour whatever the traffic; what is
left, the part of an hour at a window's edge when ``since`` is not on the hour and the hours
before the rollups' start, from the logged rows, summed the same way
(:meth:`~app.service.traffic.monitoring.Monitor.add_traffic`). A k-class version's rows are
read for every window they are in (the rollups mark its hours), as its figures still need
them.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from app.service.traffic.monitoring import Monitor
from app.store import Repository

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class Piece:
    """Part of a window: read from the stored hours, or from the rows."""

    start: datetime
    end: datetime
    stored: bool


def pieces(start: datetime, end: datetime, rolled_up_from: datetime) -> list[Piece]:
    """The window [start, end) as the rows before its first whole hour (or the rollups'
    start), its whole hours, and the rows after them; or all rows."""
    first = max(_ceil_hour(start), rolled_up_from)
    last = _floor_hour(end)
    if first >= last:
        return [Piece(start, end, stored=False)]
    found = [Piece(first, last, stored=True)]
    if start < first:
        found.insert(0, Piece(start, first, stored=False))
    if last < end:
        found.append(Piece(last, end, stored=False))
    return found


def answered(monitor: Monitor, repo: Repository, name: str, version: int | None) -> set[int]:
    """The versions that answered ``name`` in ``monitor``'s range (or the one ``version``):
    those of its stored hours and of the rows they do not cover."""
    rolled_up_from = repo.rollup_start()
    found = set(repo.rollup_versions(name, monitor.since, monitor.until, version))
    for w in range(monitor.count):
        for piece in pieces(*monitor.window_bounds(w), rolled_up_from):
            if not piece.stored:
                found.update(repo.traffic_counts(name, piece.start, piece.end, version))
    return found


def gather(
    monitor: Monitor,
    repo: Repository,
    name: str,
    version: int | None,
    *,
    labelled: bool = False,
) -> None:
    """Feed ``monitor`` ``name``'s traffic over its windows (of ``version``, or of all; for
    the rows it reads, the labelled ones only with ``labelled``), window by window in time
    order."""
    rolled_up_from = repo.rollup_start()
    windows = [monitor.window_bounds(w) for w in range(monitor.count)]
    plans = [pieces(start, end, rolled_up_from) for start, end in windows]
    stored = [piece for plan in plans for piece in plan if piece.stored]
    with_classes: set[int] = set()  # windows with k-class traffic in their stored hours
    if stored:
        starts = [piece.start for piece in stored]
        for hour, v, rollup in repo.rollups(name, stored[0].start, stored[-1].end, version):
            at = bisect_right(starts, hour) - 1
            if at < 0 or hour >= stored[at].end:
                continue  # an hour of a window's edge that the rows give
            if rollup is None:
                with_classes.add(monitor.window_of(hour))
            else:
                monitor.add_rollup(hour, v, rollup)
    for w, plan in enumerate(plans):
        k_class = w in with_classes
        for piece in plan:
            if piece.stored:
                continue
            chunks = repo.traffic_chunks(name, piece.start, piece.end, version, labelled=labelled)
            for chunk in chunks:
                k_class |= monitor.add_traffic(chunk)
        if k_class:
            start, end = windows[w]
            for v, rows in repo.class_row_chunks(name, start, end, version):
                monitor.add_class_rows(v, rows)


def _floor_hour(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _ceil_hour(moment: datetime) -> datetime:
    floor = _floor_hour(moment)
    return floor if floor == moment else floor + HOUR
