"""The web view in a real browser (headless Chromium through :mod:`tests.browser`), against a
live service with keys: the redirect to the key form, the session cookie the form sets, the
list and a calibrator's diagram as the browser renders them. The tests share one Chromium, each
in a browser context of its own (no cookie of another's)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.keys import new_key
from demo.server import LocalService
from tests.api.helpers import sigmoid_batch
from tests.browser import Browser, chromium

from .conftest import SECRET
from .html_checks import parse


@pytest.fixture(scope="module")
def live() -> Iterator[dict[str, Any]]:
    """``python -m app.serve`` on a loopback port with a read and a write key, ``churn``
    fitted."""
    chromium()  # skip before starting a service for nothing
    read, read_entry = new_key("viewer", "read")
    write, write_entry = new_key("admin", "write")
    service = LocalService(
        CALIBRATION_API_KEYS=f"{read_entry.entry()},{write_entry.entry()}",
        CALIBRATION_UI_SECRET=SECRET,
    )
    try:
        service.wait_until_ready()
        fitted = httpx.post(
            f"{service.base_url}/v1/calibrators/churn/fit",
            json={**sigmoid_batch(), "method": "isotonic"},
            headers={"Authorization": f"Bearer {write}"},
            timeout=60,
        )
        assert fitted.status_code == 201, fitted.text
        yield {"base": service.base_url, "read": read, "write": write}
    finally:
        service.stop()


def test_a_page_without_a_session_shows_the_key_form(
    browser: Browser, live: dict[str, Any]
) -> None:
    landed = browser.navigate(f"{live['base']}/ui/calibrators/churn")
    assert landed == f"{live['base']}/ui/key?next=%2Fui%2Fcalibrators%2Fchurn"
    fields = parse(browser.html()).all("input")
    assert [(f.attrs["id"], f.attrs["type"]) for f in fields] == [("key", "password")]
    assert browser.cookies(f"{live['base']}/ui") == []


def test_the_key_form_signs_in_and_the_pages_show_the_calibrator(
    browser: Browser, live: dict[str, Any]
) -> None:
    base = live["base"]
    assert browser.navigate(f"{base}/ui").startswith(f"{base}/ui/key")
    assert browser.submit("key", live["read"]) == f"{base}/ui"
    (cookie,) = browser.cookies(f"{base}/ui")
    assert cookie["name"] == "calibration_ui"
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/ui"
    assert live["read"] not in cookie["value"]
    assert browser.evaluate("document.cookie") == ""  # HttpOnly: scripts cannot read it
    listed = parse(browser.html())
    assert any(a.attrs.get("href") == "/ui/calibrators/churn" for a in listed.all("a"))
    assert browser.navigate(f"{base}/ui/calibrators/churn") == f"{base}/ui/calibrators/churn"
    page = parse(browser.html())
    (diagram,) = [e for e in page.all("svg") if e.attrs.get("role") == "img"]
    assert "churn version 1 (isotonic): the smooth reliability curve" in diagram.attrs["aria-label"]
    drawn = browser.evaluate(
        "document.querySelector('svg[role=img]').getBoundingClientRect().width"
    )
    assert drawn > 300  # laid out, not an empty box
    assert browser.evaluate("document.getElementById('bins')") is None
    assert "curve=binned" in browser.follow("Bins")  # a click away
    bins = browser.evaluate("document.getElementById('bins').rows.length")
    stored = httpx.get(
        f"{base}/v1/calibrators/churn/versions/1/diagnostics",
        headers={"Authorization": f"Bearer {live['read']}"},
        timeout=60,
    ).json()
    assert bins == 1 + len(stored["calibrated"]["bins"])
    assert browser.evaluate("!!document.getElementById('v1-calibrated-interval')")


def test_the_monitoring_controls_change_the_windows_and_the_figure(
    browser: Browser, live: dict[str, Any]
) -> None:
    """A person picks 1h windows in the form: the page, its figure and its CSV link follow."""
    base, write = live["base"], {"Authorization": f"Bearer {live['write']}"}
    batch = sigmoid_batch(200, seed=5)
    ids = [f"b{i}" for i in range(200)]
    logged = httpx.post(
        f"{base}/v1/calibrators/churn/predict",
        json={"scores": batch["scores"], "ids": ids},
        headers=write,
        timeout=30,
    )
    assert logged.status_code == 200, logged.text
    outcomes = httpx.post(  # joined now, or when the log writes them (within a second)
        f"{base}/v1/calibrators/churn/outcomes",
        json={"ids": ids, "labels": batch["labels"]},
        headers=write,
        timeout=30,
    )
    assert outcomes.status_code == 200, outcomes.text
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        windows = httpx.get(
            f"{base}/v1/calibrators/churn/monitoring?window=1h", headers=write, timeout=30
        ).json()["windows"]
        if sum(w["n_labelled"] for w in windows) == 200:
            break
        time.sleep(0.5)
    assert browser.navigate(f"{base}/ui/calibrators/churn/monitoring").startswith(f"{base}/ui/key")
    browser.submit("key", live["read"])
    assert browser.navigate(f"{base}/ui/calibrators/churn/monitoring").endswith("/monitoring")
    assert "1d windows" in browser.evaluate("document.querySelector('main p').textContent")
    landed = browser.submit("window", "1h")
    assert "window=1h" in landed
    page = parse(browser.html())
    title = browser.evaluate("document.querySelector('svg[role=img]').textContent")
    assert "1h windows" in title
    (link,) = [a for a in page.all("a") if ".csv" in a.attrs.get("href", "")]
    assert link.attrs["href"] == "/ui/calibrators/churn/monitoring.csv?window=1h"
    session = {c["name"]: c["value"] for c in browser.cookies(f"{base}/ui")}
    download = httpx.get(f"{base}{link.attrs['href']}", cookies=session, timeout=30)
    assert download.status_code == 200  # the page's session opens it, as a click would
    assert download.text.startswith("start,end,version,")
    assert httpx.get(f"{base}{link.attrs['href']}", timeout=30).status_code != 200  # no session
    cells = [" ".join(e.text.split()) for e in page.all("td")]
    assert cells[:2] == ["v1", "200 200 labelled"]


def test_the_list_shows_the_version_production_serves_and_its_log_loss(
    browser: Browser, live: dict[str, Any]
) -> None:
    """``fraud`` v1 platt served by ``production``, v2 isotonic the latest: the list's first
    row of it is v1's as a person reads it (its log loss, the API's), with v2 beside."""
    base, write = live["base"], {"Authorization": f"Bearer {live['write']}"}
    for method in ("platt", "isotonic"):
        fitted = httpx.post(
            f"{base}/v1/calibrators/fraud/fit",
            json={**sigmoid_batch(seed=5), "method": method},
            headers=write,
            timeout=60,
        )
        assert fitted.status_code == 201, fitted.text
    moved = httpx.put(
        f"{base}/v1/calibrators/fraud/aliases/production", json={"version": 1}, headers=write
    )
    assert moved.status_code == 200, moved.text
    served = httpx.get(f"{base}/v1/calibrators/fraud/versions/production", headers=write).json()
    assert browser.navigate(f"{base}/ui").startswith(f"{base}/ui/key")
    assert browser.submit("key", live["read"]) == f"{base}/ui"
    rows = browser.evaluate(  # each row's cells as rendered: their innerText
        "[...[...document.querySelectorAll('tbody')]"
        ".find(b => b.rows[0].cells[0].innerText.startsWith('fraud')).rows]"
        ".map(r => [...r.cells].map(c => c.innerText.replace(/\\s+/g, ' ').trim()))"
    )
    live_row, beside = rows
    name, version, method, log_loss = live_row[:4]
    assert (name, version, method) == ("fraud 2 versions, latest v2", "v1 production", "platt")
    low, high = served["metrics"]["cv"]["intervals"]["log_loss"]
    assert log_loss == f"{served['metrics']['cv']['log_loss']:.4f} [{low:.4f}, {high:.4f}]"
    assert beside[:2] == ["v2 latest", "isotonic"]
