"""The read-only use cases of the web view (:mod:`app.ui`): what a page shows, in one read.

- :meth:`Browsing.calibrators_page`: a page of calibrators, each with its latest version and
  the versions its aliases serve (metrics, tags), from one snapshot and a fixed number of
  queries, and its live version's daily monitoring (one read per calibrator);
- a calibrator's page: :class:`app.service.live_view.LiveView`;
- :meth:`Browsing.comparison`: two versions' stored out-of-sample reliability curves
  overlaid (the reports of the diagnostics route, shared with it through its memo);
- :meth:`Browsing.monitoring`: the monitoring rows of a range and their figure
  (:meth:`TrafficCases.monitoring_figure`).

Knows no HTTP; the web view runs them as jobs of the bounded pool.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from app import figures
from app.errors import NotFound
from app.service.diagnosis import Diagnosis, Reports
from app.service.live_view import PRODUCTION, live_version
from app.service.reporting import DEFAULT_REPORT, ImageFormat
from app.service.traffic.cases import Monitored, MonitoringFigure, TrafficCases
from app.service.traffic.gathering import gather
from app.service.traffic.monitoring import Monitor
from app.store import CalibratorSummary, Database, Selector, VersionRecord

TREND_ROWS = 10_000
"""The most labelled predictions a calibrator's sparkline reads: past it the list shows a link
to the monitoring page instead. Reading them costs about 3 µs a row (0.28 s for 5 calibrators
of 20,000 on SQLite, measured), so a list of 50 calibrators at the bound is about 1.5 s of a
worker process (the list runs in one, away from the predicts). Daily sums kept as the
traffic is logged (issue 28's rollups) would lift the bound."""


@dataclass(frozen=True)
class Listed:
    """One calibrator of a list: its summary, the records of its latest version and of every
    version an alias serves (by number), every alias it has (by alias name), and the daily
    monitoring rows of its :attr:`live` version when asked (None without labelled traffic)."""

    summary: CalibratorSummary
    versions: dict[int, VersionRecord]
    aliases: dict[str, int]
    trend: list[dict[str, Any]] | None = None

    def served(self) -> list[tuple[int, tuple[str, ...]]]:
        """The versions its aliases serve, each with those aliases by name: the one
        ``production`` serves first, then by their first alias's name."""
        serving: dict[int, list[str]] = {}
        for alias in sorted(self.aliases, key=lambda a: (a != PRODUCTION, a)):
            serving.setdefault(self.aliases[alias], []).append(alias)
        return [(number, tuple(names)) for number, names in serving.items()]

    @property
    def live(self) -> int | None:
        """The version a client is most likely served: ``production``'s, else the first
        aliased one of :meth:`served`, else the latest (None without versions)."""
        return live_version(self.aliases, self.summary.latest_version)


@dataclass(frozen=True)
class CalibratorList:
    """A page of calibrators and how many match in all."""

    listed: list[Listed]
    total: int


@dataclass(frozen=True)
class StoredComparison:
    """Two versions' stored reports (a stored version's own, out of fold) and their curves
    overlaid."""

    first: Reports
    second: Reports
    picture: bytes


class Browsing:
    """What the web view reads, one use case per page."""

    def __init__(self, database: Database, diagnosis: Diagnosis, traffic: TrafficCases) -> None:
        self.database = database
        self.diagnosis = diagnosis
        self.traffic = traffic

    def calibrators_page(
        self,
        limit: int,
        offset: int,
        tag: tuple[str, str] | None = None,
        trend: tuple[datetime, datetime] | None = None,
    ) -> CalibratorList:
        """A page of the live calibrators in name order (with ``tag`` = (key, value): those
        with a version tagged so) and how many match in all, from one snapshot; with
        ``trend`` = (since, until), each one's :attr:`Listed.live` version's daily monitoring
        over that range too: one read of its labelled traffic (after the snapshot) per
        calibrator whose live version answered then, none for the others."""
        with self.database.transaction() as repo:
            summaries, total = repo.list_calibrators(limit, offset, tag)
            versions = repo.listed_versions(summaries)
            listed = [Listed(s, *versions[s.name]) for s in summaries]
            live = [(item.summary.name, item.live) for item in listed if item.live is not None]
            answered = set() if trend is None else repo.answered(live, *trend)
        if trend is not None:
            listed = [
                replace(item, trend=self._trend(item, *trend))
                if (item.summary.name, item.live) in answered
                else item
                for item in listed
            ]
        return CalibratorList(listed, total)

    def _trend(self, item: Listed, since: datetime, until: datetime) -> list[dict[str, Any]]:
        """The daily calibration of ``item``'s live version's labelled traffic in [since,
        until), as :meth:`TrafficCases.monitoring` gives it (the same
        :class:`~app.service.traffic.monitoring.Monitor` and stored hours, so the same
        numbers), without what needs the version's fitting batch (the shift, the prior's EM
        estimate); where no stored hour covers a day (and for a k-class version), from its
        labelled rows only, at most :data:`TREND_ROWS` of them (``n_predictions`` then counts
        the labelled ones)."""
        name, version = item.summary.name, item.live
        monitor = Monitor(since, until, "1d", {}, version=version)
        if version is None:
            return []
        with self.database.transaction() as repo:
            try:
                k_class = repo.get_version(name, version).n_classes > 2  # its rows are read
            except NotFound:  # deleted since the list was read
                return []
            if k_class or repo.rollup_start() > since:  # rows to read: counted first
                counts = repo.traffic_counts(name, since, until, version)
                if sum(labelled for _, labelled in counts.values()) > TREND_ROWS:
                    return []  # a list is no place to read that much: the monitoring page is
            gather(monitor, repo, name, version, labelled=True)
        return monitor.rows()

    def comparison(
        self, name: str, first: Selector, second: Selector, image_format: ImageFormat
    ) -> StoredComparison:
        """The two versions' reports of :meth:`Diagnosis.stored` (the diagnostics route's
        defaults) and their binned curves overlaid, drawn once per pair of versions. Both
        versions are looked up before either report is computed: a second version that does
        not exist is a 404 at once, not after the first one's bootstrap (a second of CPU on a few
        hundred rows, more on more)."""
        with self.database.transaction() as repo:
            numbers = [repo.get_version(name, selector).version for selector in (first, second)]
        reports = [self.diagnosis.stored(name, number, DEFAULT_REPORT) for number in numbers]
        key = ("stored-comparison", name, *(r.version for r in reports), image_format)

        def draw() -> bytes:
            named = [(f"v{r.version} {r.method} (out of fold)", r.calibrated) for r in reports]
            title = f"{name} · v{reports[0].version} and v{reports[1].version} on their own batches"
            return figures.render_comparison_diagram(named, title=title, image_format=image_format)

        picture = self.diagnosis.pictures.get_or_compute(key, draw)
        return StoredComparison(reports[0], reports[1], picture)

    def monitoring(
        self, name: str, monitored: Monitored, selector: Selector | None, image_format: ImageFormat
    ) -> MonitoringFigure:
        """The monitoring rows of the ``monitored`` range and their figure."""
        return self.traffic.monitoring_figure(
            name,
            monitored.window,
            monitored.since,
            monitored.until,
            selector,
            image_format,
            n_bins=monitored.n_bins,
        )
