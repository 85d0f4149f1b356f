"""Real servers for the tests over sockets: ``python -m app.serve`` as a process
(:class:`Service`), a PostgreSQL cluster it may lose (:class:`Cluster`), and the ones that
several modules of the serial run share (``tests/conftest.py`` makes them fixtures).

A start of ``app.serve`` costs seconds (the imports, the migration) and seconds more of CPU
in the background (its workers' fork server), and a cluster of our own costs ``initdb``: so
the serial tests that need the same server take it from one session fixture rather than
start their own.

- :func:`deadline_server`: SQLite, 0.5 s header and body deadlines, ``X-Forwarded-*`` trusted
  only from 127.0.0.2 (``tests/server/test_timeouts.py``, ``test_protocol_limits.py``).
- :func:`faults_cluster` and :func:`faults_service`: a throwaway PostgreSQL cluster of the
  session's own (stopping it must not disturb the session's other PostgreSQL), and one
  ``app.serve`` on it with short database timeouts (``tests/server/test_faults.py``,
  ``tests/service/traffic/test_traffic_faults.py``); :func:`faults_spare`, a second one
  started with it: the two replicas of ``tests/server/test_two_processes.py``'s freshness
  test, and the process the traffic test kills.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from app.store.migrate import upgrade
from demo.server import LocalService
from tests.api.helpers import sigmoid_batch
from tests.ports import free_port
from tests.postgres import unavailable

BATCH = {**sigmoid_batch(200), "method": "platt"}
SCORES = {"scores": [-2.0, 0.0, 0.5, 3.0]}


# -- the service as a process ----------------------------------------------------------------
class Service(LocalService):
    """The demo's :class:`~demo.server.LocalService` with JSON logs at info level (the tests
    read them), an HTTP client on it, and the calls the tests make."""

    def __init__(self, database_url: str, log: Path, workers: int = 1, **settings: str) -> None:
        logs = {"CALIBRATION_LOG_FORMAT": "json", "CALIBRATION_LOG_LEVEL": "info"}
        super().__init__(database_url, log, workers, **{**logs, **settings})
        self.client = httpx.Client(base_url=self.base_url, timeout=30)

    def fit(self, name: str, batch: dict[str, Any] = BATCH) -> httpx.Response:
        return self.client.post(f"/v1/calibrators/{name}/fit", json=batch)

    def predict(self, name: str, version: str = "latest") -> httpx.Response:
        return self.client.post(f"/v1/calibrators/{name}/predict?version={version}", json=SCORES)

    def versions(self, name: str) -> list[int]:
        r = self.client.get(f"/v1/calibrators/{name}", params={"limit": 100})
        assert r.status_code == 200, r.text
        return sorted(v["version"] for v in r.json()["versions"])

    def stop(self) -> None:
        """Close the client, then stop the process."""
        self.client.close()
        super().stop()


# -- the server with short read deadlines ------------------------------------------------------
DEADLINE_SECONDS = 0.5
"""The header and body timeouts of :func:`deadline_server`, in seconds."""

TRUSTED_PROXY = "127.0.0.2"
"""The one address whose ``X-Forwarded-*`` :func:`deadline_server` believes: on loopback
(Linux routes all of 127.0.0.0/8 there), so a test may connect from it or, as the other tests
do, from 127.0.0.1, which it does not trust."""

MIN_BODY_RATE = 1000
"""The body minimum rate of :func:`deadline_server`, in bytes a second: far below what the
tests that send whole bodies reach, far above a byte at a time."""

DEADLINE_SETTINGS = {
    "CALIBRATION_HEADER_TIMEOUT_SECONDS": str(DEADLINE_SECONDS),
    "CALIBRATION_BODY_TIMEOUT_SECONDS": str(DEADLINE_SECONDS),
    "CALIBRATION_BODY_MIN_RATE_BYTES": str(MIN_BODY_RATE),
    "CALIBRATION_FORWARDED_ALLOW_IPS": TRUSTED_PROXY,
}


@pytest.fixture(scope="session")
def deadline_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One ``app.serve`` (one worker, SQLite) with :data:`DEADLINE_SETTINGS`."""
    directory = tmp_path_factory.mktemp("deadlines")
    url = f"sqlite:///{directory / 'calibration.db'}"
    service = Service(url, directory / "serve.log", 1, **DEADLINE_SETTINGS)
    try:
        service.wait_until_ready()
        yield service
    finally:
        service.stop()


# -- a PostgreSQL cluster of our own -------------------------------------------------------
CONNECT_TIMEOUT = 2.0
STATEMENT_TIMEOUT = 2.0
REFRESH_SECONDS = 1.0
FAULT_SETTINGS = {
    "CALIBRATION_DB_CONNECT_TIMEOUT_SECONDS": f"{CONNECT_TIMEOUT:g}",
    "CALIBRATION_DB_STATEMENT_TIMEOUT_SECONDS": f"{STATEMENT_TIMEOUT:g}",
    "CALIBRATION_LATEST_REFRESH_SECONDS": f"{REFRESH_SECONDS:g}",
}

