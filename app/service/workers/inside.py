"""The worker's side: its set-up, the watch on its server, and a job run with the worker's
own service."""

from __future__ import annotations

import os
import pickle
import resource
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.calibration import Budget, enter
from app.observability import configure_logging, current_request_id
from app.settings import Settings

if TYPE_CHECKING:
    from app.service.use_cases import CalibrationService

SERVICES = 4
"""Services a worker keeps, one per settings (tests run many apps in one process)."""
WATCH_SECONDS = 1.0
"""How often a worker looks whether its server is still alive."""


@dataclass(frozen=True)
class Answer:
    """What a worker sends back: the job's value or its error, and the worker's memory."""

    value: Any
    error: BaseException | None
    resident_bytes: int


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


def run(
    settings: Settings,
    seconds: float,
    request_id: str | None,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> Answer:
    """Run in a worker: the job under its budget, with the worker's own service, its log
    lines carrying the request's id."""
    value: Any = None
    error: BaseException | None = None
    current_request_id.set(request_id)
    try:
        service = _service(settings)
        enter(Budget(seconds))
        value = function(service, *args, **kwargs)
    except Exception as exc:  # sent back, raised where the job was asked for (MemoryError too)
        error = exc
    return Answer(value, error, _resident_bytes())


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
    configure_logging(settings.log_level, settings.log_format)  # as the server's lines
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
