"""The list page: a page of calibrators, each with the versions its aliases serve (the one
``production`` serves first) and their metrics, its latest version beside them when no alias
serves it, clear counts, and a sparkline of its live version's daily log loss.

The sparkline follows log loss rather than ECE: a day's binned ECE on a few dozen labelled
predictions is mostly binning noise and biased upwards (its expectation grows like
sqrt(bins / n)), so a quiet day would look like a calibration drop; log loss is a mean of
per-prediction terms, unbiased whatever the day's traffic, and its scale is the one the
metrics beside it use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from markupsafe import Markup

from app.errors import NotFound
from app.service.browsing import Listed
from app.service.traffic.monitoring import WINDOW_SECONDS, window_start
from app.service.use_cases import CalibrationService
from app.store import VersionRecord

from .pages import PagerLinks, headline, pager_links
from .sparkline import sparkline
from .templating import number

CALIBRATORS_PER_PAGE = 50
TREND_DAYS = 14
"""The daily windows the sparkline spans, the current day's last."""


@dataclass(frozen=True)
class ServedVersion:
    """A version in a calibrator's row: the aliases that serve it (``production`` first, none
    for a latest version no alias serves), whether it is the latest, its record (None when it
    went between the reads) and headline metrics."""

    number: int
    aliases: tuple[str, ...]
    latest: bool
    record: VersionRecord | None
    headline: Mapping[str, Any]


@dataclass(frozen=True)
class Trend:
    """The sparkline of a calibrator's live version: the version, its daily log loss (None on
    a day without labelled traffic), the first day's date, and the figure (empty when no
    day has any)."""

    version: int
    values: list[float | None]
    first_day: datetime
    figure: Markup
    busy: bool = False  # more labelled traffic than the list reads: no figure, a link


@dataclass(frozen=True)
class ListedRow:
    """A calibrator of the list: its versions to show (the first is its live one), how many
    versions it has in words, and its live version's trend (None without traffic)."""

    listed: Listed
    versions: list[ServedVersion]
    counts: str
    trend: Trend | None


@dataclass(frozen=True)
class CalibratorListPage:
    """The list page."""

    rows: list[ListedRow]
    total: int
    tag: str
    pager: PagerLinks


def trend_range(now: datetime) -> tuple[datetime, datetime]:
    """The :data:`TREND_DAYS` daily windows that end with the one holding ``now``."""
    until = window_start(now, "1d") + timedelta(seconds=WINDOW_SECONDS["1d"])
    return until - timedelta(days=TREND_DAYS), until


def calibrators(
    service: CalibrationService,
    number: int,
    tag: tuple[str, str] | None,
    now: datetime | None = None,
) -> CalibratorListPage:
    """The list page: a page of calibrators with the versions their aliases serve, their
    latest, and their live version's log loss over the last :data:`TREND_DAYS` days."""
    since, until = trend_range(now or datetime.now(UTC))
    found = service.browsing.calibrators_page(
        CALIBRATORS_PER_PAGE, (number - 1) * CALIBRATORS_PER_PAGE, tag, (since, until)
    )
    if number > 1 and not found.listed:
        raise NotFound(f"there is no page {number} of calibrators")
    given = None if tag is None else f"{tag[0]}:{tag[1]}"
    rows = [
        ListedRow(item, shown_versions(item), counts(item), trend(item, since))
        for item in found.listed
    ]
    pager = pager_links(number, found.total, CALIBRATORS_PER_PAGE, tag=given)
    return CalibratorListPage(rows, found.total, given or "", pager)


def shown_versions(item: Listed) -> list[ServedVersion]:
    """The versions ``item``'s aliases serve (:meth:`Listed.served`), then its latest when
    none of them is; nothing for a calibrator without versions."""
    latest = item.summary.latest_version
    served = item.served()
    if latest is not None and all(number != latest for number, _ in served):
        served.append((latest, ()))
    return [
        ServedVersion(
            number,
            aliases,
            number == latest,
            item.versions.get(number),
            headline(item.versions.get(number)),
        )
        for number, aliases in served
    ]


def counts(item: Listed) -> str:
    """How many versions ``item`` has and its latest, in words that stay true after deletes:
    ``5 versions, latest v7``."""
    n, latest = item.summary.n_versions, item.summary.latest_version
    if latest is None or n == 0:
        return "no versions left"
    if n == 1:
        return f"1 version, v{latest}"
    return f"{n} versions, latest v{latest}"


def trend(item: Listed, since: datetime) -> Trend | None:
    """The sparkline of ``item``'s live version's daily log loss from ``since``; None when
    that version had no traffic in the range."""
    if item.trend is None or item.live is None:
        return None
    if not item.trend:  # more traffic than a list reads (:data:`~app.service.browsing.TREND_ROWS`)
        return Trend(item.live, [], since, Markup(""), busy=True)
    values = [_finite(row.get("log_loss")) for row in item.trend]
    return Trend(item.live, values, since, _figure(item.summary.name, item.live, values, since))


def _figure(name: str, version: int, values: Sequence[float | None], since: datetime) -> Markup:
    """The sparkline, labelled with its range and last value, and titled with every day's."""
    present = [(i, v) for i, v in enumerate(values) if v is not None]
    if not present:
        return Markup("")
    low, high = min(v for _, v in present), max(v for _, v in present)
    last_day, last = present[-1]
    when = since + timedelta(days=last_day)
    label = (
        f"Live log loss of {name} v{version} per day, last {len(values)} days: "
        f"{len(present)} with outcomes, from {number(low)} to {number(high)}, "
        f"{number(last)} on {when:%Y-%m-%d}"
    )
    daily = " ".join(number(v) for v in values)
    title = f"Log loss of v{version} per day from {since:%Y-%m-%d}, oldest first: {daily}"
    return sparkline(values, label=label, title=title)


def _finite(value: Any) -> float | None:
    """A monitoring row's metric as a float, None when it has none."""
    return float(value) if isinstance(value, int | float) else None
