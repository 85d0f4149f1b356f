"""What a monitored range is read from: the stored days and hours where they cover it, the
rows where they do not.

A window's whole hours from the rollups' start on come from the rollups
(:mod:`app.store.traffic.rollups`), a few kilobytes an hour whatever the traffic: a whole day
that has been folded (:mod:`app.store.traffic.days`) from its stored day, the other hours
from theirs, a read of the runs of adjacent ones. What is left, the part of an hour at a
window's edge when ``since`` is not on the hour and the hours before the rollups' start, comes
from the logged rows, summed the same way
(:meth:`~app.service.traffic.monitoring.Monitor.add_traffic`,
:meth:`~app.service.traffic.monitoring.Monitor.add_class_rows`), one read for each run of
adjacent pieces.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from app.calibration import BinaryRollup, ClassRollup
from app.service.traffic.monitoring import Monitor
from app.store import DAY, HOUR, Repository, ceil_to, hour_of


@dataclass(frozen=True)
class Piece:
    """Part of a window: read from the stored hours, or from the rows."""

    start: datetime
    end: datetime
    stored: bool


def pieces(start: datetime, end: datetime, rolled_up_from: datetime) -> list[Piece]:
    """The window [start, end) as the rows before its first whole hour (or the rollups'
    start), its whole hours, and the rows after them; or all rows."""
    first = max(ceil_to(start, HOUR), rolled_up_from)
    last = hour_of(end)
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
    _, rows = _plan(monitor, repo.rollup_start())
    found = set(repo.rollup_versions(name, monitor.since, monitor.until, version))
    for piece in rows:
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
    the rows it reads, the labelled binary ones only with ``labelled``): the folded days
    that lie whole in a window and the stored hours of the rest, then the rows they do not
    cover, a run of adjacent pieces at a time, in time order. A k-class version's window
    with an hour marked before its rollups (a database upgraded with its traffic in it) is
    read from its rows whole, a run of adjacent windows at a time."""
    stored, rows = _plan(monitor, repo.rollup_start())
    marked: set[tuple[int, int]] = set()  # k-class windows with hours marked before rollups
    for start, v, rollup in _stored_rollups(repo, name, version, stored):
        if rollup is None:
            marked.add((monitor.window_of(start), v))
        else:
            monitor.add_rollup(start, v, rollup)
    for piece in rows:
        chunks = repo.traffic_chunks(name, piece.start, piece.end, version, labelled=labelled)
        for chunk in chunks:
            monitor.add_traffic(chunk)
        for v, class_rows in repo.class_row_chunks(name, piece.start, piece.end, version):
            monitor.add_class_rows(v, class_rows)
    for w, v in marked:
        monitor.forget(w, v)
    for v in sorted({v for _, v in marked}):
        for first, last in _runs(sorted(w for w, mine in marked if mine == v)):
            start, end = monitor.window_bounds(first)[0], monitor.window_bounds(last)[1]
            for _, class_rows in repo.class_row_chunks(name, start, end, v):
                monitor.add_class_rows(v, class_rows)


def counted(
    repo: Repository, name: str, since: datetime, until: datetime, version: int | None = None
) -> dict[int, tuple[int, int]]:
    """What :meth:`~app.store.traffic.reads.TrafficReads.traffic_counts` counts in [since,
    until): each version's (predictions, labelled), from the stored days and hours where they
    cover the range, the rest from the rows (and a k-class version's whose hours were marked
    before its rollups): pages and verdicts count a month without reading it."""
    stored, rows = _plan(Monitor(since, until, None, {}, version=version), repo.rollup_start())
    found: dict[int, tuple[int, int]] = {}
    marked: set[int] = set()  # versions with an hour marked before their rollups

    def add(v: int, n: int, labelled: int) -> None:
        before = found.get(v, (0, 0))
        found[v] = (before[0] + n, before[1] + labelled)

    for _, v, rollup in _stored_rollups(repo, name, version, stored):
        if rollup is None:
            marked.add(v)
        else:
            add(v, rollup.n, rollup.n_labelled)
    for v in marked:  # their stored hours count again from the rows
        found.pop(v, None)
    spans = [(piece.start, piece.end, version) for piece in rows]
    spans += [(start, end, v) for v in sorted(marked) for start, end in _spans(stored, set())]
    for start, end, wanted in spans:
        for v, (n, labelled) in repo.traffic_counts(name, start, end, wanted).items():
            add(v, n, labelled)
    return dict(sorted(found.items()))


def _stored_rollups(
    repo: Repository, name: str, version: int | None, stored: list[Piece]
) -> Iterator[tuple[datetime, int, BinaryRollup | ClassRollup | None]]:
    """The folded days that lie whole in one of the ``stored`` pieces, then the stored hours
    of the rest of them (None: a k-class version's marked before its rollups)."""
    days = _whole_days(stored)
    whole = set(days)
    folded: set[datetime] = set()
    if days:
        for day, v, rollup in repo.day_rollups(name, days[0], days[-1] + DAY, version):
            if day in whole:
                folded.add(day)
                yield day, v, rollup
    yield from repo.rollups_within(name, _spans(stored, folded), version)


def _plan(monitor: Monitor, rolled_up_from: datetime) -> tuple[list[Piece], list[Piece]]:
    """``monitor``'s windows as their stored pieces and their pieces of rows, each in time
    order, adjacent pieces of rows joined (a window's tail and the next one's head)."""
    stored: list[Piece] = []
    rows: list[Piece] = []
    for w in range(monitor.count):
        for piece in pieces(*monitor.window_bounds(w), rolled_up_from):
            if piece.stored:
                stored.append(piece)
            elif rows and rows[-1].end == piece.start:
                rows[-1] = Piece(rows[-1].start, piece.end, stored=False)
            else:
                rows.append(piece)
    return stored, rows


def _whole_days(stored: list[Piece]) -> list[datetime]:
    """The days that lie whole in one of the stored pieces, in time order."""
    days = []
    for piece in stored:
        day = ceil_to(piece.start, DAY)
        while day + DAY <= piece.end:
            days.append(day)
            day += DAY
    return days


def _spans(stored: list[Piece], folded: set[datetime]) -> list[tuple[datetime, datetime]]:
    """The stored pieces without the ``folded`` days, adjacent ones joined: where hours are
    read."""
    spans: list[tuple[datetime, datetime]] = []
    for piece in stored:
        start = piece.start
        while start < piece.end:
            if start in folded:
                start += DAY
                continue
            end = min(ceil_to(start + HOUR, DAY), piece.end)  # to the next midnight
            if spans and spans[-1][1] == start:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
            start = end
    return spans


def _runs(windows: list[int]) -> list[tuple[int, int]]:
    """Sorted window numbers as runs of adjacent ones, (first, last) each."""
    runs: list[tuple[int, int]] = []
    for w in windows:
        if runs and runs[-1][1] == w - 1:
            runs[-1] = (runs[-1][0], w)
        else:
            runs.append((w, w))
    return runs
