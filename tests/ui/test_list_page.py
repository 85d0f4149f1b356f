"""The list page on both backends: the version each alias serves (``production`` first) with
that version's numbers as the API gives them, the latest beside when no alias serves it,
counts that stay true after deletes, and the sparkline of the live version's daily log loss
against ``GET …/monitoring?window=1d``, read from the SVG's numbers and points, not pixels."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from app.service import browsing as browsing_module
from app.service.browsing import Listed
from app.service.traffic.monitoring import window_start
from app.store.traffic.rollups import RollupOperations
from app.ui import list_page
from app.ui.sparkline import HEIGHT, PAD, WIDTH
from app.ui.templating import number
from tests.client import TestClient

from .conftest import fit, log_day
from .html_checks import Element, parse
from .test_accessibility import check_page

LABELLED_DAYS = (0, 3, 4, 5, 11, 13)
"""The days of the 14 (0 the oldest, 13 today) on which production's version has outcomes."""
UNLABELLED_DAY = 8
"""A day on which it answered without outcomes: a gap in the line, as a day without traffic."""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """Both backends (the package's fixture is SQLite only)."""
    name: str = request.param
    return name


@pytest.fixture
def listed(open_client: TestClient) -> TestClient:
    """``churn`` v1 platt (``canary``), v2 isotonic (``production``, with traffic on the
    :data:`LABELLED_DAYS` and :data:`UNLABELLED_DAY` of the last 14), v3 platt (latest, unaliased,
    a day of traffic of its own); ``quiet`` v1 without aliases or traffic; ``unlabelled`` v1
    with traffic but no outcomes."""
    for method in ("platt", "isotonic", "platt"):
        fit(open_client, "churn", method)
    for alias, version in (("production", 2), ("canary", 1)):
        moved = open_client.put(f"/v1/calibrators/churn/aliases/{alias}", json={"version": version})
        assert moved.status_code == 200, moved.text
    fit(open_client, "quiet", "platt")
    fit(open_client, "unlabelled", "platt")
    first = window_start(datetime.now(UTC), "1d") - timedelta(days=13)
    for day in LABELLED_DAYS:
        log_day(open_client, "churn", 2, first + timedelta(days=day), day, labelled=True)
    log_day(open_client, "churn", 2, first + timedelta(days=UNLABELLED_DAY), 99, labelled=False)
    log_day(open_client, "churn", 3, first + timedelta(days=1), 100, labelled=True)
    log_day(open_client, "unlabelled", 1, first + timedelta(days=12), 101, labelled=False)
    return open_client


def groups(client: TestClient) -> dict[str, list[Element]]:
    """Each calibrator's rows of the list (its ``tbody``), by name."""
    page = parse(client.get("/ui").text)
    bodies: dict[str, list[Element]] = {}
    current: list[Element] = []
    for element in page.elements:
        if element.tag == "tbody":
            current = []
            bodies[element.text.split()[0]] = current
        elif element.tag == "tr" and current is not None:
            current.append(element)
    return bodies


def words(element: Element) -> str:
    return " ".join(element.text.split())


def test_each_alias_shows_the_numbers_of_the_version_it_serves_production_first(
    listed: TestClient,
) -> None:
    churn = groups(listed)["churn"]
    assert [words(row).split()[:2] for row in churn[1:]] == [["v1", "canary"], ["v3", "latest"]]
    assert words(churn[0]).startswith("churn 3 versions, latest v3 v2 production isotonic")
    for alias, row in (("production", churn[0]), ("canary", churn[1]), ("latest", churn[2])):
        record = listed.get(f"/v1/calibrators/churn/versions/{alias}").json()
        shown = words(row)
        assert record["method"] in shown
        cv = record["metrics"]["cv"]
        for metric in ("log_loss", "brier", "ece"):
            low, high = cv["intervals"][metric]
            assert f"{number(cv[metric])} [{number(low)}, {number(high)}]" in shown, metric


def test_the_latest_alone_is_labelled_so_without_aliases(listed: TestClient) -> None:
    (quiet,) = groups(listed)["quiet"]
    record = listed.get("/v1/calibrators/quiet/versions/latest").json()
    log_loss = number(record["metrics"]["cv"]["log_loss"])
    assert words(quiet).startswith(f"quiet 1 version, v1 v1 latest platt {log_loss}")
    assert "no outcomes yet" not in quiet.text  # no traffic: neither a sparkline nor words


def test_the_counts_read_right_after_deletes(listed: TestClient) -> None:
    assert listed.delete("/v1/calibrators/churn/versions/3").status_code == 204
    churn = groups(listed)["churn"]
    assert words(churn[0]).startswith("churn 2 versions, latest v2 v2 production latest")
    assert len(churn) == 2  # the latest is production's: not shown twice
    fit(listed, "churn", "isotonic")
    assert listed.delete("/v1/calibrators/churn/versions/1?force=true").status_code == 204
    churn = groups(listed)["churn"]
    assert words(churn[0]).startswith("churn 2 versions, latest v4 v2 production")
    assert [words(row).split()[:2] for row in churn[1:]] == [["v4", "latest"]]
    assert " of " not in words(churn[0]).split(" v2 ")[0]


def test_the_sparkline_is_production_s_daily_log_loss_as_monitoring_gives_it(
    listed: TestClient,
) -> None:
    service = listed.app.state.service  # type: ignore[attr-defined]
    page = list_page.calibrators(service, 1, None)
    trend = next(row.trend for row in page.rows if row.listed.summary.name == "churn")
    assert trend is not None
    assert trend.version == 2
    since = trend.first_day
    monitored = listed.get(
        "/v1/calibrators/churn/monitoring",
        params={
            "window": "1d",
            "version": "production",
            "since": since.isoformat(),
            "until": (since + timedelta(days=14)).isoformat(),
        },
    ).json()["windows"]
    expected = [row["log_loss"] for row in monitored]
    assert trend.values == [None if v is None else pytest.approx(v, rel=1e-12) for v in expected]
    assert [i for i, v in enumerate(expected) if v is not None] == list(LABELLED_DAYS)
    assert monitored[UNLABELLED_DAY]["n_predictions"] == 60  # traffic, but no log loss

    drawing = parse(str(trend.figure))
    (figure,) = drawing.all("svg")
    title = drawing.all("title")[0].text
    assert title.endswith(": " + " ".join(number(v) for v in expected))
    present = [v for v in expected if v is not None]
    label = figure.attrs["aria-label"]
    assert (
        f"{len(present)} with outcomes, from {number(min(present))} to {number(max(present))}"
        in label
    )
    assert f"{number(present[-1])} on {since + timedelta(days=13):%Y-%m-%d}" in label
    drawn = points(str(trend.figure))
    step = WIDTH / 13
    assert [round(x / step) for run in drawn for x, _ in run] == list(LABELLED_DAYS)
    assert [len(run) for run in drawn] == [1, 3, 1, 1]  # cut at every day without outcomes
    ys = {round(x / step): y for run in drawn for x, y in run}
    days = list(LABELLED_DAYS)
    assert ys[days[int(np.argmax(present))]] == pytest.approx(PAD, abs=0.05)
    assert ys[days[int(np.argmin(present))]] == pytest.approx(HEIGHT - PAD, abs=0.05)
    by_value = sorted(days, key=lambda d: expected[d])  # type: ignore[arg-type, return-value]
    assert sorted(days, key=lambda d: -ys[d]) == by_value

    html = listed.get("/ui").text
    assert str(trend.figure) in html
    assert "/ui/calibrators/churn/monitoring?version=2&amp;window=1d" in html


def points(svg: str) -> list[list[tuple[float, float]]]:
    """The runs the sparkline draws, in order: each polyline's points, each dot alone."""
    runs = []
    for match in re.finditer(r'<polyline points="([^"]+)"|<circle cx="([^"]+)" cy="([^"]+)"', svg):
        if match[1]:
            runs.append([tuple(map(float, p.split(","))) for p in match[1].split()])
        else:
            runs.append([(float(match[2]), float(match[3]))])
    return runs  # type: ignore[return-value]


def test_traffic_without_outcomes_says_so_and_none_draws_nothing(listed: TestClient) -> None:
    bodies = groups(listed)
    assert "no outcomes yet" in words(bodies["unlabelled"][0])
    assert "no outcomes yet" not in words(bodies["quiet"][0])
    page = parse(listed.get("/ui").text)
    labels = [e.attrs["aria-label"] for e in page.all("svg")]
    (label,) = labels
    assert label.startswith("Live log loss of churn v2 per day")


@pytest.mark.in_threads  # it patches or counts what the list's job runs
def test_one_read_of_traffic_per_calibrator_whose_live_version_answered(
    listed: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """v3 of churn answered too, but production's v2 is followed; quiet has no traffic."""
    browsing = listed.app.state.service.browsing  # type: ignore[attr-defined]
    read: list[tuple[str, int | None]] = []
    trend: Callable[..., Any] = browsing._trend

    def spy(item: Listed, *args: Any) -> Any:
        read.append((item.summary.name, item.live))
        return trend(item, *args)

    monkeypatch.setattr(browsing, "_trend", spy)
    assert listed.get("/ui").status_code == 200
    assert sorted(read) == [("churn", 2), ("unlabelled", 1)]


def test_the_list_with_traffic_is_accessible_html(listed: TestClient) -> None:
    parsed = parse(listed.get("/ui").text)
    check_page(parsed, "/ui (with traffic)")
    (spanning,) = [th for th in parsed.all("th") if th.attrs.get("rowspan")]
    assert spanning.attrs == {"scope": "row", "rowspan": "3"}


@pytest.mark.in_threads  # it patches or counts what the list's job runs
def test_more_labelled_traffic_than_a_list_reads_links_to_monitoring(
    listed: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past TREND_ROWS labelled predictions logged before the rollups' start in the 14 days,
    the list reads none of them: the cell links to the version's monitoring instead, and the
    page's cost stays bounded (from the rollups' start on, it reads the stored hours)."""
    monkeypatch.setattr(browsing_module, "TREND_ROWS", 10)  # churn v2 has 30 a labelled day
    later = datetime(9000, 1, 1, tzinfo=UTC)
    monkeypatch.setattr(RollupOperations, "rollup_start", lambda self: later)
    page = parse(listed.get("/ui").text)
    assert "see monitoring" in words(groups(listed)["churn"][0])
    assert page.all("svg") == []
    links = [a.attrs["href"] for a in page.all("a") if "see monitoring" in a.text]
    assert links == ["/ui/calibrators/churn/monitoring?version=2&window=1d"]
