"""Loopback ports for the servers the tests start: a range of its own per pytest process.

Asking the kernel for a free port (a bind to port 0) and starting a server on it a moment
later leaves a gap in which another process may be handed the same port. Under pytest-xdist
several workers start servers at once, and two of them meeting on one port would make one
worker's client talk to the other worker's server. So each process takes its ports in turn
from a range of its own (:func:`port_range`), below the kernel's ephemeral range (32768 and up
on Linux, where bind-to-0 and outgoing connections take theirs), from a random place in it
(two runs at once rarely start together), skipping any port something is bound to.
"""

from __future__ import annotations

import os
import random
import socket

FIRST_PORT = 20_000
PORTS_PER_PROCESS = 1_000
PROCESSES = 12
"""Ranges of :data:`PORTS_PER_PROCESS` from :data:`FIRST_PORT`: one without xdist, then one per
worker (``gw0``, ``gw1``, …), modulo this many, all under 32768."""


def port_range() -> range:
    """This process's ports: by its xdist worker's number, or the first range without one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) + 1 if worker.startswith("gw") and worker[2:].isdigit() else 0
    start = FIRST_PORT + (index % PROCESSES) * PORTS_PER_PROCESS
    return range(start, start + PORTS_PER_PROCESS)


_next = random.SystemRandom().randrange(PORTS_PER_PROCESS)


def free_port() -> int:
    """A port of :func:`port_range` on 127.0.0.1 that nothing is bound to right now, the next
    one after the last handed out (so a port is not handed out again soon)."""
    global _next
    ports = port_range()
    for _ in range(len(ports)):
        port = ports[_next % len(ports)]
        _next += 1
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use, or in TIME_WAIT: take the next
                continue
            return port
    raise RuntimeError(f"no free port in {ports.start}..{ports.stop - 1} on 127.0.0.1")
