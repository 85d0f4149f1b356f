"""The web view's pages, in open mode: what a user sees of the calibrators and versions."""

from __future__ import annotations

import re

import pytest
from httpx import Response
from sqlalchemy import event

from app.errors import StoredDataCorrupt
from app.store import Database
from app.ui import list_page
from tests.api.helpers import FEW_RESAMPLES
from tests.client import TestClient

from .conftest import fit
from .html_checks import parse


def test_the_list_shows_the_version_production_serves_and_the_latest_beside(
    shared_shown: TestClient,
) -> None:
    page = shared_shown.get("/ui")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    rows = [" ".join(e.text.split()) for e in parse(page.text).all("tbody")]
    assert [row.split()[0] for row in rows] == ["churn", "other"]
    churn = rows[0]
    assert churn.startswith("churn 3 versions, latest v3 v2 production")
    served = shared_shown.get("/v1/calibrators/churn/versions/production").json()
    latest = shared_shown.get("/v1/calibrators/churn/versions/3").json()
    live, beside = churn.split(" v3 latest ")
    for record, shown in ((served, live), (latest, beside)):
        assert record["method"] in shown
        for metric in ("log_loss", "brier", "ece"):
            assert f"{record['metrics']['cv'][metric]:.4f}" in shown
        low, high = record["metrics"]["cv"]["intervals"]["log_loss"]
        assert f"[{low:.4f}, {high:.4f}]" in shown
    assert "team:risk" in beside
    assert rows[1].startswith("other 1 version, v1 v1 latest platt")
    links = {a.text: a.attrs["href"] for a in parse(page.text).all("a") if a.text in ("v2", "v3")}
    assert links == {  # each version to its page
        "v2": "/ui/calibrators/churn?version=2",
        "v3": "/ui/calibrators/churn?version=3",
    }


def test_the_tag_filter_keeps_the_calibrators_tagged_so(shared_shown: TestClient) -> None:
    page = parse(shared_shown.get("/ui", params={"tag": "team:ops"}).text)
    names = [e.text.split()[0] for e in page.all("tr")[1:]]
    assert names == ["other"]
    assert page.all("input")[0].attrs["value"] == "team:ops"
    empty = shared_shown.get("/ui", params={"tag": "team:none"})
    assert empty.status_code == 200
    assert "No calibrator has a version tagged" in empty.text
    bad = shared_shown.get("/ui", params={"tag": "no-colon"})
    assert bad.status_code == 422
    assert "key:value" in bad.text


def test_a_tag_chip_links_to_its_filter_unless_its_key_has_a_colon(shown: TestClient) -> None:
    """``tag=key:value`` splits at the first colon, so a key with one cannot be filtered."""
    fit(shown, "colons", "platt", tags={"a:b": "c", "zone": "eu:west"})
    page = parse(shown.get("/ui").text)
    chips = {e.text: e for e in page.elements if "chip" in e.attrs.get("class", "").split()}
    assert chips["a:b:c"].tag == "span"
    link = chips["zone:eu:west"]
    assert link.tag == "a"
    filtered = parse(shown.get(link.attrs["href"]).text)
    assert [e.text.split()[0] for e in filtered.all("tr")[1:]] == ["colons"]


def test_compare_overlays_two_versions_with_their_metrics(shared_shown: TestClient) -> None:
    page = shared_shown.get("/ui/calibrators/churn/compare", params={"a": "1", "b": "production"})
    assert page.status_code == 200
    parsed = parse(page.text)
    (diagram,) = [e for e in parsed.all("svg") if e.attrs.get("role") == "img"]
    assert "versions 1 (platt) and 2 (isotonic)" in diagram.attrs["aria-label"]
    assert {"compare-version-0-curve", "compare-version-1-curve"} <= {
        e.attrs.get("id") for e in parsed.elements
    }
    for version in (1, 2):
        url = f"/v1/calibrators/churn/versions/{version}/diagnostics"
        report = shared_shown.get(url, params={"bootstrap": FEW_RESAMPLES}).json()
        assert f"{report['calibrated']['metrics']['log_loss']:.4f}" in page.text
    default = parse(shared_shown.get("/ui/calibrators/churn/compare").text)
    chosen = [e.attrs["value"] for e in default.all("option") if "selected" in e.attrs]
    assert chosen == ["production", "3"]  # production against the newest other version


