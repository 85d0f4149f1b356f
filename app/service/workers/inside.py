"""The worker's side: its set-up, the watch on its server, and a job run with the worker's
own service."""

from __future__ import annotations

import logging
import os
import pickle
import resource
import select
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.calibration import Abandoned, Budget, Flag, enter
from app.errors import ServiceError
from app.observability import configure_logging, current_request_id
from app.settings import Settings

if TYPE_CHECKING:
    from app.service.use_cases import CalibrationService

logger = logging.getLogger("app.workers")

SERVICES = 4
"""Services a worker keeps, one per settings (tests run many apps in one process)."""
WATCH_SECONDS = 1.0
"""How often a worker looks whether its server is still alive."""
NICENESS = 5
"""Added to a worker's nice value: where the cores are busy, the kernel runs the serving
process first, so that ``/healthz`` and predict answer while jobs crunch (with 8 reports of
6 x 10^6 rows on 2 cores, the slowest ``/healthz`` of a run took 232 ms at equal priority)."""


@dataclass(frozen=True)
class Answer:
    """What a worker sends back: the job's value or its error, and the worker's memory."""

    value: Any
    error: BaseException | None
    resident_bytes: int


_services: OrderedDict[bytes, CalibrationService] = OrderedDict()
_worker_process = False
_cancel: Flag | None = None


def is_worker_process() -> bool:
    """Whether this process is a worker (whose jobs start no process of their own)."""
    return _worker_process


def start_worker(server: int, data_limit: int | None, cancel: Flag | None = None) -> None:
    """A new worker's set-up (a process pool's initializer): SIGINT left to the server (a
    terminal's Ctrl-C reaches the whole process group); :data:`NICENESS`; a watch that ends it once
    ``server``, a process id, is gone; its data limit, ``data_limit`` bytes beyond what it
    holds already (None: none); and ``cancel``, the flag its server sets to stop the running
    job at its next checkpoint."""
    global _worker_process, _cancel
    _worker_process = True
    _cancel = cancel
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(NICENESS)
    if data_limit is not None:
        limit = _data_bytes() + data_limit
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard == resource.RLIM_INFINITY or hard > limit:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    threading.Thread(target=_watch, args=(server,), name="watch", daemon=True).start()


def _watch(server: int) -> None:
    """End this worker once its server process is gone.

    Where the kernel has pidfds (Linux 5.3), the end of the server wakes this thread at once.
    Looking every :data:`WATCH_SECONDS` is the fallback, and a slower one where it counts: a
    server that outlived its supervisor (:mod:`app.server.supervisor`) is nobody's child once
    it exits, a zombie until init reaps it (seconds in some containers), and a zombie still
    answers ``kill(pid, 0)``; a pidfd is readable from its exit on.
    """
    try:
        pidfd = os.pidfd_open(server)
    except ProcessLookupError:  # gone already
        os._exit(0)
    except (AttributeError, OSError):  # not Linux, or too old a kernel
        pass
    else:
        ended = select.poll()
        ended.register(pidfd, select.POLLIN)
        ended.poll()
        os._exit(0)
    while True:
        time.sleep(WATCH_SECONDS)
        try:
            os.kill(server, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:  # a process of another user took the number: ours is gone
            os._exit(0)


def run(
    settings: Settings,
    seconds: float,
    request_id: str | None,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> Answer:
    """Run in a worker: the job within the ``seconds`` its budget has left, stopped at a
    checkpoint once its server sets the cancel flag, with the worker's own service, its log
    lines carrying the request's id. A deliberate error (a service error, an abandoned job, a
    MemoryError) is sent back as raised; any other is a defect, logged here with its frames
    and sent back as a RuntimeError naming it (so no exception pickle cannot rebuild, or
    whose arguments are large, has to cross)."""
    value: Any = None
    error: BaseException | None = None
    current_request_id.set(request_id)
    try:
        service = _service(settings)
        budget = Budget(seconds)
        if _cancel is not None:
            budget.cancelled = _cancel
        enter(budget)
        value = function(service, *args, **kwargs)
    except (ServiceError, Abandoned, MemoryError) as exc:
        error = exc
    except Exception as exc:  # a defect: logged here with its frames, sent back as text
        logger.exception("a job failed in its worker process")
        error = RuntimeError(f"{type(exc).__name__}: {exc}")
    return Answer(value, error, _resident_bytes())


def _service(settings: Settings) -> CalibrationService:
    """The worker's service for ``settings``: built once, with nothing in the background,
    the database read through a connection opened per transaction (a worker holds none while
    idle), and ``latest`` confirmed by the database at each use (another worker may have
    fitted since)."""
    from app.service.use_cases import CalibrationService
    from app.store import Database

    key = pickle.dumps(settings)  # as it came: the same server's settings give the same bytes
    found = _services.get(key)
    if found is not None:
        _services.move_to_end(key)
        return found
    configure_logging(settings.log_level, settings.log_format)  # as the server's lines
    own = settings.model_copy(update={"latest_refresh_seconds": 0.0})
    service = CalibrationService(Database(own.database_url, own, pooled=False), own, worker=True)
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


def _data_bytes() -> int:
    """What this process's data segment holds now (``VmData``; 0 where /proc has none): the
    data limit counts it, and a worker forked from the fork server holds its imports."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
