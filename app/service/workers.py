"""Worker processes: where fits, reports, pictures, comparisons and exports run.

A job's numbers take seconds and gigabytes on a large batch. Run in the process that serves,
they share its interpreter with ``/healthz`` and predict's hot path, and the memory a large
job touched stays with that process (glibc's allocator keeps it, and :mod:`app.serve` asks it
to). So each server process sends its heavy jobs to worker processes of its own:

- **Slots.** A slot is one process, a :class:`~concurrent.futures.ProcessPoolExecutor` of one
  worker: a process that dies breaks only its own executor, so it fails only its own job
  (:class:`~app.errors.WorkerLost`, 503 with ``Retry-After``), and it can be killed alone. A
  job takes an idle slot or starts one; the pool's threads (:class:`app.service.work.WorkPool`)
  bound how many run at once.
- **Start.** Processes come from multiprocessing's fork server, which imports
  :data:`PRELOAD` once, so a new worker is ready in milliseconds, and which, unlike
  ``fork``, copies no lock a thread of the server held.
- **Recycling.** After its job a worker reports its resident memory: past
  ``worker_memory_mb``, or after ``worker_max_jobs`` jobs, it is replaced, which is how a
  large job's memory goes back to the system; idle ``worker_idle_seconds``, it exits (but
  the last one used, while small: it keeps the reports the web view shows again). Each
  has a data limit (``RLIMIT_DATA``, ``job_memory_mb``): a job that asks for more stops with
  :class:`~app.errors.OverMemory` (413) instead of taking the machine's memory.
- **Stopping.** A job past its budget stops itself at a checkpoint (the worker enters the
  same :class:`~app.calibration.Budget`); one that does not within :data:`GRACE_SECONDS`, or
  whose client left, is killed with its process. A worker also exits within a second of its
  server's death (``kill -9`` included), so none is left behind.
- **The service.** A job is a module-level function whose first argument is the service:
  the worker builds its own :class:`~app.service.use_cases.CalibrationService` from the
  server's settings (once per settings; it reads and writes the same database, through
  connections it opens per job) and hands it in. Only the request's arguments and the answer
  cross between processes: a stored batch is read from the database by the worker itself.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import multiprocessing.forkserver
import os
import pickle
import resource
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing.context import BaseContext
from typing import TYPE_CHECKING, Any, TypeVar

from app.calibration import Abandoned, Budget, enter
from app.errors import OverMemory, WorkerLost
from app.settings import Settings

if TYPE_CHECKING:
    from app.service.use_cases import CalibrationService

logger = logging.getLogger("app.workers")

T = TypeVar("T")

PRELOAD = {"app.service.use_cases"}
"""Modules the fork server imports once for every worker (the job modules add theirs with
:func:`preload`)."""
POLL_SECONDS = 0.05
"""How often a thread waiting for its worker looks at the job's budget and its client."""
GRACE_SECONDS = 5.0
"""How long past its budget a job may run before its process is killed (it should have
stopped itself at a checkpoint)."""
STOP_SECONDS = 5.0
"""How long stopping a worker waits for it to end, once killed."""
SERVICES = 4
"""Services a worker keeps, one per settings (tests run many apps in one process)."""
WATCH_SECONDS = 1.0
"""How often a worker looks whether its server is still alive."""


ALLOCATOR_TUNABLES = {
    "glibc.malloc.arena_max": "1",
    "glibc.malloc.mmap_max": "0",
    "glibc.malloc.trim_threshold": str(2**60),
}
"""glibc's allocator in the worker processes keeps what they free, for their next arrays: one
arena, no chunk of its own mapping, the heap never trimmed.

A fit of 10^7 rows makes and frees arrays of 80 MB by the hundred. Returned to the kernel and
faulted in again (9.4 million fresh pages a fit, read in ``/proc/vmstat``), they stalled the
event loop past 100 ms now and then (``tests/server/test_responsiveness.py``), and made fits slower:
``bench.columnar``'s 10^7-pair fit took 19.3 s as Parquet and 24.1 s as JSON without these
settings, 16.3 s and 19.2 s with them, at the same peak memory (3.0 GB). All three count:
without ``arena_max=1`` the threads' own arenas still give their memory back (6.9 million
fresh pages, against 1.2 million with it). The price: a process keeps the memory of the
largest job it ran, so it applies to workers only, which are replaced past
``worker_memory_mb`` (the serving process, which runs no such job, gives memory back)."""