@pytest.mark.in_threads  # it spies on what the job runs
def test_an_unknown_second_version_is_found_before_the_first_is_reported(
    open_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typo in the second box is a 404 at once, not after the first version's bootstrap."""
    fit(open_client, "churn", "platt")
    diagnosis = open_client.app.state.service.diagnosis  # type: ignore[attr-defined]
    reported: list[tuple[object, ...]] = []
    original = diagnosis.stored

    def spy(*args: object) -> object:
        reported.append(args)
        return original(*args)

    monkeypatch.setattr(diagnosis, "stored", spy)
    page = open_client.get("/ui/calibrators/churn/compare", params={"a": "1", "b": "nope"})
    assert page.status_code == 404
    assert "nope" in page.text
    assert reported == []


@pytest.mark.in_threads  # few_page_resamples patches what its jobs run
def test_monitoring_is_linked_for_a_version_with_traffic(
    shown: TestClient, few_page_resamples: None
) -> None:
    page = shown.get("/ui/calibrators/churn", params={"version": "3"})
    assert "none logged since" in page.text
    answer = shown.post(
        "/v1/calibrators/churn/predict", json={"scores": [0.1, 2.0], "ids": ["a", "b"]}
    )
    assert answer.status_code == 200, answer.text
    shown.app.state.service.prediction_log.flush()  # type: ignore[attr-defined]
    page = shown.get("/ui/calibrators/churn", params={"version": "3"})
    assert "2 predictions logged, 0 with outcomes" in page.text
    assert "monitoring?version=3" in page.text
    monitoring = shown.get("/ui/calibrators/churn/monitoring?version=3")
    assert monitoring.status_code == 200
    parsed = parse(monitoring.text)
    assert [e for e in parsed.all("svg") if e.attrs.get("role") == "img"]
    cells = [" ".join(e.text.split()) for e in parsed.all("td")]
    assert cells[:2] == ["v3", "2 0 labelled"]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/ui/calibrators/nope", 404),
        ("/ui/calibrators/a%2Fb", 404),
        ("/ui/calibrators/a/b/c", 404),
        ("/ui/calibrators/caf%C3%A9", 404),
        ("/ui/calibrators/" + "x" * 300, 404),
        ("/ui/calibrators/churn?page=0", 404),
        ("/ui/calibrators/churn?page=99999999999999999999", 404),
        ("/ui/calibrators/churn?page=-1", 404),
        ("/ui/calibrators/churn?version=99", 404),
        ("/ui/calibrators/churn?version=nosuchalias", 404),
        ("/ui/calibrators/churn?curve=wiggly", 422),
        ("/ui/calibrators/churn/compare?a=99999999999999999999999&b=1", 404),
        ("/ui/calibrators/churn/compare?a=1&b=nosuchalias", 404),
        ("/ui/calibrators/churn/compare?a=%00&b=1", 404),
        ("/ui/calibrators/churn/monitoring?version=12345678901", 404),
        ("/ui/calibrators/churn/monitoring?window=1y", 422),
        ("/ui?page=abc", 404),
        ("/ui?page=99", 404),
        ("/ui?tag=team:risk&page=2", 404),
        ("/ui?tag=" + "k" * 300 + ":v", 422),
        ("/ui/nothing/here", 404),
        ("/ui/static/nothing.css", 404),
    ],
)
def test_bad_input_is_an_html_page_with_a_way_back(
    shared_shown: TestClient, path: str, status: int
) -> None:
    page = shared_shown.get(path)
    assert page.status_code == status, (path, page.status_code, page.text[:300])
    assert_error_page(page)


def assert_error_page(page: Response) -> None:
    """An HTML error page with the page headers, a link to its problem type and a way back."""
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert '<a href="/ui">Back to the calibrators</a>' in page.text
    assert re.search(r'<a href="/problems/[a-z-]+">', page.text), page.text


def test_a_wrong_method_under_ui_is_a_405_page(shared_shown: TestClient) -> None:
    page = shared_shown.post("/ui")
    assert page.status_code == 405
    assert page.headers["allow"] == "GET, HEAD"  # HEAD is answered wherever GET is
    assert_error_page(page)
    assert '<a href="/problems/method-not-allowed">' in page.text
    api = shared_shown.post("/v1/calibrators")
    assert api.headers["content-type"] == "application/problem+json"  # the API's stay JSON


