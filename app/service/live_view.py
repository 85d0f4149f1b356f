"""A calibrator as its page shows it: one version in full, by default the live one, and the
others as rows (:meth:`LiveView.read`).

The page used to stack every version's diagram and tables, five a page, so the version
being served was wherever its number put it. Now the version shown is the one asked, else
the one clients are most likely served (:func:`live_version`); only its reports and diagram
are computed, its expected performance on the last days' traffic is read when there is some,
and the rest of the calibrator costs rows: a page of version records, the aliases and
their recorded moves, the traffic counts.

Knows no HTTP; the web view runs it as a job of the bounded pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.errors import NotFound, ServiceError, StoredDataCorrupt
from app.service.diagnosis import BatchBytes, Diagnosis, Reports
from app.service.memo import Memo
from app.service.reporting import Curve
from app.service.traffic.cases import Monitored, TrafficCases
from app.service.traffic.gathering import counted
from app.store import AliasMoved, CalibratorSummary, Database, Selector, VersionRecord

PRODUCTION = "production"
"""The alias the web view shows first: by convention, the version clients are served."""
EXPECTED_DAYS = 7
"""The days of traffic whose expected and realized performance the shown version's page
tabulates, one row a day."""
EXPECTED_ROWS = 200_000
"""The most logged predictions of those days the page reads (about a second of a worker's
CPU); past it the page links to the monitoring, which is made for that much."""
EXPECTED_KEPT = 64
"""Versions' expected-performance tables kept (a few kilobytes each)."""
MOVES_SHOWN = 20
"""The aliases' latest moves a page lists."""


def live_version(aliases: dict[str, int], latest: int | None) -> int | None:
    """The version a client is most likely served: ``production``'s, else the one of the
    first alias by name, else the latest (None without versions)."""
    if PRODUCTION in aliases:
        return aliases[PRODUCTION]
    return aliases[min(aliases)] if aliases else latest


@dataclass(frozen=True)
class ShownVersion:
    """The version a page shows in full: its record, its logged (predictions, labelled) in
    the range asked (None without traffic), its stored reports and diagram or the error that
    kept them (deleted meanwhile, a stored batch that cannot be read), and its daily
    monitoring rows of the last :data:`EXPECTED_DAYS` days with traffic (None: more than
    :data:`EXPECTED_ROWS` to read)."""

    record: VersionRecord
    traffic: tuple[int, int] | None
    reports: Reports | None
    picture: bytes | None
    problem: ServiceError | None
    expected: list[dict[str, Any]] | None


@dataclass(frozen=True)
class CalibratorView:
    """A calibrator: its summary and aliases, the aliases' latest moves, a page of its
    version records newest first (of ``total``) with each one's traffic counts, and the
    version shown in full (None when it has no versions left)."""

    summary: CalibratorSummary
    aliases: dict[str, int]
    moves: list[AliasMoved]
    records: list[VersionRecord]
    traffic: dict[int, tuple[int, int]]
    total: int
    shown: ShownVersion | None


class LiveView:
    """Reads :class:`CalibratorView`."""

    def __init__(self, database: Database, diagnosis: Diagnosis, traffic: TrafficCases) -> None:
        self.database = database
        self.diagnosis = diagnosis
        self.traffic = traffic
        self.expected: Memo[list[dict[str, Any]]] = Memo(EXPECTED_KEPT)
        """The shown versions' daily monitoring, by version, days and traffic counts."""

    def read(
        self,
        name: str,
        selector: Selector | None,
        page: tuple[int, int],
        monitored: Monitored,
        curve: Curve,
    ) -> CalibratorView:
        """``name`` with the (limit, offset) ``page`` of its versions and the version
        ``selector`` names (None: :func:`live_version`) in full, its diagram drawing
        ``curve``: the rows, the shown version's traffic counts of the last
        :data:`EXPECTED_DAYS` days and its batch (unless its reports are kept) in one
        snapshot, the numbers after. An unknown selector is a 404, as on the API."""
        recent = monitored.until - timedelta(days=EXPECTED_DAYS), monitored.until
        with self.database.transaction() as repo:
            summary, records, total = repo.get_calibrator(name, *page)
            aliases = repo.calibrator_aliases(name)
            moves = repo.alias_moves(name, MOVES_SHOWN)
            traffic = counted(repo, name, monitored.since, monitored.until)
            if selector is None:
                selector = live_version(aliases, summary.latest_version)
            record = None if selector is None else repo.get_version(name, selector)
            if record is not None:
                counts = counted(repo, name, *recent, record.version)
                data = self.diagnosis.batch_unless_kept(record, repo, "svg", curve)
        shown = None
        if record is not None:
            expected = self._expected(record, recent, counts.get(record.version, (0, 0)))
            shown = self._shown(record, data, traffic.get(record.version), expected, curve)
        return CalibratorView(summary, aliases, moves, records, traffic, total, shown)

    def _shown(
        self,
        record: VersionRecord,
        data: BatchBytes,
        counts: tuple[int, int] | None,
        expected: list[dict[str, Any]] | None,
        curve: Curve,
    ) -> ShownVersion:
        try:
            reports, picture = self.diagnosis.reports_and_picture(record, data, "svg", curve)
        except (NotFound, StoredDataCorrupt) as exc:
            return ShownVersion(record, counts, None, None, exc, expected)
        return ShownVersion(record, counts, reports, picture, None, expected)

    def _expected(
        self, record: VersionRecord, recent: tuple[datetime, datetime], counts: tuple[int, int]
    ) -> list[dict[str, Any]] | None:
        """The daily monitoring of ``record``'s traffic in the ``recent`` days (expected
        against realized performance, the prior), the days with traffic only; [] without
        any, None past :data:`EXPECTED_ROWS`. Kept while the version's (predictions,
        labelled) ``counts`` there stay the same: a view with no new traffic nor outcome
        costs no read of it (an outcome overwritten in place is seen when the counts move)."""
        if counts[0] == 0:
            return []
        if counts[0] > EXPECTED_ROWS:
            return None

        def compute() -> list[dict[str, Any]]:
            try:
                rows = self.traffic.monitoring(record.name, "1d", *recent, record.version)
            except NotFound:  # deleted since the snapshot: its panel says the rest
                return []
            return [row for row in rows if row.get("n_predictions")]

        return self.expected.get_or_compute((record.name, record.version, *recent, counts), compute)
