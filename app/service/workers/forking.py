"""Where worker processes come from: multiprocessing's fork server, which imports the job
modules once (:func:`preload`) and starts under the allocator tunables that workers, and only
they, run with (:func:`allocator_environment`)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import threading
from collections.abc import Mapping
from multiprocessing.context import BaseContext

PRELOAD = {"app.service.use_cases"}
"""Modules the fork server imports once for every worker (the job modules add theirs with
:func:`preload`)."""

FREEZE = "app.service.workers.frozen"
"""The module the fork server imports after :data:`PRELOAD`: it freezes what they built
(:mod:`.frozen` says why)."""

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
``worker_memory_mb``, and to the JSON process of :mod:`app.api.bodies.json_process`, which
comes from the same fork server (it parses bodies of up to 64 MiB and keeps what the largest
took). The serving process, which runs no fit, gives memory back."""

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
    multiprocessing.get_context("forkserver").set_forkserver_preload(_preloads())


def forkserver() -> BaseContext:
    """The context every worker process of this server comes from, its fork server started
    the first time (after :func:`preload` has named every job module) under
    :func:`worker_environment`: workers inherit it, the serving process never has it. Call it
    where a process pool is made, never at import."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_preloads())
    global _started
    with _starting:
        if not _started:
            _start_forkserver()
            _started = True
    return context


def _preloads() -> list[str]:
    """What the fork server imports, in order: :data:`PRELOAD`, then :data:`FREEZE`."""
    return [*sorted(PRELOAD), FREEZE]


_starting = threading.Lock()
_started = False


def start_soon() -> None:
    """Start the fork server in a thread of its own, at a server's start-up: its imports (the
    job modules, matplotlib, onnx: seconds) are then done before the first job waits for them."""
    threading.Thread(target=forkserver, name="forkserver-start", daemon=True).start()


METRICS_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's multiprocess directory: a worker writes no metrics file there (workers
come and go every few seconds; what they did is counted by the server that asked)."""


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` as the workers' fork server starts with it: :func:`allocator_environment`'s
    tunables in, the metrics directory out."""
    environment = allocator_environment(environ) or dict(environ)
    environment.pop(METRICS_VARIABLE, None)
    return environment


def _start_forkserver() -> None:
    """Start the fork server in :func:`worker_environment` (glibc reads its tunables when a
    process starts; prometheus-client its directory when imported): ``os.environ`` is what a
    new process inherits, so the variables that differ are set for the start and put back."""
    wanted = worker_environment(os.environ)
    changed = {name for name in {*os.environ, *wanted} if os.environ.get(name) != wanted.get(name)}
    saved = {name: os.environ.get(name) for name in changed}
    for name in changed:
        _set(name, wanted.get(name))
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        for name, value in saved.items():
            _set(name, value)


def _set(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
