"""/docs and /redoc in a real browser, offline: headless Chromium on ``python -m app.serve``.

Chromium resolves no host but the loopback ones (:data:`tests.browser.OFFLINE`), so the pages
render only if everything they need comes from the service. Swagger UI must show one
operation block per operation of the OpenAPI description, ReDoc one section per operation,
and Swagger UI's Authorize button and "Try it out" must work with a bearer key: authorize
once, call predict from the page, get probabilities; the key is never written to the
browser's storage, so a reload forgets it (``persistAuthorization`` off). That no page loads
anything from another host is tests/api/test_docs_pages.py's to check, without a browser.
The tests share one Chromium, each in a browser context of its own (no storage of another's).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from app.keys import new_key
from tests.browser import Browser
from tests.servers import BATCH, Service

READ_KEY, READ_ENTRY = new_key("browser", "read")
WRITE_KEY, WRITE_ENTRY = new_key("admin", "write")
METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The service behind keys, on SQLite, with ``churn`` v1 fitted."""
    folder = tmp_path_factory.mktemp("docs-browser")
    keys = f"{READ_ENTRY.entry()},{WRITE_ENTRY.entry()}"
    service = Service(
        f"sqlite:///{folder / 'calibration.db'}", folder / "serve.log", CALIBRATION_API_KEYS=keys
    )
    try:
        service.wait_until_ready()
        headers = {"Authorization": f"Bearer {WRITE_KEY}"}
        fit = service.client.post("/v1/calibrators/churn/fit", json=BATCH, headers=headers)
        assert fit.status_code == 201, fit.text
        yield service
    finally:
        service.stop()


def operations(service: Service) -> list[dict[str, Any]]:
    spec = service.client.get("/openapi.json").json()
    return [
        operation
        for operations in spec["paths"].values()
        for method, operation in operations.items()
        if method in METHODS
    ]


def operation_ids(service: Service) -> set[str]:
    return {operation["operationId"] for operation in operations(service)}


def keyed_operations(service: Service) -> list[dict[str, Any]]:
    """The operations the OpenAPI marks as needing the bearer key (a lock in /docs)."""
    return [operation for operation in operations(service) if "security" in operation]


def rendered_dom(browser: Browser, url: str, ready: str) -> str:
    """The DOM ``browser`` renders for ``url`` once an element matches the selector ``ready``."""
    browser.navigate(url)
    browser.wait_for(f"!!document.querySelector({json.dumps(ready)})")
    return browser.html()


def test_swagger_ui_renders_an_operation_block_per_operation(
    served: Service, browser: Browser
) -> None:
    expected = operation_ids(served)
    dom = rendered_dom(browser, f"{served.base_url}/docs", ".opblock")
    blocks = re.findall(
        r'<div class="opblock opblock-(?:get|put|post|delete|patch|head|options)', dom
    )
    rendered = {i for i in expected if re.search(rf'id="operations-[^"]*-{re.escape(i)}"', dom)}
    assert len(blocks) == len(expected)
    assert rendered == expected
    assert "Authorize" in dom
    assert "authorization__btn" in dom  # the lock on operations that need a key


def test_redoc_renders_every_operation(served: Service, browser: Browser) -> None:
    expected = operation_ids(served)
    dom = rendered_dom(browser, f"{served.base_url}/redoc", '[data-section-id^="operation/"]')
    rendered = set(re.findall(r'data-section-id="operation/([^"]+)"', dom))
    assert rendered == expected


# Swagger UI's React inputs take a value set through the prototype's setter plus an event.
TYPE_INTO = """(selector, text) => {
  const input = document.querySelector(selector);
  const set = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(input), 'value').set;
  set.call(input, text);
  input.dispatchEvent(new Event('input', {bubbles: true}));
  return true;
}"""
PREDICT = "#operations-predictions-predict_v1_calibrators__name__predict_post"
LOCKED = '[aria-label="authorization button locked"]'
UNLOCKED = '[aria-label="authorization button unlocked"]'
# Everything the page's origin keeps in the browser's storage, as one string.
STORED = "JSON.stringify({...localStorage}) + JSON.stringify({...sessionStorage})"


def test_authorize_then_try_it_out_on_predict(served: Service, browser: Browser) -> None:
    browser.navigate(f"{served.base_url}/docs")
    browser.wait_for(f"!!document.querySelector('{PREDICT}')")
    locks = browser.evaluate(f"document.querySelectorAll('{UNLOCKED}').length")
    assert locks == len(keyed_operations(served)) > 0
    assert browser.evaluate(f"document.querySelectorAll('{LOCKED}').length") == 0
    browser.evaluate("document.querySelector('.auth-wrapper .authorize').click()")
    browser.wait_for("!!document.querySelector('.modal-ux input')")
    browser.evaluate(f"({TYPE_INTO})('.modal-ux input', {json.dumps(READ_KEY)})")
    browser.evaluate("document.querySelector('.modal-ux .auth-btn-wrapper .authorize').click()")
    browser.wait_for("!!document.querySelector('.modal-ux .auth-btn-wrapper .btn-done')")
    browser.evaluate("document.querySelector('.modal-ux .btn-done').click()")

    browser.evaluate(f"document.querySelector('{PREDICT} .opblock-summary-control').click()")
    browser.wait_for(f"!!document.querySelector('{PREDICT} .try-out__btn')")
    browser.evaluate(f"document.querySelector('{PREDICT} .try-out__btn').click()")
    name = f"{PREDICT} tr[data-param-name=name] input"
    browser.wait_for(f"!!document.querySelector('{name}')")
    # prefilled from the OpenAPI's example: Try it out needs no typing at all
    assert browser.evaluate(f"document.querySelector('{name}').value") == "churn"
    browser.evaluate(f"document.querySelector('{PREDICT} .execute').click()")
    status = browser.wait_for(
        f"document.querySelector('{PREDICT} .live-responses-table tbody .response-col_status')"
        "?.textContent.trim()"
    )
    body = browser.evaluate(
        f"document.querySelector('{PREDICT} .live-responses-table tbody pre').textContent"
    )
    assert status == "200", body
    answer = json.loads(body)
    assert answer["name"] == "churn"
    assert len(answer["probabilities"]) == 3

    assert READ_KEY not in browser.evaluate(STORED)

    browser.navigate(f"{served.base_url}/docs")  # a reload forgets the key
    browser.wait_for(f"!!document.querySelector('{PREDICT}')")
    assert browser.wait_for(f"document.querySelectorAll('{UNLOCKED}').length") == locks
    assert browser.evaluate(f"document.querySelectorAll('{LOCKED}').length") == 0
    assert READ_KEY not in browser.evaluate(STORED)
