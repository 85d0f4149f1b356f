"""What a benchmark watches of a running service, from outside: its processes' memory (from
``/proc``) and how fast ``/healthz`` answers, each sampled by a thread of its own.

A service is a server process and every process below it (the fork server, the worker
processes it starts, the JSON parser's process, multiprocessing's resource tracker); its
memory is the sum of their resident sets. The tree is walked through each thread's
``/proc/PID/task/TID/children``, which costs a read per process of the tree, where scanning
every ``/proc/*/stat`` costs about 10 ms on this machine: too much every 50 ms.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
MEMORY_PERIOD = 0.05
"""Seconds between two samples of the service's memory."""
HEALTH_PERIOD = 0.1
"""Seconds between the starts of two ``/healthz`` requests."""
HEALTH_TIMEOUT = 10.0
"""A ``/healthz`` slower than this counts as failed (its latency as this timeout)."""


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (children, their children, ...); [] once it has ended."""
    found: list[int] = []
    waiting = [pid]
    while waiting:
        parent = waiting.pop()
        for children in Path(f"/proc/{parent}/task").glob("*/children"):
            try:
                pids = [int(child) for child in children.read_text().split()]
            except OSError:  # the thread or the process ended meanwhile
                continue
            found += pids
            waiting += pids
    return found


def peak_kb(pid: int) -> int:
    """The process's peak resident set (``VmHWM``), in kB; 0 when it has ended."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0  # a zombie: its memory is gone


def reset_peaks(pid: int) -> None:
    """Reset the peak resident set (``VmHWM``) of ``pid`` and of every process below it to
    what each holds now (``/proc/PID/clear_refs``, Linux 4.0 on), so that :func:`peak_kb`
    then reads the peak since; a process that ended meanwhile, or whose file cannot be
    written, is passed over (its peak stays the one since it started)."""
    for each in (pid, *descendants(pid)):
        try:
            Path(f"/proc/{each}/clear_refs").write_text("5")
        except OSError:
            continue


def resident_bytes(pid: int) -> int:
    """The process's resident set now, in bytes; 0 when it has ended."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return 0


@dataclass(frozen=True)
class Memory:
    """One sample: when (``time.monotonic``), the server's resident bytes and the whole
    tree's."""

    at: float
    server: int
    service: int


def memory_now(pid: int) -> Memory:
    """The memory of the server ``pid`` and of its whole tree, now."""
    server = resident_bytes(pid)
    total = server + sum(resident_bytes(child) for child in descendants(pid))
    return Memory(time.monotonic(), server, total)


@dataclass(frozen=True)
class Health:
    """One ``/healthz``: when it was sent (``time.monotonic``), its latency in ms, and whether
    it answered 200 in time."""

    at: float
    ms: float
    ok: bool


class Samples:
    """What a sampling thread collects, read between two moments."""

    def __init__(self) -> None:
        self.memory: list[Memory] = []
        self.health: list[Health] = []

    def memory_between(self, start: float, end: float) -> list[Memory]:
        """The memory samples taken from ``start`` to ``end`` (``time.monotonic``)."""
        return [m for m in self.memory if start <= m.at <= end]

    def health_between(self, start: float, end: float) -> list[Health]:
        """The ``/healthz`` samples sent from ``start`` to ``end``."""
        return [h for h in self.health if start <= h.at <= end]


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``; nan when there are none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@contextmanager
def watching(url: str, pid: int) -> Iterator[Samples]:
    """Sample the memory of the service ``pid`` every :data:`MEMORY_PERIOD` and its
    ``/healthz`` at ``url`` every :data:`HEALTH_PERIOD` while the block runs."""
    samples = Samples()
    stop = threading.Event()
    with httpx.Client(base_url=url, timeout=HEALTH_TIMEOUT) as client:

        def health() -> Health:
            start = time.monotonic()
            try:
                ok = client.get("/healthz").status_code == 200
            except httpx.HTTPError:
                ok = False
            return Health(start, 1e3 * (time.monotonic() - start), ok)

        threads = [
            _every(MEMORY_PERIOD, lambda: samples.memory.append(memory_now(pid)), stop),
            _every(HEALTH_PERIOD, lambda: samples.health.append(health()), stop),
        ]
        try:
            yield samples
        finally:
            stop.set()
            for thread in threads:
                thread.join(HEALTH_TIMEOUT + 1)


def _every(period: float, sample: Callable[[], None], stop: threading.Event) -> threading.Thread:
    """A started thread calling ``sample`` every ``period`` seconds until ``stop``."""

    def loop() -> None:
        while not stop.is_set():
            start = time.monotonic()
            sample()
            stop.wait(max(0.0, period - (time.monotonic() - start)))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread
