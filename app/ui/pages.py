"""What each page of the web view shows, read through the service layer.

Plain functions of the service and the page's parsed arguments, returning the template's
context; the routes run the heavy ones (diagrams, reports, traffic) as jobs of the bounded
pool. Versions are shown :data:`VERSIONS_PER_PAGE` at a time, newest first: each one's
diagram and report cost a read of its fitting batch the first time, so a calibrator with 500
versions still answers its first page in the time of five.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup

from app.api.traffic import Monitored
from app.browsing import Listed
from app.diagnosis import DEFAULT_REPORT
from app.errors import NotFound, StoredDataCorrupt
from app.service import CalibrationService
from app.store import Selector, VersionRecord

from .svg import inline_svg

CALIBRATORS_PER_PAGE = 50
VERSIONS_PER_PAGE = 5
MAX_PAGE = 10**9
HEADLINE = ("log_loss", "brier", "ece")
COMPARED = ("log_loss", "brier", "ece", "mce", "auc", "smooth_ece", "calibration_slope")
_PAGE = re.compile(r"^[0-9]{1,10}$")


def page_number(text: str | None) -> int:
    """``?page=``: a whole number from 1 (1 when absent); 404 for anything else."""
    if text is None or text == "":
        return 1
    if not _PAGE.match(text) or not 1 <= int(text) <= MAX_PAGE:
        raise NotFound(f"there is no page {text[:24]!r}")
    return int(text)


def pages(
    number: int, total: int, per_page: int, **query: str | None
) -> dict[str, int | str | None]:
    """This page's number, how many pages, and the links to the previous and next ones (None
    at either end) keeping the other ``query`` parameters that are set."""
    last = max(1, -(-total // per_page))
    kept = {key: value for key, value in query.items() if value}

    def link(to: int) -> str:
        return "?" + urlencode({**kept, "page": to})

    return {
        "page": number,
        "pages": last,
        "previous": link(number - 1) if number > 1 else None,
        "next": link(number + 1) if number < last else None,
    }


def calibrators(
    service: CalibrationService, number: int, tag: tuple[str, str] | None
) -> dict[str, Any]:
    """The list page: a page of calibrators with their latest version and aliases."""
    listed, total = service.browsing.overview(
        CALIBRATORS_PER_PAGE, (number - 1) * CALIBRATORS_PER_PAGE, tag
    )
    given = None if tag is None else f"{tag[0]}:{tag[1]}"
    return {
        "rows": [(item, headline(item), newest_first(item.aliases)) for item in listed],
        "total": total,
        "tag": given or "",
        **pages(number, total, CALIBRATORS_PER_PAGE, tag=given),
    }


@dataclass(frozen=True)
class VersionPanel:
    """One version as the calibrator page shows it: its record, its stored diagnostics (the
    calibrated and raw reports as the diagnostics route writes them) and its diagram, or
    why they are missing; ``traffic`` its (predictions, labelled) in the monitored range."""

    record: VersionRecord
    reports: dict[str, Any] | None
    diagram: Markup | None
    problem: str | None
    traffic: tuple[int, int] | None


def calibrator(
    service: CalibrationService, name: str, number: int, monitored: Monitored
) -> dict[str, Any]:
    """The calibrator page: a page of its versions, each with its diagram and report."""
    view = service.get_calibrator(name, VERSIONS_PER_PAGE, (number - 1) * VERSIONS_PER_PAGE)
    if number > 1 and not view.versions:
        raise NotFound(f"{name!r} has no page {number} of versions")
    traffic = service.browsing.traffic(name, monitored.since, monitored.until)
    panels = [_panel(service, record, traffic.get(record.version)) for record in view.versions]
    return {
        "name": name,
        "summary": view.summary,
        "aliases": view.aliases,
        "panels": panels,
        "total": view.total,
        "monitored": monitored,
        "first_page": number == 1,
        **pages(number, view.total, VERSIONS_PER_PAGE),
    }


def _panel(
    service: CalibrationService, record: VersionRecord, traffic: tuple[int, int] | None
) -> VersionPanel:
    """A version's panel; a version deleted meanwhile, or whose stored batch cannot be read,
    says so in its panel instead of failing the page."""
    try:
        reports = service.diagnosis.stored(record.name, record.version, DEFAULT_REPORT)
        svg = service.diagnosis.stored_picture(record.name, record.version, DEFAULT_REPORT, "svg")
    except (NotFound, StoredDataCorrupt) as exc:
        return VersionPanel(record, None, None, exc.detail, traffic)
    label = (
        f"Reliability diagram of {record.name} version {record.version} ({record.method}): "
        "fraction of positives against mean predicted probability per bin, calibrated and raw, "
        "with the histogram of predictions beneath; the table below holds the same numbers."
    )
    document = {"calibrated": reports.calibrated.as_json(), "raw": reports.raw.as_json()}
    diagram = inline_svg(svg, prefix=f"v{record.version}", label=label)
    return VersionPanel(record, document, diagram, None, traffic)


def comparison(
    service: CalibrationService, name: str, first: Selector | None, second: Selector | None
) -> dict[str, Any]:
    """The compare page: two versions' stored curves overlaid and their metrics side by
    side; by default the latest version and the one before it."""
    if first is None or second is None:
        newest = service.get_calibrator(name, 2, 0).versions
        if len(newest) < 2:
            return {"name": name, "compared": None, "a": "", "b": "", "problem": None}
        first = newest[0].version if first is None else first
        second = newest[1].version if second is None else second
    try:
        found = service.browsing.stored_comparison(name, first, second, "svg")
    except NotFound as exc:
        problem = {"problem": exc.detail, "status": exc.status}
        return {"name": name, "compared": None, "a": first, "b": second, **problem}
    a, b = found.first, found.second
    label = (
        f"Reliability curves of {name} versions {a.version} ({a.method}) and {b.version} "
        f"({b.method}) overlaid, each on its own fitting batch, out of fold; the table "
        "beside it holds their metrics."
    )
    return {
        "name": name,
        "a": a.version,
        "b": b.version,
        "problem": None,
        "compared": {
            "reports": [a, b],
            "metrics": [a.calibrated.as_json()["metrics"], b.calibrated.as_json()["metrics"]],
            "names": COMPARED,
            "diagram": inline_svg(found.picture, prefix="compare", label=label),
        },
    }


def monitoring(
    service: CalibrationService, name: str, monitored: Monitored, selector: Selector | None
) -> dict[str, Any]:
    """The monitoring page: the windows with traffic, and the figure over the whole range."""
    rows, svg = service.browsing.monitoring(
        name, monitored.window, monitored.since, monitored.until, selector, "svg"
    )
    label = (
        f"Monitoring of {name} over {monitored.window} windows: calibration error and log "
        "loss, mean predicted against observed rate, score shift and traffic; the table "
        "below holds the windows with traffic."
    )
    return {
        "name": name,
        "monitored": monitored,
        "version": selector,
        "rows": [row for row in rows if row.get("n_predictions")],
        "diagram": inline_svg(svg, prefix="monitoring", label=label),
    }


def newest_first(aliases: dict[str, int]) -> list[tuple[str, int]]:
    """Aliases by the version they point to, newest first (then by name)."""
    return sorted(aliases.items(), key=lambda item: (-item[1], item[0]))


def headline(listed: Listed) -> dict[str, Any]:
    """The latest version's cross-validated metrics (with their intervals), or none."""
    if listed.latest is None:
        return {}
    cv: dict[str, Any] = listed.latest.metrics.get("cv") or {}
    return cv