MALLOC_VARIABLES = {
    "glibc.malloc.arena_max": "MALLOC_ARENA_MAX",
    "glibc.malloc.mmap_max": "MALLOC_MMAP_MAX_",
    "glibc.malloc.trim_threshold": "MALLOC_TRIM_THRESHOLD_",
}
"""The older environment variable that sets each tunable (glibc's ``mallopt`` aliases)."""


def glibc_version() -> str | None:
    """The C library's name and version (``"glibc 2.36"``), or None when it is not glibc."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):  # no confstr, or no such name: not glibc
        return None
    return version if version and version.startswith("glibc") else None


def allocator_tunables(environ: Mapping[str, str], libc: str | None) -> str | None:
    """The ``GLIBC_TUNABLES`` to start the workers' fork server under, or None when there is
    nothing to add.

    Each of :data:`ALLOCATOR_TUNABLES` is added unless the operator set it already, as a
    tunable or through its :data:`MALLOC_VARIABLES` alias: theirs wins, the others are still
    added. Nothing is added when ``libc`` is not glibc (musl, macOS), nor when every tunable
    is set already.
    """
    if libc is None:
        return None
    current = environ.get("GLIBC_TUNABLES", "")
    named = {item.partition("=")[0] for item in current.split(":")}
    missing = [
        f"{name}={value}"
        for name, value in ALLOCATOR_TUNABLES.items()
        if name not in named and MALLOC_VARIABLES[name] not in environ
    ]
    return ":".join([current, *missing] if current else missing) if missing else None


def allocator_environment(environ: Mapping[str, str]) -> dict[str, str] | None:
    """``environ`` with :func:`allocator_tunables` in it, or None when it needs no change."""
    tunables = allocator_tunables(environ, glibc_version())
    return None if tunables is None else {**environ, "GLIBC_TUNABLES": tunables}


def preload(*modules: str) -> None:
    """Have the fork server import ``modules`` (job modules: a worker then starts without
    importing them). Effective until the fork server starts, at the first worker."""
    PRELOAD.update(modules)
    multiprocessing.get_context("forkserver").set_forkserver_preload(sorted(PRELOAD))


def forkserver() -> BaseContext:
    """The context every worker process of this server comes from (see :func:`preload`),
    its fork server started under :func:`allocator_environment` the first time: workers
    inherit the tunables, the serving process never has them."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(sorted(PRELOAD))
    global _tuned
    with _starting:
        if not _tuned:
            _start_forkserver_tuned()
            _tuned = True
    return context


_starting = threading.Lock()
_tuned = False


def _start_forkserver_tuned() -> None:
    """Start the fork server with the allocator tunables in its environment (glibc reads them
    when a process starts), and only in its: the variable is put back at once."""
    environment = allocator_environment(os.environ)
    if environment is None:
        return
    saved = os.environ.get("GLIBC_TUNABLES")
    os.environ["GLIBC_TUNABLES"] = environment["GLIBC_TUNABLES"]
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["GLIBC_TUNABLES"]
        else:
            os.environ["GLIBC_TUNABLES"] = saved


