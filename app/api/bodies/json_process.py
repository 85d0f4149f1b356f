"""Big JSON bodies parsed in another process, so that the event loop is not kept waiting.

``orjson.loads`` reads a body in one C call that holds the GIL from start to end (~0.1 s for
20 MB, ~0.2 s for 60 MB, ~0.7 s for 200 MB on a slow machine, converting the lists to arrays
adding a fifth): parsing it in a worker thread leaves the event loop waiting for the GIL as
long. So a body of :data:`IN_PROCESS_BYTES` or more goes to a worker process, which parses it
and converts its big arrays (:func:`app.api.bodies.payloads.read_json_arrays`), and sends back the
small fields and the float64 arrays. What still holds the GIL here is copying the bytes in
and out (pickling the body, unpickling the arrays): ~5 ms a 10 MB. (Other fields come back as
parsed, so a body whose unknown field holds millions of values, refused by its contract
afterwards, costs unpickling them here.)

One worker process per server process, started on first use with "forkserver" (forking a
process that runs threads can copy a lock another thread holds) and kept. A worker that dies
(killed, out of memory) is replaced and the body sent once more; when no process starts, or
the replacement dies too, bodies are parsed in the calling thread for :data:`RETRY_SECONDS`.
Smaller bodies (predict's hot path) are parsed in the calling thread: the round trip to a
process costs more than parsing them. So are bodies of the jobs that run in a worker process
(:mod:`app.service.workers`: fits, reports, compare), whose event loop is elsewhere.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import BaseContext
from typing import Any

from app.api.bodies.payloads import parse_json_object, read_json_arrays
from app.calibration import Abandoned, checkpoint
from app.errors import ServiceError
from app.service.workers import (
    forkserver,
    is_worker_process,
    preload,
    start_worker,
    stop_executor,
)

logger = logging.getLogger("app.api.json_process")

IN_PROCESS_BYTES = 1 << 20
"""Bodies this large or larger are parsed in the worker process (1 MiB: ~6 ms in a thread)."""

RETRY_SECONDS = 60.0
"""How long bodies are parsed in the calling thread after the worker process failed."""

POLL_SECONDS = 0.05
"""How often a thread waiting for the worker looks at its job's budget (:mod:`app.service.work`)."""


def parse_json_body(body: bytes, arrays: Mapping[str, bool]) -> dict[str, Any]:
    """The body as a JSON object; when it is big, each field of ``arrays`` that is a list comes
    as an :class:`app.api.bodies.payloads.ParsedArray` (the mapping says which are matrices), which
    :func:`app.api.bodies.payloads.number_array` takes as it takes the list, with the same 422.

    The 400s are those of :func:`parse_json_object`. A big body blocks the calling thread until
    the worker is done: never call it on the event loop.
    """
    if len(body) < IN_PROCESS_BYTES:
        return parse_json_object(body)
    return _worker.parse(body, arrays)


def close() -> None:
    """End the worker process, if one was started (at shutdown; also run at exit)."""
    _worker.close()


class JsonProcess:
    """The worker process of :func:`parse_json_body` (see the module docstring)."""

    def __init__(self, context: Callable[[], BaseContext]) -> None:
        """``context`` gives the multiprocessing context of the worker, when one is started."""
        self._context = context
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None
        self._closed = False
        self._paused_until = 0.0
        self._exit_hook = False

    def parse(self, body: bytes, arrays: Mapping[str, bool]) -> dict[str, Any]:
        """:func:`read_json_arrays` in the worker process, else in this thread."""
        for attempt in (1, 2):
            executor = self._executor_or_none()
            if executor is None:
                break
            try:
                outcome = _result(_submit(executor, body, arrays))
            except BrokenProcessPool:
                self._discard(executor)
                if attempt == 1:
                    if not self._closed:
                        logger.warning("the JSON worker process died; starting another")
                    continue
                self._pause("its replacement died too")
                break
            except _NoProcess as exc:
                self._discard(executor)
                self._pause(f"it cannot be started ({exc})")
                break
            if isinstance(outcome, ServiceError):
                raise outcome
            return outcome
        return read_json_arrays(body, arrays)

    def pids(self) -> list[int]:
        """The worker process's id, once started (for diagnostics and tests)."""
        with self._lock:
            executor = self._executor
        return [] if executor is None else list(executor._processes or ())

    def _executor_or_none(self) -> ProcessPoolExecutor | None:
        if is_worker_process():  # a job's process already: the event loop is elsewhere
            return None
        with self._lock:
            if self._closed or time.monotonic() < self._paused_until:
                return None
            if self._executor is None:
                try:
                    self._executor = ProcessPoolExecutor(
                        1,
                        mp_context=self._context(),
                        initializer=start_worker,
                        initargs=(os.getpid(), None),
                    )
                except (OSError, RuntimeError) as exc:  # e.g. no /dev/shm for its locks
                    logger.error(_PAUSED, f"it cannot be made ({exc})", RETRY_SECONDS)
                    self._paused_until = time.monotonic() + RETRY_SECONDS
                    return None
                if not self._exit_hook:
                    atexit.register(self.close)
                    self._exit_hook = True
            return self._executor

    def _discard(self, executor: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._executor is executor:
                self._executor = None
        stop_executor(executor)

    def _pause(self, reason: str) -> None:
        if self._closed:  # shutting down: nothing to report
            return
        logger.error(_PAUSED, reason, RETRY_SECONDS)
        with self._lock:
            self._paused_until = time.monotonic() + RETRY_SECONDS

    def close(self) -> None:
        """End the worker process; later bodies are parsed in the calling thread."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            stop_executor(executor)


_PAUSED = "no JSON worker process: %s; parsing big bodies in threads for %g s"


class _NoProcess(Exception):
    """The worker process cannot be started (or the executor was closed meanwhile)."""


def _submit(
    executor: ProcessPoolExecutor, body: bytes, arrays: Mapping[str, bool]
) -> Future[dict[str, Any] | ServiceError]:
    # Errors of starting the process, told apart from those of the job, which are raised as
    # they are (a RuntimeError in the parser is a 500, not a reason to stop using processes).
    try:
        return executor.submit(_read_in_worker, body, arrays)
    except BrokenProcessPool:
        raise
    except (OSError, RuntimeError) as exc:
        raise _NoProcess(str(exc)) from exc


def _result(future: Future[dict[str, Any] | ServiceError]) -> dict[str, Any] | ServiceError:
    """The worker's answer; stops waiting (:class:`Abandoned`) when the job is abandoned."""
    while True:
        try:
            return future.result(timeout=POLL_SECONDS)
        except TimeoutError:
            try:
                checkpoint()
            except Abandoned:
                future.cancel()  # if it runs already, the worker finishes it for nobody
                raise


def _read_in_worker(body: bytes, arrays: Mapping[str, bool]) -> dict[str, Any] | ServiceError:
    """Run in the worker: a 400 or 422 is returned, not raised, to arrive as it was raised."""
    try:
        return read_json_arrays(body, arrays)
    except ServiceError as exc:
        return exc


# Import the parser once into the fork server (the worker processes' too), so that a worker
# starts in milliseconds.
preload("app.api.bodies.payloads")
_worker = JsonProcess(forkserver)