@pytest.mark.in_threads  # it patches what the list's job runs
def test_an_unexpected_error_under_ui_is_a_500_page(
    open_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(list_page, "calibrators", broken)
    page = open_client.get("/ui")
    assert page.status_code == 500
    assert_error_page(page)
    assert "a bug" not in page.text
    assert '<a href="/problems/internal-error">' in page.text


@pytest.mark.in_threads  # it patches code the job runs
def test_a_corrupt_batch_is_the_panel_s_problem_with_its_page(
    shown: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = shown.app.state.service  # type: ignore[attr-defined]

    def corrupt(*args: object, **kwargs: object) -> None:
        raise StoredDataCorrupt("the stored batch of 'churn' v2 cannot be read: bad")

    monkeypatch.setattr(service.diagnosis, "reports_and_picture", corrupt)
    page = shown.get("/ui/calibrators/churn")
    assert page.status_code == 200
    section = next(e for e in parse(page.text).all("section") if e.attrs["id"] == "shown")
    assert "No diagnostics: the stored batch of 'churn' v2 cannot be read" in section.text
    assert f"{StoredDataCorrupt.title}: what this problem means" in section.text
    assert f'href="/problems/{StoredDataCorrupt.slug}"' in page.text


def test_links_honour_the_proxy_prefix(shared_shown: TestClient) -> None:
    prefixed = TestClient(shared_shown.app, root_path="/calib", raise_server_exceptions=False)
    for path in ("/ui", "/ui/calibrators/churn", "/ui/calibrators/churn/compare", "/problems"):
        page = prefixed.get(path)
        assert page.status_code == 200, (path, page.text[:300])
        parsed = parse(page.text)
        links = [e.attrs.get("href") or e.attrs.get("action", "") for e in parsed.elements]
        local = [link for link in links if link.startswith("/")]
        assert local, path
        assert all(link.startswith("/calib/") for link in local), (path, local)
    page = parse(prefixed.get("/ui").text)
    assert any(a.attrs.get("href") == "/calib/ui/calibrators/churn" for a in page.all("a"))
    assert any(e.attrs.get("href") == "/calib/ui/static/ui.css" for e in page.all("link"))
    missing = prefixed.get("/ui/nothing")
    assert missing.status_code == 404
    assert '<a href="/calib/ui">Back to the calibrators</a>' in missing.text


def test_an_unknown_calibrator_is_a_404_page(shared_shown: TestClient) -> None:
    page = shared_shown.get("/ui/calibrators/nope")
    assert page.status_code == 404
    assert "calibrator &#39;nope&#39; not found" in page.text


def test_a_calibrator_with_one_version_has_nothing_to_compare(open_client: TestClient) -> None:
    fit(open_client, "single", "platt")
    page = open_client.get("/ui/calibrators/single/compare")
    assert page.status_code == 200
    assert "has a single version" in page.text


def test_pages_forbid_scripts_and_framing(shared_shown: TestClient) -> None:
    headers = shared_shown.get("/ui").headers
    policy = headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script-src" not in policy  # falls back to default-src 'none'
    assert "frame-ancestors 'none'" in policy
    assert headers["cache-control"] == "no-store"


@pytest.mark.in_threads  # it patches or counts what the list's job runs
def test_the_list_reads_a_fixed_number_of_queries_whatever_its_length(
    open_client: TestClient, database: Database
) -> None:
    def statements_of_the_list() -> int:
        counted: list[str] = []

        def count(*args: object) -> None:
            counted.append(str(args[2]))

        event.listen(database.engine, "before_cursor_execute", count)
        try:
            assert open_client.get("/ui").status_code == 200
        finally:
            event.remove(database.engine, "before_cursor_execute", count)
        return len(counted)

    fit(open_client, "a", "platt")
    few = statements_of_the_list()
    for name in ("b", "c", "d", "e"):
        fit(open_client, name, "platt")
    open_client.put("/v1/calibrators/b/aliases/production", json={"version": 1})
    assert statements_of_the_list() == few
