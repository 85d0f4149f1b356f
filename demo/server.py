"""A service of the demo's own: ``python -m app.serve`` on a free loopback port with a
temporary SQLite database, without keys (loopback only), stopped when the demo ends.

The tests start theirs with the same :class:`LocalService` (``tests.servers.Service``);
this module imports nothing from the tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop_process_group(process: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """Stop ``process``, started as the leader of a process group of its own
    (``start_new_session=True``), and every process left in that group.

    A process still running gets SIGTERM (as ``docker stop`` sends it: uvicorn's supervisor
    stops its workers gracefully) and ``timeout`` seconds to exit. Then whatever is left of
    its group is killed: the process itself if it did not exit, and the workers and helper
    processes that outlived it (it was killed, or gave up before stopping them), which would
    otherwise run on, orphaned.
    """
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=timeout)


def answers(base_url: str, timeout: float = 1.0) -> bool:
    """Whether a calibration service answers ``/healthz`` at ``base_url``."""
    try:
        return httpx.get(f"{base_url}/healthz", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


class LocalService:
    """One ``python -m app.serve`` process on a free loopback port, in a process group of its
    own, which ``stop`` ends whole (the server and its workers).

    Its database is a SQLite file in a temporary directory (:attr:`directory`) unless
    ``database_url`` names one, its log that directory's ``serve.log`` unless ``log`` names a
    file; ``stop`` removes the directory. ``settings`` are extra ``CALIBRATION_*`` variables,
    and win over this class's own: text logs at warning level, and no keys.
    """

    def __init__(
        self,
        database_url: str | None = None,
        log: Path | None = None,
        workers: int = 1,
        **settings: str,
    ) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="calibration-serve-"))
        port = free_port()
        self.base_url = f"http://127.0.0.1:{port}"
        self.log = log or self.directory / "serve.log"
        database_url = database_url or f"sqlite:///{self.directory / 'demo.db'}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CALIBRATION_")}
        env.update(
            {
                "CALIBRATION_DATABASE_URL": database_url,
                "CALIBRATION_HOST": "127.0.0.1",
                "CALIBRATION_PORT": str(port),
                "CALIBRATION_WORKERS": str(workers),
                "CALIBRATION_LOG_FORMAT": "text",
                "CALIBRATION_LOG_LEVEL": "warning",
                "CALIBRATION_API_KEYS": "",  # an empty value wins over a .env file's keys
                **settings,
            }
        )
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "app.serve"],
                env=env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its workers share its process group: stop them all
            )

    def wait_until_ready(self, timeout: float = 90.0) -> None:
        """Wait for ``/readyz``; RuntimeError with the log when the process exits or is
        not ready within ``timeout`` seconds. (A start takes a few seconds; on a busy machine
        several times that: the generous bound costs time only when the start fails.)"""
        deadline = time.monotonic() + timeout
        # One client for every poll: httpx.get makes a client, and its TLS context, each call
        # (~60 ms of CPU), which the start-up being waited for would share the cores with.
        with httpx.Client(base_url=self.base_url, timeout=2) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    code = self.process.returncode
                    raise RuntimeError(f"app.serve exited {code}:\n{self.output()}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get("/readyz").status_code == 200:
                        return
                time.sleep(0.05)
        raise RuntimeError(f"app.serve was not ready within {timeout:g} s:\n{self.output()}")

    def output(self) -> str:
        """What the process has logged."""
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        """Stop the process and its workers (:func:`stop_process_group`) and remove its
        directory."""
        stop_process_group(self.process)
        shutil.rmtree(self.directory, ignore_errors=True)
