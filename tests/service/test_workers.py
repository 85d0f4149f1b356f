"""Jobs in worker processes: where they run, what a worker's death, a budget, a departed
client, memory and idleness do to them, and that no worker outlives its server
(app/service/workers/, through app/service/work.py)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.calibration import checkpoint
from app.errors import ClientGone, OverBudget, OverMemory, WorkerLost
from app.observability import current_request_id
from app.service.use_cases import CalibrationService
from app.service.work import WorkPool
from app.service.workers import processes, slots
from app.service.workers.inside import NICENESS
from app.settings import Settings
from tests.processes import marked

BOUND = 30.0
"""Generous bound on every wait, so that a broken pool fails instead of hanging."""


# -- jobs: module-level, so that a worker finds them by name ---------------------------------
def whoami(service: CalibrationService) -> tuple[int, str]:
    return os.getpid(), service.settings.database_url


def sleep_without_checkpoints(service: CalibrationService, seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def spin_with_checkpoints(service: CalibrationService) -> str:
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        checkpoint()
        time.sleep(0.005)
    return "finished"


def sleep_then_whoami(service: CalibrationService, seconds: float) -> tuple[int, str]:
    time.sleep(seconds)
    return whoami(service)


def niceness(service: CalibrationService) -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def die(service: CalibrationService) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def grow(service: CalibrationService, megabytes: int, steps: int) -> int:
    held = []
    for _ in range(steps):
        held.append(np.ones(megabytes * 2**20 // 8))
        time.sleep(0.05)
    return len(held)


def allocate(service: CalibrationService, megabytes: int) -> int:
    block = np.ones(megabytes * 2**20 // 8)
    return int(block.size)


def parse_big_json(service: CalibrationService) -> tuple[int, list[int]]:
    from app.api.bodies import json_process

    body = b'{"scores": [' + b",".join([b"0.5"] * 300_000) + b"]}"
    assert len(body) >= json_process.IN_PROCESS_BYTES
    parsed = json_process.parse_json_body(body, {"scores": False})
    return len(parsed["scores"]), json_process._worker.pids()


def unpicklable(service: CalibrationService) -> object:
    return threading.Lock()


def request_and_log(service: CalibrationService) -> tuple[str | None, list[str]]:
    root = logging.getLogger()
    return current_request_id.get(), [type(h.formatter).__name__ for h in root.handlers]


class TwoPartError(Exception):
    """An exception pickle cannot rebuild (its __init__ takes two arguments)."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")


def fail_unpicklably(service: CalibrationService) -> None:
    raise TwoPartError("params", "bad")


def touch(service: CalibrationService, path: str) -> None:
    Path(path).touch()


def fail(service: CalibrationService) -> None:
    raise ValueError("a job's own error")


# -- the pool under test ----------------------------------------------------------------------
def _pool(tmp_path: Path, **settings: Any) -> WorkPool:
    return WorkPool(Settings(database_url=f"sqlite:///{tmp_path / 'w.db'}", **settings))


def _run(pool: WorkPool, function: Any, *args: Any, gone: Any = None) -> Any:
    async def call() -> Any:
        return await asyncio.wait_for(pool.run_job(gone, None, function, 0, *args), BOUND)  # type: ignore[arg-type]

    return asyncio.run(call())


def _wait_until(condition: Any, seconds: float = BOUND) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return True


def test_a_job_runs_in_another_process_with_a_service_of_the_servers_settings(
    tmp_path: Path,
) -> None:
    pool = _pool(tmp_path)
    try:
        pid, url = _run(pool, whoami)
        assert pid != os.getpid()
        assert url == pool.settings.database_url
        again, _ = _run(pool, whoami)
        assert again == pid  # the idle worker took the next job
    finally:
        pool.close()


def test_a_worker_runs_below_its_server_s_priority(tmp_path: Path) -> None:
    """The kernel runs the serving process before busy workers (``/healthz`` while jobs
    crunch): a worker's nice value is its server's plus NICENESS."""
    pool = _pool(tmp_path)
    try:
        assert _run(pool, niceness) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + NICENESS)
    finally:
        pool.close()


def test_a_worker_parses_a_big_json_body_itself(tmp_path: Path) -> None:
    # Not in a JSON process of its own: that one keeps a server's event loop free.
    pool = _pool(tmp_path)
    try:
        assert _run(pool, parse_big_json) == (300_000, [])
    finally:
        pool.close()


def test_a_jobs_log_lines_carry_its_request_id_in_the_servers_format(tmp_path: Path) -> None:
    pool = _pool(tmp_path, log_format="json")
    current_request_id.set("trace-7")
    try:
        assert _run(pool, request_and_log) == ("trace-7", ["JsonFormatter"])
    finally:
        current_request_id.set(None)
        pool.close()


