"""``GET /healthz`` timed every few milliseconds from a process of its own
(``tests/server/test_responsiveness.py``): what delays a poll is then the server, not the
test's own threads. This module imports httpx alone, so the process starts in a fraction of
a second (spawned, it imports the module that holds its function)."""

from __future__ import annotations

import gc
import multiprocessing
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType

import httpx

POLL_EVERY = 0.020
"""Seconds between the end of a poll and the start of the next."""


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


class Poller:
    """:func:`poll` in a process of its own, so that what delays a poll is the server, not the
    threads that send the heavy requests from the test's process (each held its GIL for tens of
    milliseconds as it started: a poll beside them took up to 133 ms). ``time.monotonic`` is
    the system's clock, the same in both processes. After the ``with``: ``polls``, (started,
    seconds) of each, and ``failures``."""

    def __init__(self, base: str) -> None:
        context = multiprocessing.get_context("spawn")
        self.polls: list[tuple[float, float]] = []
        self.failures: list[str] = []
        self._stop = context.Event()
        self._answers, sending = context.Pipe(duplex=False)
        self._process = context.Process(target=poll, args=(base, self._stop, sending), daemon=True)
        self._sending = sending

    def __enter__(self) -> Poller:
        self._process.start()
        self._sending.close()  # the child's end: closed here, a dead child reads as EOF
        # It imports httpx first: the measurement starts once it polls.
        assert self._answers.poll(20), "the poller did not start"
        assert self._answers.recv() == "polling"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        try:
            if not self._answers.poll(15):
                raise EOFError
            self.polls, self.failures = self._answers.recv()
        except EOFError:  # it died, or hangs: the test fails on this, not on "too few polls"
            self.failures.append(f"the poller sent no polls (exit code {self._process.exitcode})")
        self._process.join(5)
        if self._process.is_alive():
            self._process.kill()
