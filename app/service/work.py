"""CPU-heavy work off the event loop, within bounds: how much may wait, how long it may run,
for whom, and where.

Parsing a large body, fitting, cross-validating, diagnosing and drawing take seconds on a
large batch. Run on the event loop, they stall every other request of the server process
(``/healthz`` included, and the container's health check with it); run without a bound, a
handful of them exhaust the cores and the memory. So every such job goes through one
:class:`WorkPool` per server process:

- **Where.** A job of the service's heavy kinds (fits, reports, pictures, compare, exports,
  the web view's pages) runs in a worker process (:mod:`app.service.workers`) when
  ``work_processes`` is on, the default; the rest (parsing a large predict body, joining
  outcomes) in a thread of the pool's own, as heavy jobs also do when it is off.
- **How many at once.** ``max_concurrent_fits`` threads (``CALIBRATION_MAX_CONCURRENT_FITS``),
  each running one job or waiting for its worker process.
- **Admission by cost.** A job's cost is what it holds in this process while it waits and
  runs: its body's bytes, and :data:`JOB_BYTES` of its own. Jobs are admitted until the
  admitted ones would hold more than ``queue_memory_mb`` (or number ``max_queued_fits``
  beyond the running ones): so thousands of small fits wait their turn, while a few 64 MiB
  bodies fill the budget. Past it a request is refused at once with :class:`Busy` (503 with
  ``Retry-After``, naming the budget), before its body is read when its ``Content-Length``
  already says so (:meth:`WorkPool.refuse_when_full`); the place is taken once the body is
  in, so a slow upload never holds one. What a job computes is bounded where it runs: a
  worker's memory limit (``job_memory_mb``) and its time budget.
- **How long.** A job has a time budget (``CALIBRATION_FIT_TIMEOUT_SECONDS``) from when it
  starts, and is abandoned when its client disconnects.

Threads cannot be killed, so abandoning a thread's job is cooperative: the job's code calls
:func:`app.calibration.kernels.budget.checkpoint` between its steps (every fold, every candidate,
every grid point, and once more just before a fit writes), which raises
:class:`~app.calibration.kernels.budget.Abandoned` once the budget is spent or the client has gone.
A worker process checks the same budget and is killed when it does not stop in time. The route
always waits for the job itself to end, so its answer says what happened: a job past its last
checkpoint completes (a fit is stored and answers 201), one stopped at a checkpoint or killed
stored nothing and answers 503. The exception is a job that identical requests share
(:mod:`app.service.inflight`; it stores nothing): a client that leaves is answered at once,
and the job goes on for the others, abandoned when the last one leaves.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from app.calibration import Abandoned, Budget, current, enter
from app.errors import Busy, ClientGone, OverBudget
from app.service.inflight import Gone, InFlight, outcome_seen
from app.service.workers import processes
from app.settings import Settings

if TYPE_CHECKING:
    from app.service.use_cases import CalibrationService

logger = logging.getLogger("app.work")

P = ParamSpec("P")
T = TypeVar("T")


JOB_BYTES = 64 * 1024
"""What a job costs beside its body: its request, its coroutine and its answer, roughly."""


class WorkPool:
    """The bounded executor of one server process (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.workers = settings.max_concurrent_fits
        self.budget_seconds = settings.fit_timeout_seconds
        self._max_jobs = settings.max_concurrent_fits + settings.max_queued_fits
        self._max_bytes = settings.queue_memory_mb * 1024 * 1024
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="work")
        self.in_flight = InFlight()
        """The read-only jobs running now, by what they compute: identical ones share one."""
        self._admitted = 0
        self._held = 0
        self._lock = threading.Lock()

    def refuse_when_full(self, body_bytes: int | None = None) -> None:
        """:class:`Busy` now if :meth:`admit` would refuse a body of ``body_bytes`` (its
        ``Content-Length``, when declared): a route calls it before reading a body of up to
        64 MiB for nothing (the place itself is taken once the body is in, so that a slow
        upload never holds one)."""
        with self._lock:
            self._check_room(JOB_BYTES + (body_bytes or 0))

    @contextmanager
    def admit(self, body_bytes: int = 0) -> Iterator[None]:
        """A place for one job holding ``body_bytes``, until the block ends (:class:`Busy`
        when the admitted jobs would hold too much, or be too many)."""
        cost = JOB_BYTES + body_bytes
        with self._lock:
            self._check_room(cost)
            self._admitted += 1
            self._held += cost
        try:
            yield
        finally:
            with self._lock:
                self._admitted -= 1
                self._held -= cost

    def _check_room(self, cost: int) -> None:
        """:class:`Busy` when a job of ``cost`` bytes does not fit (call with the lock held).
        A job alone is always admitted: the body limit bounds it."""
        if self._admitted and self._held + cost > self._max_bytes:
            raise Busy(
                f"the {self._admitted} jobs admitted hold {self._held / 2**20:.0f} MB of the "
                f"{self.settings.queue_memory_mb} MB waiting work may hold "
                "(CALIBRATION_QUEUE_MEMORY_MB); retry shortly"
            )
        if self._admitted >= self._max_jobs:
            waiting = self._admitted - self.workers
            raise Busy(
                f"all {self.workers} workers are busy and {waiting} jobs are waiting, the most "
                "CALIBRATION_MAX_QUEUED_FITS allows; retry shortly"
            )

    async def run_job(
        self,
        gone: Gone | None,
        service: CalibrationService,
        function: Callable[Concatenate[CalibrationService, P], T],
        body_bytes: int,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``function(service, *args, **kwargs)``, admitted for a body of ``body_bytes``, in a
        worker process (with the worker's own service) when ``work_processes`` is on, else in
        a thread with ``service``: one of the heavy kinds the module docstring lists.
        ``function`` must be a module-level function and its arguments picklable.

        Raises
        ------
        WorkerLost
            When the worker process died during the job.
        OverMemory
            When the job needed more than ``job_memory_mb``.
        (and those of :meth:`supervise`)
        """
        with self.admit(body_bytes):
            if not self.settings.work_processes:
                return await self.supervise(gone, function, service, *args, **kwargs)
            return await self.supervise(
                gone, _call_in_worker, self.settings, function, args, kwargs
            )

    async def supervise(
        self,
        gone: Gone | None,
        function: Callable[P, T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``function(*args, **kwargs)`` in a pooled thread under a budget, once admitted.

        ``gone`` is awaited alongside the job and returns when the client has left (the HTTP
        layer knows how to tell): the job is then abandoned.

        Raises
        ------
        OverBudget
            When the job stopped at a checkpoint past its budget.
        ClientGone
            When it stopped because its client disconnected.
        """
        budget = Budget(self.budget_seconds)

        def job() -> T:
            enter(budget)
            budget.check()  # its client may have left while it waited for a thread
            return function(*args, **kwargs)

        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, context.run, job)
        watcher = asyncio.ensure_future(gone()) if gone is not None else None
        try:
            if watcher is not None:
                waited: set[asyncio.Future[Any]] = {future, watcher}
                await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
                if watcher.done() and not future.done():
                    budget.cancelled.set()
            # The job's own end is the answer, whatever happened meanwhile (see above).
            return await future
        except asyncio.CancelledError:
            budget.cancelled.set()  # the request itself was cancelled (shutdown): stop the job
            future.add_done_callback(outcome_seen)  # nobody waits for its outcome now
            raise
        except Abandoned as exc:
            if budget.cancelled.is_set():
                logger.info("abandoned a job: its client disconnected")
                raise ClientGone("the client disconnected before its job ended") from None
            raise OverBudget(
                f"{exc}; nothing was stored. Send a smaller batch, fewer folds or a "
                "simpler method, or raise CALIBRATION_FIT_TIMEOUT_SECONDS"
            ) from None
        finally:
            if watcher is not None:
                watcher.cancel()
                watcher.add_done_callback(outcome_seen)

    def close(self) -> None:
        """Stop taking jobs; wait for the running ones (at shutdown)."""
        self._executor.shutdown(wait=True, cancel_futures=True)


def _call_in_worker(
    settings: Settings,
    function: Callable[..., T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> T:
    """In a pool thread: the job in a worker process, under this thread's budget."""
    budget = current()
    assert budget is not None, "run by supervise(), which enters the job's budget"
    return processes.call(settings, budget, function, args, kwargs)
