"""A throwaway PostgreSQL cluster on loopback for the benchmarks that need one.

Debian's server binaries under ``/usr/lib/postgresql/*/bin`` (``make bench`` installs them, as
``make test`` does); ``initdb`` refuses root, so as root the cluster runs as ``postgres``.
Durability is off (``fsync``, ``synchronous_commit``, ``full_page_writes``), as in the
tests: the figures measure the service's work, not this machine's disk.
"""

from __future__ import annotations

import glob
import os
import pwd
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.http import free_port


@contextmanager
def cluster() -> Iterator[str]:
    """A running cluster with an empty ``calibration`` database; yields its SQLAlchemy URL."""
    initdbs = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not initdbs:
        raise RuntimeError("no PostgreSQL server: apt-get install postgresql")
    bindir = Path(initdbs[-1]).parent
    as_postgres: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-pg-") as tmp:
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(tmp, user.pw_uid, user.pw_gid)
            as_postgres = ["runuser", "-u", "postgres", "--"]
        data, port = f"{tmp}/data", free_port()

        def run(*args: str) -> None:
            command = [*as_postgres, str(bindir / args[0]), *args[1:]]
            subprocess.run(command, check=True, capture_output=True, timeout=120)

        run("initdb", "-D", data, "-A", "trust", "-U", "postgres")
        options = (
            f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off"
        )
        run("pg_ctl", "-D", data, "-o", options, "-l", f"{tmp}/log", "-w", "start")
        try:
            run("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "calibration")
            yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/calibration"
        finally:
            run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
