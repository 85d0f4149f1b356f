"""A calibrator's page on both backends: it opens on the live version (``production``'s, else
the first alias's, else the latest) with its smooth curve, its bins a click away, its numbers
as the API gives them; the other versions are rows that link to theirs; the aliases' moves
are listed with their times; the live version's expected and realized performance on the
last days' traffic equals the monitoring route's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.service import live_view
from app.service.traffic.monitoring import window_start
from app.ui import pages
from tests.client import TestClient

from .conftest import fit, log_day
from .html_checks import Parsed, parse, table_rows


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """Both backends (the package's fixture is SQLite only)."""
    name: str = request.param
    return name


def shown_version(parsed: Parsed) -> str:
    """The text of the section of the version shown in full, whitespace collapsed."""
    (section,) = [e for e in parsed.all("section") if e.attrs.get("id") == "shown"]
    return " ".join(section.text.split())


def diagram_ids(parsed: Parsed) -> set[str]:
    """The ids inside the page's one diagram."""
    return {e.attrs["id"] for e in parsed.elements if e.attrs.get("id", "").startswith("v")}


def cell(value: float, band: Any = None) -> str:
    """A number as a page's cell shows it, with its interval when it has one."""
    return f"{value:.4f}" + (f" [{band[0]:.4f}, {band[1]:.4f}]" if band else "")


def test_it_opens_on_the_version_production_serves_with_its_smooth_curve(
    shown: TestClient,
) -> None:
    page = parse(shown.get("/ui/calibrators/churn").text)
    (diagram,) = [e for e in page.all("svg") if e.attrs.get("role") == "img"]
    label = diagram.attrs["aria-label"]
    assert "churn version 2 (isotonic): the smooth reliability curve" in label
    ids = diagram_ids(page)
    assert {"v2-calibrated-smooth", "v2-calibrated-band", "v2-raw-smooth"} <= ids
    assert "v2-calibrated-curve" not in ids  # the bins are not drawn
    text = shown_version(page)
    assert text.startswith("Version 2 · isotonic Live: the version production serves.")
    stored = shown.get("/v1/calibrators/churn/versions/2/diagnostics").json()["calibrated"]
    for metric in ("log_loss", "brier", "auc", "smooth_ece"):
        assert cell(stored["metrics"][metric], stored["metrics"]["intervals"][metric]) in text
    assert not [t for t in page.all("table") if t.attrs.get("id") == "bins"]

    (bins_link,) = [a for a in page.all("a") if a.text == "Bins"]
    binned = parse(shown.get(bins_link.attrs["href"]).text)
    ids = diagram_ids(binned)
    assert {"v2-calibrated-curve", "v2-calibrated-interval"} <= ids
    assert "v2-calibrated-smooth" not in ids
    rows = table_rows(binned, "Bins of v2's out-of-fold probabilities")[1:]
    assert len(rows) == len(stored["bins"])
    for row, stored_bin in zip(rows, stored["bins"], strict=True):
        assert row[1] == str(stored_bin["count"])
        if stored_bin["ci_low"] is not None:
            assert row[4] == f"[{stored_bin['ci_low']:.4f}, {stored_bin['ci_high']:.4f}]"
    assert [a.text for a in binned.all("a") if a.text == "Smooth curve"]


@pytest.mark.in_threads  # few_page_resamples patches what its jobs run
def test_the_live_version_is_production_s_else_the_first_alias_s_else_the_latest(
    open_client: TestClient, few_page_resamples: None
) -> None:
    for _ in range(3):
        fit(open_client, "solo", "platt")

    def live() -> str:
        return shown_version(parse(open_client.get("/ui/calibrators/solo").text))

    assert live().startswith("Version 3 · platt Live: no alias is set, so latest serves it.")
    for alias, version in (("canary", 1), ("beta", 2)):
        open_client.put(f"/v1/calibrators/solo/aliases/{alias}", json={"version": version})
    assert live().startswith("Version 2 · platt Live: the version beta serves.")
    open_client.put("/v1/calibrators/solo/aliases/production", json={"version": 1})
    assert live().startswith("Version 1 · platt Live: the version canary, production serve.")


@pytest.mark.in_threads  # few_page_resamples patches what its jobs run
def test_another_version_is_shown_when_asked_and_the_table_links_to_each(
    shown: TestClient, few_page_resamples: None
) -> None:
    page = parse(shown.get("/ui/calibrators/churn", params={"version": "3"}).text)
    assert shown_version(page).startswith("Version 3 · ")
    assert "Not live: the live version is shown by default." in shown_version(page)
    rows = table_rows(page, "Versions, newest first")
    assert [row[0] for row in rows[1:]] == ["v3 (shown)", "v2", "v1"]
    links = {a.text: a.attrs["href"] for a in page.all("a") if a.text in ("v2", "v1")}
    assert links == {
        "v2": "/ui/calibrators/churn?curve=smooth&version=2",
        "v1": "/ui/calibrators/churn?curve=smooth&version=1",
    }
    by_alias = parse(shown.get("/ui/calibrators/churn", params={"version": "production"}).text)
    assert shown_version(by_alias).startswith("Version 2 · isotonic Live")
    latest = parse(shown.get("/ui/calibrators/churn", params={"version": "latest"}).text)
    assert shown_version(latest).startswith("Version 3 · ")


@pytest.mark.in_threads  # it patches the page's length, and few_page_resamples
def test_the_versions_table_pages_newest_first_keeping_the_version_shown(
    open_client: TestClient, few_page_resamples: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "VERSIONS_PER_PAGE", 3)
    for _ in range(5):
        fit(open_client, "many", "platt")
    first = parse(open_client.get("/ui/calibrators/many", params={"version": "2"}).text)
    assert [row[0] for row in table_rows(first, "Versions")[1:]] == ["v5", "v4", "v3"]
    (following,) = [a.attrs["href"] for a in first.all("a") if a.text == "Next page"]
    assert following == "?version=2&curve=smooth&page=2"
    second = parse(open_client.get("/ui/calibrators/many" + following).text)
    assert [row[0] for row in table_rows(second, "Versions")[1:]] == ["v2 (shown)", "v1"]
    assert shown_version(second).startswith("Version 2 · ")
    kept = {a.text: a.attrs["href"] for a in second.all("a") if a.text in ("v1", "Bins")}
    assert kept == {  # another version, or the bins, keep the table's page
        "v1": "/ui/calibrators/many?curve=smooth&page=2&version=1",
        "Bins": "/ui/calibrators/many?curve=binned&page=2&version=2#shown",
    }
    assert open_client.get("/ui/calibrators/many?page=3").status_code == 404


@pytest.mark.in_threads  # few_page_resamples patches what its jobs run
def test_the_aliases_moves_are_listed_newest_first_with_their_times(
    open_client: TestClient, few_page_resamples: None
) -> None:
    before = datetime.now(UTC).replace(second=0, microsecond=0)
    for _ in range(2):
        fit(open_client, "moved", "platt")
    for version in (1, 2):
        open_client.put("/v1/calibrators/moved/aliases/production", json={"version": version})
    open_client.delete("/v1/calibrators/moved/aliases/production")
    open_client.put("/v1/calibrators/moved/aliases/candidate", json={"version": 2})
    after = datetime.now(UTC)
    page = parse(open_client.get("/ui/calibrators/moved").text)
    rows = table_rows(page, "The latest 4 moves of its aliases")[1:]
    assert [row[1:] for row in rows] == [
        ["candidate", "(set)", "v2"],
        ["production", "v2", "(removed)"],
        ["production", "v1", "v2"],
        ["production", "(set)", "v1"],
    ]
    times = [datetime.strptime(row[0], "%Y-%m-%d %H:%M UTC").replace(tzinfo=UTC) for row in rows]
    assert all(before <= t <= after for t in times)
    assert times == sorted(times, reverse=True)


@pytest.mark.in_threads  # few_page_resamples patches what its jobs run
def test_the_live_version_s_expected_performance_is_the_monitoring_s(
    open_client: TestClient, few_page_resamples: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fit(open_client, "churn", "platt")
    fit(open_client, "churn", "platt")
    open_client.put("/v1/calibrators/churn/aliases/production", json={"version": 1})
    today = window_start(datetime.now(UTC), "1d")
    log_day(open_client, "churn", 1, today - timedelta(days=2), 7, labelled=True)
    log_day(open_client, "churn", 1, today, 8, labelled=False)
    log_day(open_client, "churn", 2, today, 9, labelled=True)  # not the live version's
    log_day(open_client, "churn", 1, today - timedelta(days=9), 10, labelled=True)  # too old
    page = parse(open_client.get("/ui/calibrators/churn").text)
    rows = table_rows(page, "The last 7 days of v1's traffic")
    until = today + timedelta(days=1)
    answer = open_client.get(
        "/v1/calibrators/churn/monitoring",
        params={
            "window": "1d",
            "version": "1",
            "since": (until - timedelta(days=7)).isoformat(),
            "until": until.isoformat(),
        },
    )
    windows = [w for w in answer.json()["windows"] if w["n_predictions"]]
    assert len(windows) == 2
    assert len(rows) == 1 + len(windows)
    for row, window in zip(rows[1:], windows, strict=True):
        estimated, realized = window["estimated"], window["realized"]
        intervals = estimated["intervals"]
        assert row[1] == f"{window['n_predictions']} {window['n_labelled']} labelled"
        assert row[4] == cell(estimated["log_loss"], intervals["log_loss"])
        assert row[6] == cell(estimated["accuracy"], intervals["accuracy"])
        assert row[5] == ("—" if realized is None else cell(realized["log_loss"]))
        assert row[7] == ("—" if realized is None else cell(realized["accuracy"]))
        prior = window["prior"]
        assert row[8] == cell(prior["estimated"], prior["interval"])
        assert row[9] == cell(prior["training"])
        assert row[0] == datetime.fromisoformat(window["start"]).strftime("%m-%d %H:%M")

    service = open_client.app.state.service  # type: ignore[attr-defined]
    read: list[object] = []
    monitoring = service.traffic.monitoring
    monkeypatch.setattr(
        service.traffic, "monitoring", lambda *a, **k: read.append(a) or monitoring(*a, **k)
    )
    again = table_rows(parse(open_client.get("/ui/calibrators/churn").text), "The last 7 days")
    assert (again, read) == (rows, [])  # kept: no traffic nor outcome came since
    log_day(open_client, "churn", 1, today + timedelta(hours=2), 11, labelled=False)
    moved = table_rows(parse(open_client.get("/ui/calibrators/churn").text), "The last 7 days")
    assert len(read) == 1
    assert moved[-1][1].startswith(f"{windows[-1]['n_predictions'] + 60} ")

    monkeypatch.setattr(live_view, "EXPECTED_ROWS", 100)  # the days hold more
    heavy = shown_version(parse(open_client.get("/ui/calibrators/churn").text))
    assert "More predictions of v1 were logged in the last 7 days than this page reads" in heavy


def test_a_version_tagged_with_costs_shows_its_decision_table(shown: TestClient) -> None:
    fit(shown, "costly", "platt", tags={"cost_fp": "1", "cost_fn": "4"})
    fit(shown, "costly", "platt", tags={"cost_fp": "cheap"})  # not a cost: no table
    latest = parse(shown.get("/ui/calibrators/costly").text)
    assert not [t for t in latest.all("table") if "decision" in t.attrs.get("class", "")]
    page = parse(shown.get("/ui/calibrators/costly", params={"version": "1"}).text)
    (table,) = [t for t in page.all("table") if "decision" in t.attrs.get("class", "").split()]
    text = " ".join(table.text.split())
    assert text.startswith("Deciding with v1 at the costs its tags set")
    decision = shown.get(
        "/v1/calibrators/costly/versions/1/decision", params={"cost_fp": 1, "cost_fn": 4}
    ).json()
    assert decision["threshold"] == pytest.approx(0.2)
    low, high = decision["intervals"]["expected_cost"]
    packed = text.replace(" ", "")  # the cells' texts run together
    cost = decision["expected_cost"]
    assert f"0.2000(Bayes-optimal){cost:.4f}[{low:.4f},{high:.4f}]" in packed
    assert f"0.5{decision['at_half']['expected_cost']:.4f}[" in packed
    assert "cost_fp 1, cost_fn 4" in text
