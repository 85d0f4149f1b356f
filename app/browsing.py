"""The read-only use cases of the web view (:mod:`app.ui`): what a page shows in one read.

- :meth:`Browsing.overview`: a page of calibrators, each with its latest version (metrics,
  tags) and its aliases, from one snapshot;
- :meth:`Browsing.traffic`: which versions answered logged predictions in a range, counted in
  the database (cheap enough to ask on every page, unlike the monitoring itself);
- :meth:`Browsing.stored_comparison`: two versions' stored out-of-sample reliability
  curves overlaid (the reports of the diagnostics route, shared with it through its memo);
- :meth:`Browsing.monitoring`: the monitoring rows of a range and their figure, from one
  read of the traffic.

Knows no HTTP; the web view runs the heavy ones as jobs of the bounded pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.diagnosis import DEFAULT_REPORT, Diagnosis, ImageFormat, Reports
from app.diagrams import render_comparison_diagram
from app.monitoring import Window
from app.store import CalibratorSummary, Database, Selector, VersionRecord
from app.traffic_cases import TrafficCases, monitoring_figure


@dataclass(frozen=True)
class Listed:
    """One calibrator of a list: its summary, its latest version (None when it has none
    left) and every alias it has, by alias name."""

    summary: CalibratorSummary
    latest: VersionRecord | None
    aliases: dict[str, int]


@dataclass(frozen=True)
class StoredComparison:
    """Two versions' stored reports (a stored version's own, out of fold) and their curves
    overlaid."""

    first: Reports
    second: Reports
    picture: bytes


class Browsing:
    """What the web view reads, one transaction a call."""

    def __init__(self, database: Database, diagnosis: Diagnosis, live: TrafficCases) -> None:
        self.database = database
        self.diagnosis = diagnosis
        self.live = live

    def overview(
        self, limit: int, offset: int, tag: tuple[str, str] | None = None
    ) -> tuple[list[Listed], int]:
        """A page of the live calibrators in name order (with ``tag`` = (key, value): those
        with a version tagged so) and how many match in all."""
        with self.database.transaction() as repo:
            summaries, total = repo.list_calibrators(limit, offset, tag)
            listed = [
                Listed(
                    summary,
                    None
                    if summary.latest_version is None
                    else repo.get_version(summary.name, summary.latest_version),
                    repo.calibrator_aliases(summary.name),
                )
                for summary in summaries
            ]
        return listed, total

    def traffic(self, name: str, since: datetime, until: datetime) -> dict[int, tuple[int, int]]:
        """Each version of ``name`` that answered logged predictions in [since, until): its
        (predictions, labelled) counts."""
        with self.database.transaction() as repo:
            return repo.traffic_counts(name, since, until)

    def stored_comparison(
        self, name: str, first: Selector, second: Selector, image_format: ImageFormat
    ) -> StoredComparison:
        """The two versions' reports of :meth:`Diagnosis.stored` (the diagnostics route's
        defaults) and their binned curves overlaid, drawn once per pair of versions."""
        reports = [self.diagnosis.stored(name, s, DEFAULT_REPORT) for s in (first, second)]
        key = ("stored-comparison", name, *(r.version for r in reports), image_format)

        def draw() -> bytes:
            named = [(f"v{r.version} {r.method} (out of fold)", r.calibrated) for r in reports]
            title = f"{name} · v{reports[0].version} and v{reports[1].version} on their own batches"
            return render_comparison_diagram(named, title=title, image_format=image_format)

        picture = self.diagnosis.pictures.get_or_compute(key, draw)
        return StoredComparison(reports[0], reports[1], picture)

    def monitoring(
        self,
        name: str,
        window: Window,
        since: datetime,
        until: datetime,
        selector: Selector | None,
        image_format: ImageFormat,
    ) -> tuple[list[dict[str, Any]], bytes]:
        """The monitoring rows of [since, until) (:meth:`TrafficCases.monitoring`) and
        their figure, from one read of the traffic."""
        rows = self.live.monitoring(name, window, since, until, selector)
        figure = monitoring_figure(rows, name, window, since, until, selector, image_format)
        return rows, figure
