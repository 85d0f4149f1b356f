"""What each page of the web view shows: one dataclass per page, read through the service's
use cases (:class:`app.service.browsing.Browsing`, :class:`app.service.live_view.LiveView`).

Plain functions of the service and the page's parsed arguments, returning the page's data
and its HTTP status; the routes run them as jobs of the bounded pool. A calibrator's page
shows one version in full, the live one unless another is asked: only its diagram and
reports cost a read of its fitting batch (the first time), the others are rows of a table,
:data:`VERSIONS_PER_PAGE` a page, newest first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup

from app.calibration import Report
from app.errors import NotFound, ServiceError
from app.service.estimates import Decision, tagged_costs
from app.service.live_view import EXPECTED_DAYS, ShownVersion, live_version
from app.service.reporting import DEFAULT_REPORT, Curve
from app.service.traffic.cases import Monitored
from app.service.use_cases import CalibrationService
from app.store import AliasMoved, CalibratorSummary, Selector, VersionRecord

from .svg import inline_svg
from .templating import moment

VERSIONS_PER_PAGE = 50
MAX_CHOICES = 1000
"""The versions a select list offers, newest first."""
MAX_PAGE = 10**9
_PAGE = re.compile(r"^[0-9]{1,10}$")

PageAnswer = tuple[Any, int]
"""A page's data and the HTTP status it is answered with."""


def page_number(text: str | None) -> int:
    """``?page=``: a whole number from 1 (1 when absent); 404 for anything else."""
    if text is None or text == "":
        return 1
    if not _PAGE.match(text) or not 1 <= int(text) <= MAX_PAGE:
        raise NotFound(f"there is no page {text[:24]!r}")
    return int(text)


@dataclass(frozen=True)
class PagerLinks:
    """This page's number, how many pages, and the links to the previous and next ones
    (None at either end)."""

    page: int
    pages: int
    previous: str | None
    next: str | None


