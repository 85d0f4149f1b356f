"""``GET /healthz`` timed every few milliseconds from a process of its own
(``tests/server/test_responsiveness.py``): what delays a poll is then the server, not the
test's own threads. Beside it a second process only sleeps a millisecond at a time and
notes when it woke late: a stall of the whole machine (a virtual machine's stolen time, say),
which delays every process and so says nothing about the server. This module imports httpx
alone, so the processes start in a fraction of a second (spawned, each imports the module
that holds its function)."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType

import httpx

POLL_EVERY = 0.020
"""Seconds between the end of a poll and the start of the next."""

TICK = 0.001
"""Seconds the stall watcher sleeps at a time."""

STALL = 0.010
"""A wake-up this many seconds later than asked is a stall of the machine."""

WATCHER_NICENESS = -10
"""The watcher's priority, above the server's and the test's: a busy run queue of theirs
then does not delay its wake-ups, a stall of the whole machine (a virtual machine's stolen
time) still does."""


def poll(base: str, stop: EventType, answers: Connection) -> None:
    """``GET /healthz`` every :data:`POLL_EVERY` until ``stop`` is set; send ``"polling"`` down
    ``answers`` after the first poll, and ``(polls, failures)`` at the end: (started, seconds)
    of each poll."""
    gc.disable()  # nothing here makes cycles, and a collection would delay a poll
    polls: list[tuple[float, float]] = []
    failures: list[str] = []
    with httpx.Client(base_url=base, timeout=10) as client:
        while not stop.is_set():
            started = time.monotonic()
            try:
                response = client.get("/healthz")
                if response.status_code != 200:
                    failures.append(f"{response.status_code}: {response.text[:200]}")
            except httpx.HTTPError as exc:
                failures.append(repr(exc))
            polls.append((started, time.monotonic() - started))
            if len(polls) == 1:
                answers.send("polling")
            stop.wait(POLL_EVERY)
    answers.send((polls, failures))


def watch(stop: EventType, answers: Connection) -> None:
    """Sleep :data:`TICK` at a time until ``stop`` is set; send ``"watching"`` down
    ``answers`` first, and the stalls at the end: (started, seconds) of every sleep that
    ended :data:`STALL` or more late, its time less the sleep asked for."""
    gc.disable()
    with contextlib.suppress(OSError):  # above the processes it watches, where allowed (root)
        os.setpriority(os.PRIO_PROCESS, 0, WATCHER_NICENESS)
    stalls: list[tuple[float, float]] = []
    answers.send("watching")
    before = time.monotonic()
    while not stop.is_set():
        time.sleep(TICK)
        now = time.monotonic()
        if now - before - TICK >= STALL:
            stalls.append((before, now - before - TICK))
        before = now
    answers.send(stalls)


def stalled(stalls: list[tuple[float, float]], started: float, seconds: float) -> float:
    """How much of the interval ``[started, started + seconds]`` the machine spent stalled."""
    return sum(
        max(0.0, min(started + seconds, begun + length) - max(started, begun))
        for begun, length in stalls
    )


class Poller:
    """:func:`poll` in a process of its own, so that what delays a poll is the server, not the
    threads that send the heavy requests from the test's process (each held its GIL for tens of
    milliseconds as it started: a poll beside them took up to 133 ms). ``time.monotonic`` is
    the system's clock, the same in every process. After the ``with``: ``polls``, (started,
    seconds) of each, ``failures``, and ``stalls`` of the machine meanwhile (:func:`watch`)."""

    def __init__(self, base: str) -> None:
        context = multiprocessing.get_context("spawn")
        self.polls: list[tuple[float, float]] = []
        self.failures: list[str] = []
        self.stalls: list[tuple[float, float]] = []
        self._stop = context.Event()
        self._answers, sending = context.Pipe(duplex=False)
        self._process = context.Process(target=poll, args=(base, self._stop, sending), daemon=True)
        self._sending = sending
        self._stalls, noting = context.Pipe(duplex=False)
        self._watcher = context.Process(target=watch, args=(self._stop, noting), daemon=True)
        self._noting = noting

    def __enter__(self) -> Poller:
        self._watcher.start()
        self._noting.close()  # the child's end: closed here, a dead child reads as EOF
        self._process.start()
        self._sending.close()
        try:
            assert self._stalls.poll(20), "the stall watcher did not start"
            assert self._stalls.recv() == "watching"
            # It imports httpx first: the measurement starts once it polls.
            assert self._answers.poll(20), "the poller did not start"
            assert self._answers.recv() == "polling"
        except BaseException:
            self._stop.set()
            self._end()
            raise
        return self

    def stalled(self, started: float, seconds: float) -> float:
        """How much of a poll from ``started`` taking ``seconds`` the machine spent stalled."""
        return stalled(self.stalls, started, seconds)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        try:
            if not self._answers.poll(15):
                raise EOFError
            self.polls, self.failures = self._answers.recv()
        except EOFError:  # it died, or hangs: the test fails on this, not on "too few polls"
            self.failures.append(f"the poller sent no polls (exit code {self._process.exitcode})")
        try:
            if not self._stalls.poll(15):
                raise EOFError
            self.stalls = self._stalls.recv()
        except EOFError:
            self.failures.append(f"the watcher sent no stalls (exit code {self._watcher.exitcode})")
        self._end()

    def _end(self) -> None:
        for process in (self._process, self._watcher):
            process.join(5)
            if process.is_alive():
                process.kill()