TRAFFIC_BUFFER_ROWS = 500
"""The prediction log's buffer in :func:`faults_service`, which an outage under one client's
logged predicts overflows within seconds (``test_traffic_faults.py``; the other tests on it
log nothing): that client is answered some hundreds of times a second, ~150 on a busy
machine."""

TRAFFIC_FLUSH_ROWS = 100
"""A flush starts once this many logged predictions wait (in :func:`faults_service`): while
the database is up the buffer never nears :data:`TRAFFIC_BUFFER_ROWS`, however fast the
client (at the default 5000 the 1 s between flushes would overflow it)."""


class Cluster:
    """A throwaway PostgreSQL cluster on loopback that tests may stop, start and freeze."""

    def __init__(self, directory: Path) -> None:
        initdbs = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not initdbs:
            unavailable("no /usr/lib/postgresql/*/bin/initdb")
        self.bindir = Path(initdbs[-1]).parent
        self.directory = directory
        self.data = directory / "data"
        self.port = free_port()
        self.as_postgres: list[str] = []
        if os.geteuid() == 0:  # the server refuses to run as root
            user = pwd.getpwnam("postgres")
            os.chown(directory, user.pw_uid, user.pw_gid)
            self.as_postgres = ["runuser", "-u", "postgres", "--"]
        self.frozen: list[int] = []

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        command = [*self.as_postgres, str(self.bindir / args[0]), *args[1:]]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)

    def init(self) -> None:
        # --no-sync: throwaway, as tests/postgres.py's (no flush of its files to disk)
        result = self._run(
            "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"
        )
        if result.returncode != 0:
            unavailable(f"initdb failed: {result.stderr or result.stdout}")

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        log = str(self.directory / "log")
        result = self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")
        assert result.returncode == 0, result.stderr or result.stdout

    def stop(self, mode: str = "fast") -> None:
        result = self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")
        assert result.returncode == 0, result.stderr or result.stdout

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def pids(self) -> list[int]:
        """The postmaster, then every process it started (backends, checkpointer, ...)."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == postmaster:
                    children.append(int(stat.parent.name))
        return [postmaster, *children]

    def freeze(self) -> None:
        """SIGSTOP the whole cluster: it keeps its sockets, and answers nothing."""
        for _ in range(2):  # the second pass catches a child forked during the first
            for pid in self.pids():
                if pid not in self.frozen:
                    self.frozen.append(pid)
                    os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in reversed(self.frozen):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.frozen.clear()

    def cleanup(self) -> None:
        """Never leave a frozen or running server behind."""
        self.thaw()
        if self.running():
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop", timeout=30)


@pytest.fixture(scope="session")
def faults_cluster() -> Iterator[Cluster]:
    """A cluster of the session's own with a migrated ``calibration`` database."""
    directory = Path(tempfile.mkdtemp(prefix="calibration-faults-pg-"))
    owned = Cluster(directory)
    try:
        owned.init()
        owned.start()
        engine = create_engine(owned.url(), poolclass=NullPool, isolation_level="AUTOCOMMIT")
        with engine.connect() as connection:
            connection.execute(text("CREATE DATABASE calibration"))
        engine.dispose()
        upgrade(owned.url("calibration"))
        yield owned
    finally:
        owned.cleanup()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def faults_processes(
    faults_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Service]]:
    """:func:`faults_service` and :func:`faults_spare`, started at once: their start-ups
    share the two cores, one start's time for both."""
    directory = tmp_path_factory.mktemp("faults")
    url = faults_cluster.url("calibration")
    shared = {
        **FAULT_SETTINGS,
        "CALIBRATION_TRAFFIC_BUFFER_ROWS": str(TRAFFIC_BUFFER_ROWS),
        "CALIBRATION_TRAFFIC_FLUSH_ROWS": str(TRAFFIC_FLUSH_ROWS),
    }
    started: list[Service] = []
    try:
        started.append(Service(url, directory / "serve.log", 1, **shared))
        started.append(Service(url, directory / "spare.log", 1, **FAULT_SETTINGS))
        for served in started:
            served.wait_until_ready()
        yield started
    finally:
        for served in started:
            served.stop()


@pytest.fixture(scope="session")
def faults_service(faults_processes: list[Service]) -> Service:
    """One ``app.serve`` (one worker) on :func:`faults_cluster` with :data:`FAULT_SETTINGS`.
    Each test that uses it has calibrators of its own names; the cluster is running again
    when a test ends (each restarts or thaws what it stopped)."""
    return faults_processes[0]


@pytest.fixture
def faults_spare(
    faults_processes: list[Service], faults_cluster: Cluster, tmp_path: Path
) -> Service:
    """Another ``app.serve`` on :func:`faults_cluster` (:data:`FAULT_SETTINGS`, the default
    one-second ``latest``), started with :func:`faults_service`: the second replica of
    ``tests/server/test_two_processes.py``, and the process ``test_traffic_faults.py``
    kills. A test that comes after the kill (in another order than the files') gets a new
    one, started then."""
    if faults_processes[1].process.poll() is not None:
        faults_processes[1].stop()
        url = faults_cluster.url("calibration")
        faults_processes[1] = Service(url, tmp_path / "spare.log", 1, **FAULT_SETTINGS)
        faults_processes[1].wait_until_ready()
    return faults_processes[1]
