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
