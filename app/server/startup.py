"""What ``python -m app.serve`` does (:mod:`app.serve`): check the port, migrate the database,
serve.

0. **Check the port.** A host and port another process listens on end the start at once, in
   one line that says so (:func:`ensure_port_free`), before anything is migrated.
1. **Migrate.** The configured database (``CALIBRATION_DATABASE_URL``) is brought to the newest
   Alembic revision. A database that does not answer yet (a container started together with
   its PostgreSQL) is retried every second for up to :data:`MIGRATION_WAIT_SECONDS`; then the
   process exits 1 with a line that says so. On PostgreSQL the upgrade runs while this process
   holds a session advisory lock, so replicas that start at once migrate one after the other
   (:func:`app.store.migrate.migrate_when_ready`).
2. **Serve.** uvicorn runs ``app.main:app`` with ``CALIBRATION_WORKERS`` worker processes on
   ``CALIBRATION_HOST:CALIBRATION_PORT``, trusting ``X-Forwarded-*`` only from the proxies in
   ``CALIBRATION_FORWARDED_ALLOW_IPS``. The HTTP protocol is httptools with deadlines for request
   headers and bodies (:mod:`app.server.protocol`), and idle keep-alive connections are
   closed after ``CALIBRATION_KEEP_ALIVE_SECONDS``.
   SIGTERM (``docker stop``) closes the listening sockets and lets requests in flight finish
   for up to ``CALIBRATION_SHUTDOWN_GRACE_SECONDS`` before the workers exit (those still
   running are then answered 503 ``shutting-down``: :mod:`app.api.shutdown`); the process
   exits 0, with one worker as with several (:func:`exit_zero_on_sigterm`).
   The workers' metrics meet in ``PROMETHEUS_MULTIPROC_DIR`` (:func:`metrics_directory`), and
   uvicorn's access log is off: the app writes its own JSON line per request.
"""

from __future__ import annotations

import errno
import gc
import logging
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import uvicorn
from pydantic import ValidationError

from app.observability import configure_logging
from app.settings import get_settings

logger = logging.getLogger("app.startup")

PROTOCOL = "app.server.protocol:DeadlineProtocol"
"""uvicorn's HTTP protocol (:class:`app.server.protocol.DeadlineProtocol`), named, not imported.

With several workers uvicorn pickles its configuration into each worker it spawns, and a
worker answers its supervisor's health checks only once that is unpickled. A class there
would be imported first, and FastAPI with it (0.8 s of CPU: on a busy machine, past the
supervisor's 5 s, which killed workers as hung while they started, and started them again from
nothing); a name is imported by the worker as it loads the app, its health checks answered
from the start."""

METRICS_DIRECTORY_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's multiprocess mode: where the worker processes write their samples."""


def ensure_port_free(host: str, port: int) -> None:
    """Exit with one line when ``host:port`` cannot be listened on (another server has it).

    The probe binds as uvicorn will (IPv6 for a host with a colon, ``SO_REUSEADDR``, so a port
    left in TIME_WAIT by a server just stopped counts as free), then lets the port go.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                reason = (
                    f"port {port} on {host} is in use; choose another: "
                    f"CALIBRATION_PORT={port + 1} (with make: make run PORT={port + 1})"
                )
            else:
                reason = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            raise SystemExit(f"calibration: {reason}") from None


@contextmanager
def metrics_directory(workers: int) -> Iterator[None]:
    """Give the workers a shared, empty :data:`METRICS_DIRECTORY_VARIABLE` while serving.

    Each worker writes its metric samples there and ``/metrics`` sums them all. A directory
    the operator set is emptied first (an earlier run's samples would be summed in); with
    several workers and none set, a fresh temporary one is used and removed afterwards; a
    single worker without one keeps its metrics in memory.
    """
    given = os.environ.get(METRICS_DIRECTORY_VARIABLE)
    if given:
        directory = Path(given)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink()
        yield
        return
    if workers == 1:
        yield
        return
    created = tempfile.mkdtemp(prefix="calibration-metrics-")
    os.environ[METRICS_DIRECTORY_VARIABLE] = created
    try:
        yield
    finally:
        os.environ.pop(METRICS_DIRECTORY_VARIABLE, None)
        shutil.rmtree(created, ignore_errors=True)


def _exit_zero(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


@contextmanager
def exit_zero_on_sigterm() -> Iterator[None]:
    """While serving, let a SIGTERM end the process with status 0, as a stop asked for.

    With one worker uvicorn serves in this process, and once it has shut down gracefully it
    raises the signal that stopped it again, under the handler it found when it started. Under
    Python's default handler the process would then die of SIGTERM (status 143, and ``make
    run`` reports ``Error 143``); under this one it exits 0, as uvicorn's supervisor of several
    workers does. A SIGTERM that arrives before uvicorn has put its own handler in place ends
    the process at once, with 0 too. The previous handler is restored afterwards.
    """
    previous = signal.signal(signal.SIGTERM, _exit_zero)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def serve() -> None:
    """Migrate the configured database, then serve until SIGTERM or SIGINT."""
    try:
        settings = get_settings()
    except ValidationError as exc:  # e.g. bound to 0.0.0.0 without API keys: refuse to start
        reasons = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        raise SystemExit(f"invalid settings, not starting: {reasons}") from exc
    configure_logging(settings.log_level, settings.log_format)
    ensure_port_free(settings.host, settings.port)
    # Imported once the port is known free: the store and what it imports (2 s of CPU) are
    # not needed to refuse a start for its port (0.7 s).
    from app.store.migrate import migrate_when_ready

    migrate_when_ready(settings)
    logger.info("serving on %s:%d with %d workers", settings.host, settings.port, settings.workers)
    # What start-up imported lives as long as the process: out of the collector's passes, it
    # is also out of the interpreter's last collection at exit. With several workers this
    # process only supervises them, and that collection was most of its stop once they had
    # exited (0.9 s of CPU, 4 s seen on a busy machine; docker stop waits for it).
    gc.freeze()
    with metrics_directory(settings.workers), exit_zero_on_sigterm():
        uvicorn.run(
            "app.main:app",
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            log_level=settings.log_level.lower(),
            log_config=None,  # the app's own handler formats uvicorn's lines too
            access_log=False,  # the app writes one access line per request itself
            http=PROTOCOL,  # not "auto": httptools would have no deadlines
            timeout_keep_alive=settings.keep_alive_seconds,
            proxy_headers=True,
            forwarded_allow_ips=settings.forwarded_allow_ips,
            timeout_graceful_shutdown=settings.shutdown_grace_seconds,
        )
