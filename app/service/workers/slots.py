"""The slots: one worker process each, taken by a job and given back, replaced or stopped
after it (see :mod:`app.service.workers`)."""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event as EventType
from typing import Any, TypeVar

from app.calibration import Abandoned, Budget
from app.errors import Busy, OverMemory, WorkerLost
from app.observability import current_request_id
from app.service.workers.forking import forkserver
from app.service.workers.inside import Answer, run, start_worker
from app.settings import Settings

logger = logging.getLogger("app.workers")

T = TypeVar("T")

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
POLL_SECONDS = 0.05
"""How often a thread waiting for its worker looks at the job's budget and its client."""
GRACE_SECONDS = 5.0
"""How long past its budget a job may run before its process is killed (it should have
stopped itself at a checkpoint)."""
STOP_SECONDS = 5.0
"""How long stopping a worker waits for it to end, once killed."""


@dataclass(eq=False)
class _Slot:
    """One worker process, its executor and what it did."""

    executor: ProcessPoolExecutor
    data_limit: int
    cancel: EventType
    jobs: int = 0
    idle_since: float = field(default_factory=time.monotonic)

    def pids(self) -> list[int]:
        return list((self.executor._processes or {}).keys())


class WorkerProcesses:
    """The worker processes of this server process (one instance: :data:`processes`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Slot] = []
        self._running: list[_Slot] = []
        self._closed = False
        self._reaper: threading.Thread | None = None
        self._idle_seconds = 10.0

    def call(
        self,
        settings: Settings,
        budget: Budget,
        function: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
    ) -> T:
        """``function(service, *args, **kwargs)`` in a worker, ``service`` being the worker's
        own for ``settings``; blocks the calling thread until it ends. The worker stops the
        job at a checkpoint once ``budget`` is spent or cancelled (the slot's cancel flag
        tells it); one that has not stopped :data:`GRACE_SECONDS` later is killed
        (:class:`Abandoned`). A job cancelled before it has a worker never gets one.

        Raises
        ------
        WorkerLost
            When the worker died before answering.
        OverMemory
            When the job ran out of its memory limit.
        """
        budget.check()  # its client may have left while it waited for a thread
        left = max(0.0, budget.deadline - time.monotonic())  # the clock is the server's
        job = (run, settings, left, current_request_id.get(), function, args, kwargs)
        slot, future = self._submit(settings, job)
        try:
            answer = _wait(future, budget, slot, settings.job_memory_mb)
        except BrokenProcessPool:
            self._discard(slot)
            logger.warning("a worker process died during its job; it will be replaced")
            raise WorkerLost(
                "the worker process running this job died (killed, or out of memory); "
                "nothing was stored"
            ) from None
        except BaseException:  # abandoned, over memory, or an answer that could not come back
            self._discard(slot)
            raise
        if isinstance(answer.error, MemoryError):
            self._discard(slot)  # its heap stays at the limit: the next job would fail in it
            raise _over_memory(settings.job_memory_mb) from None
        self._give_back(slot, answer.resident_bytes, settings)
        if answer.error is not None:
            raise answer.error
        value: T = answer.value
        return value

    def _submit(self, settings: Settings, job: tuple[Any, ...]) -> tuple[_Slot, Future[Answer]]:
        """A slot and the job submitted to it; an idle worker that died meanwhile (killed,
        out of memory) is replaced once, unnoticed by the job."""
        for attempt in (1, 2):
            try:
                slot = self._take(settings)
            except (OSError, RuntimeError) as exc:  # no fork server (e.g. no /dev/shm)
                raise WorkerLost(
                    f"no worker process could be started ({exc}); retry shortly"
                ) from exc
            slot.cancel.clear()
            try:
                return slot, slot.executor.submit(*job)
            except (BrokenProcessPool, OSError, RuntimeError) as exc:
                self._discard(slot)
                if attempt == 2:
                    raise _no_worker(exc) from exc
        raise AssertionError("unreachable")

    def pids(self, *, idle: bool = True, running: bool = True) -> list[int]:
        """The process ids of the idle workers, of those running a job, or both (for tests
        and diagnostics)."""
        with self._lock:
            slots = (self._idle if idle else []) + (self._running if running else [])
            return [pid for slot in slots for pid in slot.pids()]

    def close(self) -> None:
        """Stop every idle worker and take no more jobs (at exit); running jobs' workers are
        stopped by their threads when they end."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for slot in idle:
            stop_executor(slot.executor)

    def _take(self, settings: Settings) -> _Slot:
        with self._lock:
            self._idle_seconds = settings.worker_idle_seconds
            if self._closed:
                raise Busy("the server is shutting down; retry on another")
            limit = settings.job_memory_mb * 1024 * 1024
            # an idle worker of the same limit (one per process in service; tests vary it)
            slot = next((s for s in reversed(self._idle) if s.data_limit == limit), None)
            if slot is not None:
                self._idle.remove(slot)
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap, name="workers", daemon=True)
                self._reaper.start()
            if slot is None:
                context = forkserver()
                cancel = context.Event()
                executor = ProcessPoolExecutor(
                    1,
                    mp_context=context,
                    initializer=start_worker,
                    initargs=(os.getpid(), limit, cancel),
                )
                slot = _Slot(executor, limit, cancel)
            self._running.append(slot)
            return slot

    def _give_back(self, slot: _Slot, resident_bytes: int, settings: Settings) -> None:
        with self._lock:
            self._running.remove(slot)
        slot.jobs += 1
        slot.idle_since = time.monotonic()
        large = resident_bytes > settings.worker_memory_mb * 1024 * 1024
        if large or slot.jobs >= settings.worker_max_jobs:
            logger.info(
                "replacing a worker process after %d jobs at %.0f MB",
                slot.jobs,
                resident_bytes / 2**20,
            )
            self._discard(slot)
            return
        with self._lock:
            if not self._closed:
                self._idle.append(slot)
                return
        stop_executor(slot.executor)

    def _discard(self, slot: _Slot) -> None:
        with self._lock:
            if slot in self._running:
                self._running.remove(slot)
        # Stopped in a thread of its own: killing and joining takes milliseconds the request
        # need not wait for.
        threading.Thread(target=stop_executor, args=(slot.executor,), name="worker-stop").start()

    def _reap(self) -> None:
        """Stop the workers idle past ``worker_idle_seconds`` (a daemon thread), but the most
        recently used, while no job runs: it stays warm, with what its service keeps (the
        reports and diagrams the web view shows again). It holds under ``worker_memory_mb``,
        or it would have been replaced after its job."""
        while True:
            time.sleep(min(1.0, self._idle_seconds / 2))
            now = time.monotonic()
            with self._lock:
                expired = [s for s in self._idle if now - s.idle_since >= self._idle_seconds]
                warm = max(self._idle, key=lambda s: s.idle_since, default=None)
                if warm is not None and not self._running:
                    expired = [s for s in expired if s is not warm]
                self._idle = [s for s in self._idle if s not in expired]
            for slot in expired:
                stop_executor(slot.executor)


def _wait(future: Future[Answer], budget: Budget, slot: _Slot, memory_mb: int) -> Answer:
    """The worker's answer. Once ``budget`` is cancelled, the slot's cancel flag tells the
    worker to stop the job at its next checkpoint (it then answers :class:`Abandoned` itself,
    and a job past its last checkpoint completes, its version stored and answered); a job
    that has not answered :data:`GRACE_SECONDS` after that, or after its deadline, is given
    up (:class:`Abandoned`: the caller kills its worker). A worker resident past
    ``memory_mb`` is given up as well (:class:`OverMemory`): watched from here, as the data
    limit alone would let C code that does not check its allocations crash the worker."""
    asked = None
    limit = memory_mb * 1024 * 1024
    while True:
        try:
            return future.result(timeout=POLL_SECONDS)
        except TimeoutError:
            now = time.monotonic()
            if asked is None and budget.cancelled.is_set():
                slot.cancel.set()
                asked = now
            if asked is not None and now > asked + GRACE_SECONDS:
                raise Abandoned("the job was cancelled") from None
            if now > budget.deadline + GRACE_SECONDS:
                raise Abandoned(f"the job ran past its budget of {budget.seconds:g} s") from None
            if any(_resident(pid) > limit for pid in slot.pids()):
                raise _over_memory(memory_mb) from None


def _resident(pid: int) -> int:
    """Process ``pid``'s resident bytes (0 where /proc does not tell)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            return int(statm.read().split()[1]) * PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return 0


def _no_worker(cause: Exception) -> WorkerLost:
    return WorkerLost(f"no worker process could be started ({cause}); retry shortly")


def _over_memory(memory_mb: int) -> OverMemory:
    return OverMemory(
        f"the job needed more than the {memory_mb} MB one job may take "
        "(CALIBRATION_JOB_MEMORY_MB); nothing was stored. Send a smaller batch"
    )


def stop_executor(executor: ProcessPoolExecutor) -> None:
    """Shut ``executor`` down without waiting for its job (nobody waits for that answer): its
    processes are killed (SIGKILL ends even a stopped one) and every wait is bounded."""
    processes = list((executor._processes or {}).values())  # no public handle before 3.14
    manager: threading.Thread | None = getattr(executor, "_executor_manager_thread", None)
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.kill()
    for process in processes:
        process.join(STOP_SECONDS)
    if manager is not None:
        manager.join(STOP_SECONDS)


processes = WorkerProcesses()
atexit.register(processes.close)
