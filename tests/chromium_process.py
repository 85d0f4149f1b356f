"""Launching headless Chromium for :mod:`tests.browser`: where it is, the flags that keep it
offline, the process and its DevTools connection (each wait bounded)."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

NAMES = ("chromium", "chromium-browser")
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1 , EXCLUDE localhost"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--no-first-run",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-proxy-server",
    OFFLINE,
)
TIMEOUT_SECONDS = 30.0
"""The longest one wait may take by default (the machine is shared: it can be slow)."""


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


class DevTools:
    """A DevTools connection: to a tab (:class:`Browser`) or to the whole browser
    (:class:`Chromium`)."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    def call(self, method: str, *, timeout: float = TIMEOUT_SECONDS, **params: Any) -> Any:
        """Send one DevTools command and return its result (events in between are dropped)."""
        number = next(self._ids)
        self._socket.send(json.dumps({"id": number, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            try:
                raw = self._socket.recv(timeout=max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                raise TimeoutError(f"{method}: no answer within {timeout:g} s") from None
            message = json.loads(raw)
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})


@contextmanager
def launched(binary: str | None, size: tuple[int, int], deadline: float) -> Iterator[int]:
    """A fresh Chromium (offline, its own profile, a window of ``size``) on a blank tab, and
    its DevTools port; ``binary`` defaults to :func:`chromium`'s. Killed, with every process
    it started, on the way out."""
    width, height = size
    with tempfile.TemporaryDirectory(prefix="chromium-", ignore_cleanup_errors=True) as profile:
        command = [
            binary or chromium(),
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--remote-debugging-port=0",
            "about:blank",
        ]
        process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its renderers share its process group: kill them all
        )
        try:
            yield devtools_port(Path(profile), process, deadline)
        finally:  # a throwaway browser with a throwaway profile: nothing to shut down cleanly
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@contextmanager
def connected(url: str, deadline: float) -> Iterator[ClientConnection]:
    """A DevTools WebSocket to ``url``, opened within what is left before ``deadline`` (a
    second at least)."""
    opening = max(deadline - time.monotonic(), 1.0)
    with connect(url, open_timeout=opening, max_size=None) as socket:
        yield socket


def devtools_port(profile: Path, process: subprocess.Popen[bytes], deadline: float) -> int:
    """The port Chromium chose (``--remote-debugging-port=0`` writes it to the profile)."""
    announced = profile / "DevToolsActivePort"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited {process.returncode} before DevTools answered")
        text = announced.read_text() if announced.exists() else ""
        if re.match(r"\d+\n", text):
            return int(text.split()[0])
        time.sleep(0.05)
    raise TimeoutError("chromium announced no DevTools port in time")


def first_tab(port: int, deadline: float) -> str:
    """The DevTools WebSocket URL of the browser's first tab."""
    with httpx.Client(timeout=5, trust_env=False) as client:  # one for every poll
        while time.monotonic() < deadline:
            listed = client.get(f"http://127.0.0.1:{port}/json/list")
            tabs = [t["webSocketDebuggerUrl"] for t in listed.json() if t["type"] == "page"]
            if tabs:
                url: str = tabs[0]
                return url
            time.sleep(0.05)
    raise TimeoutError("chromium opened no tab in time")
