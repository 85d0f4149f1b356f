"""Headless Chromium for the tests and the docs' screenshots, driven over the DevTools protocol.

``with Browser.start() as browser: browser.navigate(url); browser.html()``. Chromium is
Debian's ``chromium`` (``make chromium``; ``make test`` installs it). Without it the browser
tests are skipped, except under ``CI``, where that is a failure (as for PostgreSQL in
``tests/conftest.py``): :func:`chromium`. Every run is offline: every host name but the
loopback ones resolves to nothing (:data:`OFFLINE`) and no proxy is used, so a page that needs
the internet renders as it would on a machine without it. Each run has a profile directory of
its own, removed afterwards, so runs never share state; the browser is always killed, and
every wait is bounded.

A module of browser tests shares one Chromium instead (``with Chromium.start() as chromium``,
a module-scoped fixture), and each test takes ``with chromium.page() as browser``: a tab in a
browser context of its own, which has its own cookies, storage and cache as a new profile
would, and is thrown away with them after the test. Starting Chromium costs about a second of
CPU and two of waiting on a busy machine; a context, a few milliseconds.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import ClientConnection

from tests.chromium_process import (
    OFFLINE,
    TIMEOUT_SECONDS,
    DevTools,
    chromium,
    connected,
    find_chromium,
    first_tab,
    launched,
)

__all__ = ["OFFLINE", "Browser", "Chromium", "chromium", "find_chromium"]


class Browser(DevTools):
    """A DevTools connection to one tab of a headless Chromium: navigate, run a script in the
    page, wait for a condition, fill a form, read cookies, take a screenshot."""

    @classmethod
    @contextmanager
    def start(
        cls,
        binary: str | None = None,
        size: tuple[int, int] = (1280, 900),
        timeout: float = TIMEOUT_SECONDS,
    ) -> Iterator[Browser]:
        """A fresh Chromium (offline, its own profile, a ``size`` viewport) on a blank tab;
        ``binary`` defaults to :func:`chromium`'s. Killed, with every process it started, on
        the way out."""
        deadline = time.monotonic() + timeout
        with launched(binary, size, deadline) as port:
            tab = first_tab(port, deadline)
            with connected(tab, deadline) as socket:
                browser = cls(socket)
                browser.resize(size)
                yield browser

    def resize(self, size: tuple[int, int]) -> None:
        """Make the page see exactly ``size``, whatever the window's frame takes."""
        width, height = size
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def evaluate(self, script: str) -> Any:
        """The value of the JavaScript expression ``script`` in the page (promises awaited);
        RuntimeError when it throws."""
        result = self.call(
            "Runtime.evaluate", expression=script, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{script[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, script: str, timeout: float = TIMEOUT_SECONDS) -> Any:
        """Evaluate ``script`` until it is truthy; its value. TimeoutError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(script)
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(f"not true within {timeout:g} s: {script}")

    def navigate(self, url: str, timeout: float = TIMEOUT_SECONDS) -> str:
        """Open ``url`` and wait until the document it leads to (after any redirects) has
        loaded; that document's URL."""
        before = self.evaluate("performance.timeOrigin")
        answer = self.call("Page.navigate", url=url, timeout=timeout)
        if answer.get("errorText"):
            raise RuntimeError(f"{url}: {answer['errorText']}")
        return self._loaded_after(before, timeout)

    def submit(self, field_id: str, value: str, timeout: float = TIMEOUT_SECONDS) -> str:
        """Type ``value`` into the input ``#field_id``, submit its form and wait for the page
        the form leads to; its URL."""
        before = self.evaluate("performance.timeOrigin")
        self.evaluate(
            f"(() => {{ const f = document.getElementById({json.dumps(field_id)});"
            f" f.value = {json.dumps(value)}; f.form.requestSubmit(); }})()"
        )
        return self._loaded_after(before, timeout)

    def follow(self, text: str, timeout: float = TIMEOUT_SECONDS) -> str:
        """Click the link that reads ``text`` and wait for the page it leads to; its URL."""
        before = self.evaluate("performance.timeOrigin")
        self.evaluate(
            "[...document.querySelectorAll('a')]"
            f".find(a => a.textContent.trim() === {json.dumps(text)}).click()"
        )
        return self._loaded_after(before, timeout)

    def _loaded_after(self, origin: float, timeout: float) -> str:
        """The URL of the first complete document newer than the one born at ``origin``."""
        url: str = self.wait_for(
            f"performance.timeOrigin !== {json.dumps(origin)}"
            " && document.readyState === 'complete' && location.href",
            timeout,
        )
        return url

    def html(self) -> str:
        """The rendered document, ``document.documentElement.outerHTML``."""
        html: str = self.evaluate("document.documentElement.outerHTML")
        return html

    def cookies(self, url: str) -> list[dict[str, Any]]:
        """The cookies the browser would send to ``url``."""
        cookies: list[dict[str, Any]] = self.call("Network.getCookies", urls=[url])["cookies"]
        return cookies

    def screenshot(self, path: Path, *, full_page: bool = True) -> None:
        """Save the page as a PNG: the whole page, or only what the window shows."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            width, height = size["width"], size["height"]
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        data = self.call("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))


class Chromium(DevTools):
    """A DevTools connection to a whole headless Chromium, for tests that share it: each
    takes a :meth:`page` of its own."""

    def __init__(self, socket: ClientConnection, port: int, size: tuple[int, int]) -> None:
        super().__init__(socket)
        self._port = port
        self._size = size

    @classmethod
    @contextmanager
    def start(
        cls,
        binary: str | None = None,
        size: tuple[int, int] = (1280, 900),
        timeout: float = TIMEOUT_SECONDS,
    ) -> Iterator[Chromium]:
        """A fresh Chromium as :meth:`Browser.start` starts one, whose pages have a ``size``
        viewport. Killed, with every process it started, on the way out."""
        deadline = time.monotonic() + timeout
        with launched(binary, size, deadline) as port:
            with httpx.Client(timeout=5, trust_env=False) as client:
                version = client.get(f"http://127.0.0.1:{port}/json/version").json()
            with connected(version["webSocketDebuggerUrl"], deadline) as socket:
                yield cls(socket, port, size)

    @contextmanager
    def page(self, timeout: float = TIMEOUT_SECONDS) -> Iterator[Browser]:
        """A blank tab in a new browser context (no cookie, storage or cache of another
        page's), closed with its context on the way out."""
        context = self.call("Target.createBrowserContext")["browserContextId"]
        try:
            tab = self.call("Target.createTarget", url="about:blank", browserContextId=context)
            url = f"ws://127.0.0.1:{self._port}/devtools/page/{tab['targetId']}"
            with connected(url, time.monotonic() + timeout) as socket:
                browser = Browser(socket)
                browser.resize(self._size)
                yield browser
        finally:
            self.call("Target.disposeBrowserContext", browserContextId=context)
