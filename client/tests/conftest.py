"""The client's tests run against a live service: ``python -m app.serve`` on a free loopback
port with a temporary SQLite database (the demo's :class:`~demo.server.LocalService`), one per
test session (per xdist worker), stopped at the end. Tests that need other settings (one fit
at a time, a server to kill) start a ``LocalService`` of their own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from client_fakes import FakeTime, Handler, Harness, Serve

from demo.server import LocalService


@pytest.fixture(scope="session")
def service_url() -> Iterator[str]:
    """The base URL of a live service for this session (keys off, loopback only)."""
    service = LocalService()
    try:
        service.wait_until_ready()
        yield service.base_url
    finally:
        service.stop()


@pytest.fixture(params=["sync", "async"])
def serve(request: pytest.FixtureRequest) -> Serve:
    """Makes a :class:`~client_fakes.Harness` of this run's kind: each test that asks for it
    runs on a :class:`Client` and on an :class:`AsyncClient`."""

    def make(handler: Handler, fake: FakeTime, **options: Any) -> Harness:
        return Harness(request.param, handler, fake, **options)

    return make
