"""The stall watcher of :mod:`tests.server.polling`: it sees a stall it did not cause, and a
poll is excused only the part of its time the machine spent stalled."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.server.polling import STALL, TICK, Poller, stalled


@pytest.mark.parametrize(
    ("started", "seconds", "expected"),
    [
        (10.0, 0.1, 0.05),  # the stall 10.05..10.15 covers the poll's last half
        (10.2, 0.1, 0.0),  # after it
        (9.9, 0.1, 0.0),  # before it
        (10.06, 0.02, 0.02),  # within it
        (10.1, 0.4, 0.05 + 0.02),  # the end of one and the whole of the next
    ],
)
def test_stalled_is_the_overlap_of_the_stalls_with_the_poll(
    started: float, seconds: float, expected: float
) -> None:
    stalls = [(10.05, 0.1), (10.3, 0.02)]
    assert stalled(stalls, started, seconds) == pytest.approx(expected, abs=1e-12)


def test_a_stopped_watcher_reports_the_stall() -> None:
    """The watcher, stopped for 200 ms by SIGSTOP, notes one stall of about that length, and
    no other of 100 ms or more: a poll is not excused by a long stall nobody had."""
    with Poller("http://127.0.0.1:9") as poller:  # the polls fail: only the stalls matter
        time.sleep(0.2)
        pid = poller._watcher.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        time.sleep(0.2)
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.2)
    long = [(begun, length) for begun, length in poller.stalls if length >= 0.1]
    assert len(long) == 1, poller.stalls
    begun, length = long[0]
    assert 0.15 <= length <= 0.5
    assert begun - TICK - STALL <= stopped <= begun + length
    assert poller.stalled(stopped, 0.2) >= 0.15
