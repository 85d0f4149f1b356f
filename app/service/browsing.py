"""The read-only use cases of the web view (:mod:`app.ui`): what a page shows, in one read.

- :meth:`Browsing.calibrators_page`: a page of calibrators, each with its latest version
  (metrics, tags) and its aliases, from one snapshot and a fixed number of queries;
- :meth:`Browsing.calibrator_page`: a calibrator, a page of its versions with their logged
  traffic and their stored diagnostics (reports and diagram), from one snapshot;
- :meth:`Browsing.comparison`: two versions' stored out-of-sample reliability curves
  overlaid (the reports of the diagnostics route, shared with it through its memo);
- :meth:`Browsing.monitoring`: the monitoring rows of a range and their figure
  (:meth:`TrafficCases.monitoring_figure`).

Knows no HTTP; the web view runs them as jobs of the bounded pool.
"""

from __future__ import annotations

from dataclasses import dataclass

from app import figures
from app.errors import NotFound, ServiceError, StoredDataCorrupt
from app.service.diagnosis import Diagnosis, Reports
from app.service.reporting import DEFAULT_REPORT, ImageFormat
from app.service.traffic.cases import Monitored, MonitoringFigure, TrafficCases
from app.store import CalibratorSummary, Database, Selector, VersionRecord


@dataclass(frozen=True)
class Listed:
    """One calibrator of a list: its summary, its latest version (None when it has none
    left) and every alias it has, by alias name."""

    summary: CalibratorSummary
    latest: VersionRecord | None
    aliases: dict[str, int]


@dataclass(frozen=True)
class CalibratorList:
    """A page of calibrators and how many match in all."""

    listed: list[Listed]
    total: int


@dataclass(frozen=True)
class StoredVersion:
    """A version as its page shows it: its record, its logged (predictions, labelled) in the
    range asked (None without traffic), and its stored reports and diagram, or the error
    that kept them (a version deleted meanwhile, a stored batch that cannot be read)."""

    record: VersionRecord
    traffic: tuple[int, int] | None
    reports: Reports | None
    picture: bytes | None
    problem: ServiceError | None


@dataclass(frozen=True)
class CalibratorRead:
    """A calibrator, a page of its versions (of ``total``) and its aliases."""

    summary: CalibratorSummary
    aliases: dict[str, int]
    versions: list[StoredVersion]
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
        self, limit: int, offset: int, tag: tuple[str, str] | None = None
    ) -> CalibratorList:
        """A page of the live calibrators in name order (with ``tag`` = (key, value): those
        with a version tagged so) and how many match in all."""
        with self.database.transaction() as repo:
            summaries, total = repo.list_calibrators(limit, offset, tag)
            latest = repo.latest_with_aliases(summaries)
        listed = [Listed(s, *latest[s.name]) for s in summaries]
        return CalibratorList(listed, total)

    def calibrator_page(
        self,
        name: str,
        limit: int,
        offset: int,
        monitored: Monitored,
        image_format: ImageFormat = "svg",
    ) -> CalibratorRead:
        """``name``, a page of its versions newest first with their traffic in the
        ``monitored`` range, and each one's stored reports and diagram: the rows (and the
        batches whose reports are not kept) in one snapshot, the numbers computed after."""
        with self.database.transaction() as repo:
            summary, records, total = repo.get_calibrator(name, limit, offset)
            aliases = repo.calibrator_aliases(name)
            traffic = repo.traffic_counts(name, monitored.since, monitored.until)
            batches = [self.diagnosis.batch_unless_kept(r, repo, image_format) for r in records]
        versions = []
        for record, data in zip(records, batches, strict=True):
            counts = traffic.get(record.version)
            try:
                reports, picture = self.diagnosis.reports_and_picture(record, data, image_format)
            except (NotFound, StoredDataCorrupt) as exc:
                versions.append(StoredVersion(record, counts, None, None, exc))
                continue
            versions.append(StoredVersion(record, counts, reports, picture, None))
        return CalibratorRead(summary, aliases, versions, total)

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

    def newest_two(self, name: str) -> tuple[int, int] | None:
        """The numbers of ``name``'s two newest versions, None when it has one."""
        with self.database.transaction() as repo:
            _, records, _ = repo.get_calibrator(name, 2, 0)
        return (records[0].version, records[1].version) if len(records) == 2 else None

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
