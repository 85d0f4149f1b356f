"""The body's minimum-rate deadline of :class:`app.server.protocol.DeadlineProtocol`, read off
its one formula (``tests/server/test_timeouts.py`` times it over a socket): the idle timeout
after the body began and a second more for every ``CALIBRATION_BODY_MIN_RATE_BYTES`` bytes
received, as Apache's ``mod_reqtimeout`` counts; a rate of 0 turns the minimum off."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from app.server.protocol import DeadlineProtocol


def _deadline(rate: int, received: int, started: float = 100.0, timeout: float = 30.0) -> float:
    protocol = SimpleNamespace(
        body_min_rate=rate, body_timeout=timeout, _body_started=started, _body_bytes=received
    )
    return DeadlineProtocol._rate_deadline(protocol)  # type: ignore[arg-type]


@pytest.mark.parametrize("received", [0, 1, 10**6, 64 * 2**20])
def test_a_rate_of_zero_sets_no_deadline(received: int) -> None:
    assert _deadline(0, received) == math.inf


@pytest.mark.parametrize(("rate", "received"), [(10_000, 0), (10_000, 25_000), (500, 10**6)])
def test_each_rate_bytes_received_add_a_second(rate: int, received: int) -> None:
    assert _deadline(rate, received) == pytest.approx(100.0 + 30.0 + received / rate)