@dataclass(eq=False)
class _Slot:
    """One worker process, its executor and what it did."""

    executor: ProcessPoolExecutor
    data_limit: int
    jobs: int = 0
    idle_since: float = field(default_factory=time.monotonic)
    resident_bytes: int = 0

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
        self._warm_bytes = 0

    def call(
        self,
        settings: Settings,
        budget: Budget,
        function: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
    ) -> T:
        """``function(service, *args, **kwargs)`` in a worker, ``service`` being the worker's
        own for ``settings``; blocks the calling thread until it ends, kills the worker when
        ``budget`` is cancelled or spent past :data:`GRACE_SECONDS` (:class:`Abandoned`).

        Raises
        ------
        WorkerLost
            When the worker died before answering.
        OverMemory
            When the job ran out of its memory limit.
        """
        try:
            slot = self._take(settings)
        except (OSError, RuntimeError) as exc:  # no fork server (e.g. no /dev/shm for its locks)
            raise WorkerLost(f"no worker process could be started ({exc}); retry shortly") from exc
        try:
            future = slot.executor.submit(
                _run, settings, budget.seconds, function, args, dict(kwargs)
            )
        except (BrokenProcessPool, OSError, RuntimeError) as exc:
            self._discard(slot)
            raise WorkerLost(f"no worker process could be started ({exc}); retry shortly") from exc
        try:
            answer = _wait(future, budget)
        except BrokenProcessPool:
            self._discard(slot)
            logger.warning("a worker process died during its job; it will be replaced")
            raise WorkerLost(
                "the worker process running this job died (killed, or out of memory); "
                "nothing was stored"
            ) from None
        except BaseException:  # abandoned, or an answer that could not be sent back
            self._discard(slot)
            raise
        self._give_back(slot, answer.resident_bytes, settings)
        if answer.error is not None:
            if isinstance(answer.error, MemoryError):
                raise OverMemory(
                    f"the job needed more than the {settings.job_memory_mb} MB one job may take "
                    "(CALIBRATION_JOB_MEMORY_MB); nothing was stored. Send a smaller batch"
                ) from None
            raise answer.error
        value: T = answer.value
        return value

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
            _stop(slot.executor)

    def _take(self, settings: Settings) -> _Slot:
        with self._lock:
            self._idle_seconds = settings.worker_idle_seconds
            if self._closed:
                raise WorkerLost("the server is shutting down; retry on another")
            limit = settings.job_memory_mb * 1024 * 1024
            # an idle worker of the same limit (one per process in service; tests vary it)
            slot = next((s for s in reversed(self._idle) if s.data_limit == limit), None)
            if slot is not None:
                self._idle.remove(slot)
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap, name="workers", daemon=True)
                self._reaper.start()
            if slot is None:
                executor = ProcessPoolExecutor(
                    1,
                    mp_context=forkserver(),
                    initializer=start_worker,
                    initargs=(os.getpid(), limit),
                )
                slot = _Slot(executor, limit)
            self._running.append(slot)
            return slot

    def _give_back(self, slot: _Slot, resident_bytes: int, settings: Settings) -> None:
        with self._lock:
            self._running.remove(slot)
            self._warm_bytes = settings.worker_memory_mb * 1024 * 1024 // 2
        slot.jobs += 1
        slot.idle_since = time.monotonic()
        slot.resident_bytes = resident_bytes
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
        _stop(slot.executor)

    def _discard(self, slot: _Slot) -> None:
        with self._lock:
            if slot in self._running:
                self._running.remove(slot)
        # Stopped in a thread of its own: killing and joining takes milliseconds the request
        # need not wait for.
        threading.Thread(target=_stop, args=(slot.executor,), name="worker-stop").start()

    def _reap(self) -> None:
        """Stop the workers idle past ``worker_idle_seconds`` (a daemon thread), but the most
        recently used while it holds under half of ``worker_memory_mb``: it stays warm, with
        what its service keeps (the reports and diagrams the web view shows again)."""
        while True:
            time.sleep(min(1.0, self._idle_seconds / 2))
            now = time.monotonic()
            with self._lock:
                expired = [s for s in self._idle if now - s.idle_since >= self._idle_seconds]
                warm = max(self._idle, key=lambda s: s.idle_since, default=None)
                if (
                    warm is not None
                    and warm.resident_bytes < self._warm_bytes
                    and not self._running
                ):
                    expired = [s for s in expired if s is not warm]
                self._idle = [s for s in self._idle if s not in expired]
            for slot in expired:
                _stop(slot.executor)


