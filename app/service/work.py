"""CPU-heavy work off the event loop, within bounds: how many at once, how long, for whom.

Parsing a large body, fitting, cross-validating, diagnosing and drawing take seconds on a
large batch. Run on the event loop, they stall every other request of the worker (``/healthz``
included, and the container's health check with it); run without a bound, a handful of them
exhaust the cores and the memory. So every such job goes through one :class:`WorkPool`:

- at most ``workers`` jobs run at once (``CALIBRATION_MAX_CONCURRENT_FITS``), each in a
  thread of the pool's own (numpy and scipy release the GIL in their kernels);
- at most ``queue`` more wait for a thread; past that a request is refused at once with
  :class:`Busy` (503 with ``Retry-After``), before its body is even read
  (:meth:`WorkPool.refuse_when_full`); the place is taken once the body is in, so a slow
  upload never holds one;
- a job has a time budget (``CALIBRATION_FIT_TIMEOUT_SECONDS``) from when it starts, and is
  abandoned when its client disconnects.

Threads cannot be killed, so abandoning is cooperative: the job's code calls
:func:`app.calibration.kernels.budget.checkpoint` between its steps (every fold, every candidate,
every grid point, and once more just before a fit writes), which raises
:class:`~app.calibration.kernels.budget.Abandoned` once the budget is spent or the client has gone.
The route always waits for the job itself to end, so its answer says what happened: a job
past its last checkpoint completes (a fit is stored and answers 201), one stopped at a
checkpoint stored nothing and answers 503.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from app.calibration import Abandoned, Budget, enter
from app.errors import Busy, ClientGone, OverBudget

logger = logging.getLogger("app.work")

P = ParamSpec("P")
T = TypeVar("T")


class WorkPool:
    """The bounded executor of one process (see the module docstring)."""

    def __init__(self, workers: int, queue: int, budget_seconds: float) -> None:
        self.workers = workers
        self.capacity = workers + queue
        self.budget_seconds = budget_seconds
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="work")
        self._admitted = 0
        self._lock = threading.Lock()

    def refuse_when_full(self) -> None:
        """:class:`Busy` now if :meth:`admit` would refuse: a route calls it before reading a
        body of up to 64 MiB for nothing (the place itself is taken once the body is in, so
        that a slow upload never holds one)."""
        with self._lock:
            self._check_room()

    @contextmanager
    def admit(self) -> Iterator[None]:
        """A place for one job, held until the block ends (:class:`Busy` when none is left)."""
        with self._lock:
            self._check_room()
            self._admitted += 1
        try:
            yield
        finally:
            with self._lock:
                self._admitted -= 1

    def _check_room(self) -> None:
        """:class:`Busy` when every place is taken (call with the lock held)."""
        if self._admitted >= self.capacity:
            waiting = self._admitted - self.workers
            raise Busy(
                f"all {self.workers} workers are busy and {waiting} jobs are waiting; retry shortly"
            )

    async def run(
        self,
        gone: Callable[[], Awaitable[object]] | None,
        function: Callable[P, T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """:meth:`admit`, then :meth:`supervise`: for a request that holds no body."""
        with self.admit():
            return await self.supervise(gone, function, *args, **kwargs)

    async def supervise(
        self,
        gone: Callable[[], Awaitable[object]] | None,
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
                watcher.add_done_callback(_retrieve)

    def close(self) -> None:
        """Stop taking jobs; wait for the running ones (at shutdown)."""
        self._executor.shutdown(wait=True, cancel_futures=True)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a finished watcher's outcome as seen (its error is of no interest then)."""
    if not task.cancelled():
        task.exception()
