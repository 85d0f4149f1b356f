"""A minimal Chrome DevTools Protocol driver for the browser tests: a headless Chromium of its
own, one page, navigation, JavaScript evaluation, form filling, cookies, screenshots.

``with Browser.start() as browser: browser.navigate(url); browser.html()``. Every wait is
bounded by ``timeout``; the browser is always killed, its profile directory removed. Chromium
is Debian's ``chromium`` (``apt-get install -y chromium``); :func:`chromium_or_skip` skips a
test without it, unless ``CI`` is set, where that is a failure.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium_or_skip() -> str:
    """The Chromium executable, or skip (fail under ``CI``)."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    reason = "no chromium on PATH (apt-get install -y chromium)"
    if os.environ.get("CI"):
        pytest.fail(f"the browser tests need Chromium under CI: {reason}", pytrace=False)
    pytest.skip(reason)


class Browser:
    """One headless Chromium and a DevTools connection to its first page."""

    def __init__(self, process: subprocess.Popen[bytes], socket: ClientConnection) -> None:
        self.process = process
        self.socket = socket
        self.ids = itertools.count(1)

    @classmethod
    @contextmanager
    def start(cls, timeout: float = 20.0) -> Iterator[Browser]:
        """Start Chromium on a DevTools port of its choosing; kill it on the way out."""
        executable = chromium_or_skip()
        profile = Path(tempfile.mkdtemp(prefix="calibration-chromium-"))
        process = subprocess.Popen(
            [
                executable,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--disable-background-networking",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "--window-size=1200,1600",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port = _devtools_port(profile, process, timeout)
            page = _page_target(port, timeout)
            with connect(page, open_timeout=timeout, max_size=64 * 1024 * 1024) as socket:
                browser = cls(process, socket)
                browser.call("Page.enable")
                browser.call("Network.enable")
                yield browser
        finally:
            process.kill()
            process.wait(timeout=10)
            shutil.rmtree(profile, ignore_errors=True)

    def call(self, method: str, timeout: float = 20.0, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events arriving meanwhile are dropped)."""
        number = next(self.ids)
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.socket.recv(timeout=max(deadline - time.monotonic(), 0)))
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def navigate(self, url: str, timeout: float = 20.0) -> str:
        """Open ``url`` and wait until the document (after any redirects) has loaded; the
        URL it ended at."""
        self.call("Page.navigate", url=url)
        return self.wait_for_load(timeout)

    def wait_for_load(self, timeout: float = 20.0) -> str:
        """Wait until the page's document is complete; its URL."""
        deadline = time.monotonic() + timeout
        time.sleep(0.05)  # let a navigation begin before asking whether one finished
        while time.monotonic() < deadline:
            if self.evaluate("document.readyState") == "complete":
                url: str = self.evaluate("location.href")
                return url
            time.sleep(0.05)
        raise TimeoutError(f"the page did not load within {timeout:g} s")

    def html(self) -> str:
        """The rendered document, ``document.documentElement.outerHTML``."""
        html: str = self.evaluate("document.documentElement.outerHTML")
        return html

    def submit(self, field_id: str, value: str, timeout: float = 20.0) -> str:
        """Type ``value`` into the input ``#field_id``, submit its form, wait for the page
        the form leads to; its URL."""
        before = self.evaluate("performance.timeOrigin")
        self.evaluate(
            f"(() => {{ const f = document.getElementById({json.dumps(field_id)});"
            f" f.value = {json.dumps(value)}; f.form.requestSubmit(); }})()"
        )
        deadline = time.monotonic() + timeout
        while self.evaluate("performance.timeOrigin") == before:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the form did not lead anywhere within {timeout:g} s")
            time.sleep(0.05)
        return self.wait_for_load(max(deadline - time.monotonic(), 1.0))

    def cookies(self, url: str) -> list[dict[str, Any]]:
        """The cookies the browser would send to ``url``."""
        cookies: list[dict[str, Any]] = self.call("Network.getCookies", urls=[url])["cookies"]
        return cookies

    def screenshot(self, path: Path, *, full_page: bool = True) -> None:
        """Save the page as a PNG (the whole page, by default)."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": size["width"],
                "height": size["height"],
                "scale": 1,
            }
        data = self.call("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))


def _devtools_port(profile: Path, process: subprocess.Popen[bytes], timeout: float) -> int:
    """The port Chromium wrote to ``DevToolsActivePort`` in its profile."""
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited {process.returncode} before DevTools answered")
        if marker.exists():
            first = marker.read_text().split("\n", 1)[0].strip()
            if first.isdigit():
                return int(first)
        time.sleep(0.05)
    raise TimeoutError(f"chromium wrote no DevToolsActivePort within {timeout:g} s")


def _page_target(port: int, timeout: float) -> str:
    """The WebSocket URL of the browser's first page."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as answer:
            targets = json.loads(answer.read())
        for target in targets:
            if target.get("type") == "page":
                url: str = target["webSocketDebuggerUrl"]
                return url
        time.sleep(0.05)
    raise TimeoutError(f"chromium opened no page within {timeout:g} s")