def pager_links(number: int, total: int, per_page: int, **query: str | None) -> PagerLinks:
    """The :class:`PagerLinks` of page ``number`` keeping the other ``query`` parameters
    that are set."""
    last = max(1, -(-total // per_page))
    kept = {key: value for key, value in query.items() if value}

    def link(to: int) -> str:
        return "?" + urlencode({**kept, "page": to})

    return PagerLinks(
        number,
        last,
        link(number - 1) if number > 1 else None,
        link(number + 1) if number < last else None,
    )


def headline(record: VersionRecord | None) -> Mapping[str, Any]:
    """A version's cross-validated metrics (with their intervals), the ones
    :data:`app.ui.templating.HEADLINE_METRICS` shows; none without a version."""
    if record is None:
        return {}
    cv: Mapping[str, Any] = record.metrics.get("cv") or {}
    return cv


def binning(report: Report) -> str:
    """How a report's bins were made, as its caption says it: ``10 uniform bins``."""
    return f"{len(report.bins.count)} {DEFAULT_REPORT.strategy} bins"


@dataclass(frozen=True)
class VersionPanel:
    """The version a calibrator page shows in full: its record and headline metrics, its
    stored diagnostics (the calibrated and raw reports as the diagnostics route writes them,
    how they were binned) and its diagram, or the error that kept them; ``traffic`` its
    (predictions, labelled) in the monitored range, ``expected`` its daily expected and
    realized performance on the last days' traffic (None: too much to read here), and the
    decision its tagged costs call for."""

    record: VersionRecord
    headline: Mapping[str, Any]
    reports: dict[str, Any] | None
    binning: str
    diagram: Markup | None
    problem: ServiceError | None
    traffic: tuple[int, int] | None
    expected: list[dict[str, Any]] | None
    decision: Decision | None = None


@dataclass(frozen=True)
class CalibratorPage:
    """The calibrator page: the version shown (None without versions), whether it is the
    live one, how its curve is drawn, and the rest of the calibrator as rows."""

    name: str
    summary: CalibratorSummary
    aliases: dict[str, int]
    moves: list[AliasMoved]
    panel: VersionPanel | None
    live: bool
    curve: Curve
    records: list[VersionRecord]
    traffic: dict[int, tuple[int, int]]
    total: int
    monitored: Monitored
    pager: PagerLinks
    kept: dict[str, str]  # what a link to another version keeps: the curve, the table's page
    expected_days: int = EXPECTED_DAYS


def calibrator(
    service: CalibrationService,
    name: str,
    selector: Selector | None,
    number: int,
    monitored: Monitored,
    curve: Curve,
) -> CalibratorPage:
    """The calibrator page: the version ``selector`` names (None: the live one) in full, and
    page ``number`` of its versions as a table."""
    view = service.live_view.read(
        name, selector, (VERSIONS_PER_PAGE, (number - 1) * VERSIONS_PER_PAGE), monitored, curve
    )
    if number > 1 and not view.records:
        raise NotFound(f"{name!r} has no page {number} of versions")
    panel = None if view.shown is None else _decided(service, _panel(view.shown, curve))
    live = panel is not None and panel.record.version == live_version(
        view.aliases, view.summary.latest_version
    )
    version = None if selector is None else str(selector)
    pager = pager_links(number, view.total, VERSIONS_PER_PAGE, version=version, curve=curve)
    kept = {"curve": curve, **({"page": str(number)} if number > 1 else {})}
    return CalibratorPage(
        name,
        view.summary,
        view.aliases,
        view.moves,
        panel,
        live,
        curve,
        view.records,
        view.traffic,
        view.total,
        monitored,
        pager,
        kept,
    )


def _decided(service: CalibrationService, panel: VersionPanel) -> VersionPanel:
    """The panel with the decision its version's tagged costs call for
    (:func:`~app.service.estimates.tagged_costs`), if any and it can be computed."""
    record = panel.record
    costs = tagged_costs(record.tags)
    if costs is None or record.n_classes != 2 or panel.problem is not None:
        return panel
    try:
        decision = service.estimates.decision(record.name, record.version, costs)
    except ServiceError:
        return panel  # deleted meanwhile, or its batch unreadable: the panel says the rest
    return replace(panel, decision=decision)


def _panel(shown: ShownVersion, curve: Curve) -> VersionPanel:
    """The shown version's panel; a version deleted meanwhile, or whose stored batch cannot
    be read, says so in its panel instead of failing the page."""
    record = shown.record
    cv = headline(record)
    if shown.reports is None or shown.picture is None:
        return VersionPanel(
            record, cv, None, "", None, shown.problem, shown.traffic, shown.expected
        )
    drawn = (
        "the smooth reliability curve (kernel-smoothed fraction of positives) with its 95% band"
        if curve == "smooth"
        else "fraction of positives against mean predicted probability per bin"
    )
    label = (
        f"Reliability diagram of {record.name} version {record.version} ({record.method}): "
        f"{drawn}, calibrated and raw, with the histogram of predictions beneath; the tables "
        "below hold its numbers."
    )
    reports = shown.reports
    document = {"calibrated": reports.calibrated.as_json(), "raw": reports.raw.as_json()}
    diagram = inline_svg(shown.picture, prefix=f"v{record.version}", label=label)
    return VersionPanel(
        record,
        cv,
        document,
        binning(reports.calibrated),
        diagram,
        None,
        shown.traffic,
        shown.expected,
    )


@dataclass(frozen=True)
class MonitoringPage:
    """The monitoring page: the range, the version asked (None: all), the windows with
    traffic and the figure over the whole range."""

    name: str
    monitored: Monitored
    version: Selector | None
    rows: list[dict[str, Any]]
    diagram: Markup
    versions: list[Choice]  # the version select's options
    aliases: list[Choice]


def monitoring(
    service: CalibrationService, name: str, monitored: Monitored, selector: Selector | None
) -> MonitoringPage:
    """The monitoring page: the windows with traffic, and the figure over the whole range."""
    drawn = service.browsing.monitoring(name, monitored, selector, "svg")
    label = (
        f"Monitoring of {name} over {monitored.window} windows: calibration error and log "
        "loss, mean predicted against observed rate, score shift and traffic; the table "
        "below holds the windows with traffic."
    )
    rows = [row for row in drawn.rows if row.get("n_predictions")]
    diagram = inline_svg(drawn.picture, prefix="monitoring", label=label)
    offered = version_choices(service, name, *([] if selector is None else [str(selector)]))
    return MonitoringPage(name, monitored, selector, rows, diagram, offered.versions, offered.named)


def monitoring_rows(
    service: CalibrationService, name: str, monitored: Monitored, selector: Selector | None
) -> list[dict[str, Any]]:
    """The rows of the monitoring page's windows, as ``GET …/monitoring`` answers them."""
    return service.traffic.monitoring(
        name, monitored.window, monitored.since, monitored.until, selector
    )


@dataclass(frozen=True)
class Choice:
    """An option of a version select: the selector it sends and what it reads."""

    value: str
    text: str


@dataclass(frozen=True)
class Choices:
    """What a version select offers: ``versions``, newest first (at most
    :data:`MAX_CHOICES`, and the one asked if older), and ``named``, the aliases then
    ``latest``; the records and aliases they were made from."""

    records: list[VersionRecord]
    aliases: dict[str, int]
    versions: list[Choice]
    named: list[Choice]


def version_choices(service: CalibrationService, name: str, *asked: str) -> Choices:
    """The options of a page's version selects, by one read of the calibrator, with the
    selectors ``asked`` among them."""
    view = service.calibrators.get(name, MAX_CHOICES, 0)
    records, aliases = view.versions, view.aliases
    versions = [
        Choice(str(r.version), f"v{r.version} · {r.method} · {moment(r.created_at)}")
        for r in records
    ]
    named = [Choice(alias, f"{alias} → v{v}") for alias, v in sorted(aliases.items())]
    if records:
        named.append(Choice("latest", f"latest → v{records[0].version}"))
    for value in asked:
        if value.isdigit() and value not in {c.value for c in (*versions, *named)}:
            versions.append(Choice(value, f"v{value}"))  # older than the newest MAX_CHOICES
    return Choices(records, aliases, versions, named)