@dataclass(frozen=True)
class _Answer:
    """What a worker sends back: the job's value or its error, and the worker's memory."""

    value: Any
    error: BaseException | None
    resident_bytes: int


def _wait(future: Future[_Answer], budget: Budget) -> _Answer:
    """The worker's answer; :class:`Abandoned` when the job was cancelled, or has run past its
    budget by :data:`GRACE_SECONDS` without stopping itself."""
    while True:
        try:
            return future.result(timeout=POLL_SECONDS)
        except TimeoutError:
            if budget.cancelled.is_set():
                raise Abandoned("the job was cancelled") from None
            if time.monotonic() > budget.deadline + GRACE_SECONDS:
                raise Abandoned(f"the job ran past its budget of {budget.seconds:g} s") from None


def _stop(executor: ProcessPoolExecutor) -> None:
    """Shut ``executor`` down without waiting for its job: its process is killed (SIGKILL ends
    even a stopped one) and every wait is bounded."""
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


# -- in the worker ---------------------------------------------------------------------------
_services: OrderedDict[bytes, CalibrationService] = OrderedDict()
_in_worker = False


def in_worker() -> bool:
    """Whether this process is a worker (whose jobs start no process of their own)."""
    return _in_worker


def start_worker(server: int, data_limit: int | None) -> None:
    """A new worker's set-up (a process pool's initializer): its data limit (None: the
    server's), SIGINT left to the server (a terminal's Ctrl-C reaches the whole process
    group), and a watch that ends it once ``server``, a process id, is gone."""
    global _in_worker
    _in_worker = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if data_limit is not None and (hard == resource.RLIM_INFINITY or hard > data_limit):
        resource.setrlimit(resource.RLIMIT_DATA, (data_limit, data_limit))
    threading.Thread(target=_watch, args=(server,), name="watch", daemon=True).start()


def _watch(server: int) -> None:
    """End this worker once its server process is gone."""
    while True:
        time.sleep(WATCH_SECONDS)
        try:
            os.kill(server, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:  # a process of another user took the number: ours is gone
            os._exit(0)


def _run(
    settings: Settings,
    seconds: float,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> _Answer:
    """Run in a worker: the job under its budget, with the worker's own service."""
    value: Any = None
    error: BaseException | None = None
    try:
        service = _service(settings)
        enter(Budget(seconds))
        value = function(service, *args, **kwargs)
    except Exception as exc:  # sent back, raised where the job was asked for (MemoryError too)
        error = exc
    return _Answer(value, error, _resident_bytes())


def _service(settings: Settings) -> CalibrationService:
    """The worker's service for ``settings``: built once, the database read through
    connections opened per job (a worker holds none while idle), and ``latest`` confirmed
    by the database at each use (another worker may have fitted since)."""
    from app.service.use_cases import CalibrationService
    from app.store import Database

    key = pickle.dumps(settings)  # as it came: the same server's settings give the same bytes
    found = _services.get(key)
    if found is not None:
        _services.move_to_end(key)
        return found
    own = settings.model_copy(update={"latest_refresh_seconds": 0.0})
    service = CalibrationService(Database(own.database_url, own, pooled=False), own)
    _services[key] = service
    while len(_services) > SERVICES:
        _, old = _services.popitem(last=False)
        old.close()
        old.database.dispose()
    return service


def _resident_bytes() -> int:
    """This process's resident memory now (Linux's /proc; else its peak, from getrusage)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak * 1024 if os.uname().sysname == "Linux" else peak