def test_a_jobs_defect_arrives_as_a_runtime_error_naming_it(tmp_path: Path) -> None:
    pool = _pool(tmp_path)
    try:
        with pytest.raises(RuntimeError, match=r"ValueError: a job's own error"):
            _run(pool, fail)
        assert _run(pool, whoami)[0] != os.getpid()
    finally:
        pool.close()


def test_an_answer_that_cannot_be_sent_back_fails_its_job_and_frees_its_place(
    tmp_path: Path,
) -> None:
    pool = _pool(tmp_path)
    try:
        with pytest.raises(TypeError, match="pickle"):
            _run(pool, unpicklable)
        assert processes.pids(idle=False) == []
        assert _run(pool, whoami)[0] != os.getpid()
    finally:
        pool.close()


def test_an_error_pickle_cannot_rebuild_arrives_as_a_runtime_error_not_a_dead_worker(
    tmp_path: Path,
) -> None:
    pool = _pool(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="TwoPartError: params: bad"):
            _run(pool, fail_unpicklably)
    finally:
        pool.close()


def test_a_worker_that_dies_fails_only_its_job_and_is_replaced(tmp_path: Path) -> None:
    pool = _pool(tmp_path, max_concurrent_fits=2)
    try:

        async def both() -> list[Any]:
            return await asyncio.gather(
                pool.run_job(None, None, die, 0),  # type: ignore[arg-type]
                pool.run_job(None, None, sleep_without_checkpoints, 0, 0.5),  # type: ignore[arg-type]
                return_exceptions=True,
            )

        died, slept = asyncio.run(both())
        assert isinstance(died, WorkerLost)
        assert died.status == 503
        assert died.retry_after_seconds is not None
        assert slept == "slept"
        after, _ = _run(pool, whoami)
        assert _alive(after)
    finally:
        pool.close()


def _running_pid(pool: WorkPool, function: Any, *args: Any, gone: Any = None) -> tuple[Any, int]:
    """Run ``function`` as a job in a thread of the test, and the pid of its worker."""
    outcome: list[Any] = []

    def call() -> None:
        try:
            outcome.append(_run(pool, function, *args, gone=gone))
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    assert _wait_until(lambda: bool(processes.pids(idle=False)) or bool(outcome))
    (pid,) = processes.pids(idle=False)
    thread.join(BOUND)
    return outcome[0], pid


def test_a_job_that_ignores_its_budget_is_killed_with_its_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slots, "GRACE_SECONDS", 0.2)
    pool = _pool(tmp_path, fit_timeout_seconds=0.2)
    try:
        started = time.monotonic()
        outcome, pid = _running_pid(pool, sleep_without_checkpoints, BOUND)
        assert isinstance(outcome, OverBudget)
        assert "budget of 0.2 s" in outcome.detail
        assert time.monotonic() - started < BOUND / 2
        assert _wait_until(lambda: not _alive(pid), 10)
    finally:
        pool.close()


def test_a_job_whose_client_left_stops_at_its_checkpoint_and_keeps_its_worker(
    tmp_path: Path,
) -> None:
    pool = _pool(tmp_path)

    async def leaves() -> None:
        await asyncio.sleep(0.3)

    try:
        outcome, pid = _running_pid(pool, spin_with_checkpoints, gone=leaves)
        assert isinstance(outcome, ClientGone)
        assert _run(pool, whoami)[0] == pid  # stopped by itself: the worker serves on
    finally:
        pool.close()


def test_a_job_that_left_while_queued_never_runs(tmp_path: Path) -> None:
    pool = _pool(tmp_path, max_concurrent_fits=1)
    marker = tmp_path / "ran"

    async def scenario() -> list[Any]:
        async def gone_at_once() -> None:
            return None

        busy = pool.run_job(None, None, sleep_without_checkpoints, 0, 0.5)  # type: ignore[arg-type]
        queued = pool.run_job(gone_at_once, None, touch, 0, str(marker))  # type: ignore[arg-type]
        return await asyncio.gather(busy, queued, return_exceptions=True)

    try:
        slept, left = asyncio.run(scenario())
        assert slept == "slept"
        assert isinstance(left, ClientGone)
        assert not marker.exists()
    finally:
        pool.close()


def test_a_job_past_its_budget_stops_itself_at_a_checkpoint_in_the_worker(
    tmp_path: Path,
) -> None:
    pool = _pool(tmp_path, fit_timeout_seconds=0.2)
    try:
        pid, _ = _run(pool, whoami)
        with pytest.raises(OverBudget):
            _run(pool, spin_with_checkpoints)
        assert _run(pool, whoami)[0] == pid  # stopped by itself: the worker was kept
    finally:
        pool.close()


