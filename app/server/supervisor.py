"""A server process that outlives its supervisor ends too.

With ``CALIBRATION_WORKERS`` above one, uvicorn's supervisor starts the server processes
(multiprocessing's spawn) and restarts those that die; nothing ends them when the supervisor
itself dies (``kill -9``, an out-of-memory kill): they would go on serving the port, reparented
to init, with no one to restart them and the port taken for the next start. So each watches
its parent's sentinel and, once it closes, shuts down as on SIGTERM (requests in flight
finish); its fork server and worker processes end with it (:mod:`app.service.workers`).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from multiprocessing.connection import wait


def end_with_supervisor() -> None:
    """In a process multiprocessing started (uvicorn's worker), stop once its parent is gone;
    in any other process (one server, tests), nothing."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        wait([parent.sentinel])  # returns when the parent's end of the pipe closes: it died
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="supervisor", daemon=True).start()
