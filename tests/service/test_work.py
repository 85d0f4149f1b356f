"""The bounded pool of CPU-heavy work: admission, budgets, abandonment (app/service/work.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from joblib import Parallel, delayed

from app.calibration.kernels.budget import Abandoned, checkpoint, in_context
from app.errors import Busy, ClientGone, OverBudget
from app.service.work import JOB_BYTES, WorkPool
from app.settings import Settings

BOUND = 10.0
"""Generous bound on every wait, so that a broken pool fails instead of hanging."""


def _pool(
    workers: int = 1, queue: int = 0, budget: float = BOUND, memory_mb: int = 1024
) -> WorkPool:
    """A pool of ``workers`` threads, ``queue`` waiting jobs at most, ``budget`` seconds a job
    and ``memory_mb`` of bodies held by admitted jobs."""
    return WorkPool(
        Settings(
            max_concurrent_fits=workers,
            max_queued_fits=queue,
            fit_timeout_seconds=budget,
            queue_memory_mb=memory_mb,
        )
    )


async def run(pool: WorkPool, gone: Any, function: Any, *args: Any) -> Any:
    """A job admitted without a body, then supervised (as the web layer's off_loop does)."""
    with pool.admit():
        return await pool.supervise(gone, function, *args)


def _spin_until_stopped(started: threading.Event, stopped: list[str]) -> str:
    """A job that only ends by being abandoned at a checkpoint (or after BOUND)."""
    started.set()
    deadline = time.monotonic() + BOUND
    try:
        while time.monotonic() < deadline:
            checkpoint()
            time.sleep(0.001)
    except Abandoned as exc:
        stopped.append(str(exc))
        raise
    return "finished"


def test_a_full_pool_refuses_at_once_and_frees_its_places() -> None:
    pool = _pool(1, 1, BOUND)
    release = threading.Event()

    async def scenario() -> None:
        first = asyncio.ensure_future(run(pool, None, release.wait, BOUND))
        second = asyncio.ensure_future(run(pool, None, release.wait, BOUND))
        await asyncio.sleep(0.05)
        with pytest.raises(Busy) as refused:
            await run(pool, None, lambda: "third")
        assert refused.value.retry_after_seconds is not None
        assert refused.value.status == 503
        release.set()
        assert await asyncio.wait_for(asyncio.gather(first, second), BOUND) == [True, True]
        assert await run(pool, None, lambda: "again") == "again"  # places were given back

    try:
        asyncio.run(scenario())
    finally:
        release.set()
        pool.close()


def test_a_job_past_its_budget_stops_at_its_next_checkpoint() -> None:
    pool = _pool(1, 0, 0.05)
    stopped: list[str] = []
    try:
        with pytest.raises(OverBudget, match=r"budget of 0\.05 s"):
            asyncio.run(run(pool, None, _spin_until_stopped, threading.Event(), stopped))
    finally:
        pool.close()
    assert len(stopped) == 1
    assert "budget" in stopped[0]


def test_a_job_whose_client_left_is_abandoned() -> None:
    pool = _pool(1, 0, BOUND)
    started = threading.Event()
    stopped: list[str] = []

    async def receive() -> dict[str, str]:
        while not started.is_set():
            await asyncio.sleep(0.001)
        return {"type": "http.disconnect"}

    try:
        with pytest.raises(ClientGone):
            asyncio.run(run(pool, receive, _spin_until_stopped, started, stopped))
    finally:
        pool.close()
    assert stopped == ["the job was cancelled"]


def test_a_job_that_ends_before_the_client_leaves_answers() -> None:
    pool = _pool(1, 0, BOUND)
    never = asyncio.Event()

    async def receive() -> dict[str, str]:
        await never.wait()
        return {"type": "http.disconnect"}

    try:
        assert asyncio.run(run(pool, receive, lambda: 42)) == 42
    finally:
        pool.close()


def test_checkpoints_in_joblib_threads_see_the_budget() -> None:
    pool = _pool(1, 0, 0.05)
    stopped: list[str] = []

    def folds() -> list[str]:
        run = in_context(_spin_until_stopped)
        result: list[str] = Parallel(n_jobs=2, prefer="threads")(
            delayed(run)(threading.Event(), stopped) for _ in range(2)
        )
        return result

    try:
        with pytest.raises(OverBudget):
            asyncio.run(run(pool, None, folds))
    finally:
        pool.close()
    assert len(stopped) == 2


def test_admission_counts_bytes_not_jobs_so_small_jobs_all_wait_their_turn() -> None:
    # One thread and room for 10,000 waiting jobs: 500 small jobs at once are all admitted
    # and all run (issue 25: 20 of 32 small fits were refused when admission counted jobs).
    pool = _pool(1, 10_000)

    async def scenario() -> list[int]:
        return await asyncio.gather(*(run(pool, None, lambda i=i: i) for i in range(500)))

    try:
        assert asyncio.run(scenario()) == list(range(500))
    finally:
        pool.close()


def test_bodies_past_the_memory_budget_are_refused_naming_it() -> None:
    pool = _pool(1, 10_000, memory_mb=1)
    body = 600 * 1024  # two of them with their JOB_BYTES pass 1 MiB
    assert 2 * (body + JOB_BYTES) > 2**20 >= body + JOB_BYTES
    with pool.admit(body):
        with pytest.raises(Busy, match="CALIBRATION_QUEUE_MEMORY_MB") as refused:
            pool.refuse_when_full(body)
        assert refused.value.status == 503
        assert refused.value.retry_after_seconds is not None
        with pytest.raises(Busy), pool.admit(body):
            pass
        with pool.admit(0):  # a small job still fits beside it
            pass
    with pool.admit(body), pool.admit(0):  # the place was given back
        pass


def test_a_job_alone_is_admitted_whatever_its_body() -> None:
    # The body limit bounds a single job; the budget bounds what waits beside others.
    pool = _pool(1, 10_000, memory_mb=1)
    with pool.admit(8 * 2**20), pytest.raises(Busy):
        pool.refuse_when_full(0)


def test_checkpoint_outside_a_job_does_nothing() -> None:
    checkpoint()
