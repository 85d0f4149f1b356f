"""Headless Chromium for the tests: the DOM a page renders, a screenshot, and a page to drive.

Debian's ``chromium`` (``make chromium``; ``make test`` installs it). Without it the browser
tests are skipped, except under ``CI``, where that is a failure (as for PostgreSQL in
``tests/conftest.py``). Every run is offline: every host name but the loopback ones resolves
to nothing (:data:`OFFLINE`), so a page that needs the internet renders as it would on a
machine without it. Each run has a profile directory of its own, so runs never share state.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

NAMES = ("chromium", "chromium-browser")
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1 , EXCLUDE localhost"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", OFFLINE)
TIMEOUT_SECONDS = 90.0
"""The longest one Chromium run may take (the machine is shared: it can be slow)."""


def find_chromium() -> str | None:
    """The path of the Chromium binary, or None."""
    return next(filter(None, map(shutil.which, NAMES)), None)


def chromium() -> str:
    """The Chromium binary; skip the test without it (fail under CI)."""
    found = find_chromium()
    if found is None:
        reason = f"none of {', '.join(NAMES)} is on PATH (make chromium installs it)"
        if os.environ.get("CI"):
            pytest.fail(f"Chromium is required under CI: {reason}", pytrace=False)
        pytest.skip(f"Chromium missing and CI unset: {reason}")
    return found


def _run(binary: str, *args: str) -> str:
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        command = [binary, *FLAGS, f"--user-data-dir={profile}", *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
    if result.returncode != 0:
        raise RuntimeError(f"chromium exited {result.returncode}: {result.stderr[-2000:]}")
    return result.stdout


def dump_dom(url: str, budget_ms: int = 10_000, binary: str | None = None) -> str:
    """The DOM Chromium renders for ``url`` after ``budget_ms`` of virtual time (scripts run)."""
    budget = f"--virtual-time-budget={budget_ms}"
    return _run(binary or chromium(), budget, "--dump-dom", url)


def screenshot(
    url: str,
    path: Path,
    size: tuple[int, int] = (1280, 900),
    budget_ms: int = 10_000,
    binary: str | None = None,
) -> None:
    """Save a PNG of ``url`` as a ``size`` window shows it, scripts run for ``budget_ms``."""
    width, height = size
    _run(
        binary or chromium(),
        f"--virtual-time-budget={budget_ms}",
        f"--window-size={width},{height}",
        f"--screenshot={path.resolve()}",
        url,
    )
    if not path.is_file():
        raise RuntimeError(f"chromium wrote no screenshot to {path}")


class Page:
    """One tab of a running Chromium, driven over the DevTools protocol: run a script in the
    page, wait for a condition."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    def command(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result (events in between are dropped)."""
        number = next(self._ids)
        self._socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv(timeout=TIMEOUT_SECONDS))
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    def evaluate(self, script: str) -> Any:
        """The value of the JavaScript expression ``script`` in the page (promises awaited)."""
        result = self.command(
            "Runtime.evaluate", expression=script, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{script[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, script: str, timeout: float = 30.0) -> Any:
        """Evaluate ``script`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(script)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"not true within {timeout:g} s: {script}")

    def goto(self, url: str) -> None:
        """Load ``url`` in this tab."""
        self.command("Page.navigate", url=url)


@contextmanager
def open_page(binary: str | None = None) -> Iterator[Page]:
    """A fresh Chromium (offline, its own profile) with one blank tab to drive."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        command = [
            binary or chromium(),
            *FLAGS,
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "about:blank",
        ]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = _devtools_port(Path(profile))
            targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
            tab = next(t for t in targets if t["type"] == "page")
            with connect(tab["webSocketDebuggerUrl"], max_size=None) as socket:
                yield Page(socket)
        finally:  # a throwaway browser with a throwaway profile: nothing to shut down cleanly
            process.kill()
            process.wait(timeout=10)


def _devtools_port(profile: Path, timeout: float = 30.0) -> int:
    """The port Chromium chose (``--remote-debugging-port=0`` writes it to the profile)."""
    announced = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = announced.read_text() if announced.exists() else ""
        if re.match(r"\d+\n", text):
            return int(text.split()[0])
        time.sleep(0.05)
    raise RuntimeError(f"chromium announced no DevTools port within {timeout:g} s")
