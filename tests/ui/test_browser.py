"""The web view in a real browser (headless Chromium through :mod:`tests.browser`), against a
live service with keys: the redirect to the key form, the session cookie the form sets, the
list and a calibrator's diagram as the browser renders them. The tests share one Chromium, each
in a browser context of its own (no cookie of another's)."""

from __future__ import annotations

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
        yield {"base": service.base_url, "read": read}
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
    assert "churn version 1 (isotonic)" in diagram.attrs["aria-label"]
    drawn = browser.evaluate(
        "document.querySelector('svg[role=img]').getBoundingClientRect().width"
    )
    assert drawn > 300  # laid out, not an empty box
