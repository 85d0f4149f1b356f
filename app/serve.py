"""The container's entrypoint: ``python -m app.serve`` migrates the database, then serves.

First it settles glibc's allocator (:func:`keep_freed_memory`): the process executes itself
again, once, with :data:`ALLOCATOR_TUNABLES` in ``GLIBC_TUNABLES``, which its workers inherit.
That happens before anything heavy is imported (this module imports only the standard
library), so the restart costs a Python start-up, not the service's ~1.5 s of imports. Then
:func:`app.server.startup.serve` checks the port, migrates, and runs uvicorn.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

ALLOCATOR_TUNABLES = {
    "glibc.malloc.arena_max": "1",
    "glibc.malloc.mmap_max": "0",
    "glibc.malloc.trim_threshold": str(2**60),
}
"""glibc's allocator keeps what a process frees, for its next arrays: one arena, no chunk of
its own mapping, the heap never trimmed.

A fit of 10^7 rows makes and frees arrays of 80 MB by the hundred. Returned to the kernel and
faulted in again (9.4 million fresh pages a fit, read in ``/proc/vmstat``), they stalled the
event loop past 100 ms now and then (``tests/server/test_responsiveness.py``), and made fits slower:
``bench.columnar``'s 10^7-pair fit took 19.3 s as Parquet and 24.1 s as JSON without these
settings, 16.3 s and 19.2 s with them, at the same peak memory (3.0 GB). All three count:
without ``arena_max=1`` the threads' own arenas still give their memory back (6.9 million
fresh pages, against 1.2 million with it). The price: each process keeps the memory of the
largest request it served until it exits."""

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
    """The ``GLIBC_TUNABLES`` to restart under, or None when there is nothing to add.

    Each of :data:`ALLOCATOR_TUNABLES` is added unless the operator set it already, as a
    tunable or through its :data:`MALLOC_VARIABLES` alias: theirs wins, the others are still
    added. Nothing is added when ``libc`` is not glibc (musl, macOS), and, after the restart,
    because every tunable is then set: the restart happens once.
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


def keep_freed_memory() -> None:
    """Execute this same command again (same process id) in :func:`allocator_environment`, or
    return when there is nothing to change: glibc reads its tunables only as a process
    starts. When it cannot (no known executable, an environment past the kernel's limits),
    it says so in one line and serves as it is."""
    environment = allocator_environment(os.environ)
    if environment is None:
        return
    reason = "the Python executable is unknown"
    if sys.executable:
        try:
            os.execve(sys.executable, sys.orig_argv, environment)
        except OSError as exc:
            reason = str(exc)
    print(f"calibration: serving without the allocator tunables: {reason}", file=sys.stderr)


def main() -> None:
    """Migrate the configured database, then serve until SIGTERM or SIGINT
    (:func:`app.server.startup.serve`, imported here, after the allocator is settled)."""
    from app.server.startup import serve

    serve()


if __name__ == "__main__":
    keep_freed_memory()
    main()