def test_a_job_whose_client_left_and_that_ignores_checkpoints_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slots, "GRACE_SECONDS", 0.2)
    pool = _pool(tmp_path)

    async def leaves() -> None:
        await asyncio.sleep(0.3)

    try:
        outcome, pid = _running_pid(pool, sleep_without_checkpoints, BOUND, gone=leaves)
        assert isinstance(outcome, ClientGone)
        assert _wait_until(lambda: not _alive(pid), 10)
    finally:
        pool.close()


def test_a_worker_past_its_memory_mark_or_job_count_is_replaced(tmp_path: Path) -> None:
    pool = _pool(tmp_path, worker_memory_mb=64)  # any worker holds more than 64 MB
    try:
        first, _ = _run(pool, whoami)
        second, _ = _run(pool, whoami)
        assert first != second
        assert _wait_until(lambda: not _alive(first), 10)
    finally:
        pool.close()
    pool = _pool(tmp_path, worker_max_jobs=2)
    try:
        pids = [_run(pool, whoami)[0] for _ in range(4)]
        assert pids[0] == pids[1] != pids[2] == pids[3]
    finally:
        pool.close()


def test_an_idle_worker_exits_unless_it_is_the_last_used_and_small(tmp_path: Path) -> None:
    pool = _pool(tmp_path, worker_idle_seconds=0.5, max_concurrent_fits=2)

    async def two() -> list[tuple[int, str]]:
        jobs = [pool.run_job(None, None, sleep_then_whoami, 0, t) for t in (0.2, 0.8)]  # type: ignore[arg-type]
        return await asyncio.gather(*jobs)

    try:
        first, last = (pid for pid, _ in asyncio.run(two()))
        assert first != last
        # the one used last stays warm (it was kept: under worker_memory_mb), the other exits
        assert _wait_until(lambda: not _alive(first), 10)
        time.sleep(1.0)
        assert _alive(last)
    finally:
        pool.close()


def test_a_job_past_its_memory_limit_is_413_and_its_worker_replaced(tmp_path: Path) -> None:
    pool = _pool(tmp_path, job_memory_mb=512)
    try:
        pid, _ = _run(pool, whoami)
        with pytest.raises(OverMemory, match="CALIBRATION_JOB_MEMORY_MB") as refused:
            _run(pool, allocate, 1024)  # at once: the data limit refuses it (MemoryError)
        assert refused.value.status == 413
        assert _wait_until(lambda: not _alive(pid), 10)  # its heap stays at the limit: gone
        assert _run(pool, allocate, 64) == 64 * 2**20 // 8  # a fresh worker serves on
    finally:
        pool.close()


def test_a_job_that_grows_past_its_memory_limit_is_stopped_with_413(tmp_path: Path) -> None:
    # Resident memory growing step by step is watched from the server: the job stops at the
    # limit with 413, before C code that does not check its allocations could crash it.
    pool = _pool(tmp_path, job_memory_mb=512)
    try:
        outcome, pid = _running_pid(pool, grow, 32, 40)
        assert isinstance(outcome, OverMemory)
        assert _wait_until(lambda: not _alive(pid), 10)
        assert _run(pool, allocate, 64) == 64 * 2**20 // 8
    finally:
        pool.close()


def test_in_threads_when_work_processes_is_off(tmp_path: Path) -> None:
    pool = _pool(tmp_path, work_processes=False)
    service = type("Service", (), {"settings": pool.settings})()

    async def call() -> Any:
        return await pool.run_job(None, service, whoami, 0)  # type: ignore[arg-type]

    try:
        assert asyncio.run(call())[0] == os.getpid()
    finally:
        pool.close()


SERVER = textwrap.dedent(
    """
    import asyncio, sys
    from app.service.work import WorkPool
    from app.settings import Settings
    from tests.service.test_workers import sleep_without_checkpoints

    async def main():
        pool = WorkPool(Settings(database_url=sys.argv[1], max_concurrent_fits=2))
        jobs = [pool.run_job(None, None, sleep_without_checkpoints, 0, 600) for _ in range(2)]
        print("started", flush=True)
        await asyncio.gather(*jobs)

    if __name__ == "__main__":
        asyncio.run(main())
    """
)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_no_process_outlives_a_server_killed_with_sigkill(tmp_path: Path) -> None:
    marker = f"CALIBRATION_TEST_MARK={os.getpid()}-{time.monotonic_ns()}"
    key, value = marker.split("=")
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    server = subprocess.Popen(
        [sys.executable, str(script), f"sqlite:///{tmp_path / 's.db'}"],
        env={**os.environ, key: value, "PYTHONPATH": os.getcwd()},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "started"
        # the two workers, the fork server (and the resource tracker) beside the server
        assert _wait_until(lambda: len(marked(marker)) >= 4, BOUND)
        server.kill()
        server.wait(BOUND)
        assert _wait_until(lambda: not marked(marker), 10), marked(marker)
    finally:
        server.kill()
        for pid in marked(marker):
            os.kill(pid, signal.SIGKILL)
