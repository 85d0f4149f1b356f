"""Limits of ``app.server.protocol.DeadlineProtocol`` beyond its deadlines, over sockets.

What a request may make the server hold is bounded however it is framed: headers of a request
pipelined behind one still being served, the framing of a chunked body (chunk extensions,
trailers), and a response the client never reads. A client that pipelines requests and leaves
is a client gone, not an error. The server is the one ``tests/server/test_timeouts.py`` runs
on (0.5 s deadlines, :func:`tests.servers.deadline_server`); every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest
from uvicorn.config import Config
from uvicorn.server import ServerState

from app.server.protocol import DeadlineProtocol
from app.settings import get_settings
from tests.server.test_timeouts import (
    MARGIN,
    TIMEOUT,
    WAIT,
    connect,
    get,
    read_response,
    served,
)
from tests.servers import Service

pytestmark = pytest.mark.serial  # refusals are timed against the deadlines

__all__ = ["served"]  # test_timeouts.py's fixture: the server both share

PIECE = 64 * 1024
BUFFERED = 32 * 1024 * 1024
"""More than the two kernels may buffer on loopback before the sender sees the close (an
unbounded server takes gigabytes in the time these tests send)."""
SENDING_SECONDS = 3 * (TIMEOUT + MARGIN)
"""How long a test keeps sending what the server should refuse long before."""


def bytes_sent_until_refused(sock: socket.socket, first: bytes, then: bytes) -> int | None:
    """Send ``first``, then ``then`` again and again for up to :data:`SENDING_SECONDS`; the
    bytes sent when the server closed the connection, or None if it never did."""
    sock.settimeout(0.05)
    sent = 0
    deadline = time.monotonic() + SENDING_SECONDS
    try:
        sock.sendall(first)
        sent += len(first)
        while time.monotonic() < deadline:
            try:
                sock.sendall(then)
                sent += len(then)
            except TimeoutError:
                continue
    except OSError:  # reset or broken pipe: refused
        return sent
    return None


def test_headers_pipelined_behind_a_request_in_progress_are_held_to_the_limit(
    served: Service,
) -> None:
    with connect(served) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # and never read
        answered = b"GET /openapi.json HTTP/1.1\r\nHost: t\r\n\r\n" * 50
        growing = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: "
        sent = bytes_sent_until_refused(sock, answered + growing, b"a" * PIECE)
    assert sent is not None, "the server took headers for as long as they came"
    assert sent < BUFFERED


@pytest.mark.parametrize(
    ("start", "more"),
    [
        (b"10\r\n" + b'{"scores":[0.5]}' + b"\r\n0\r\nX-Trailer: ", b"a" * PIECE),  # trailers
        (b"10;e=", b"a" * PIECE),  # a chunk extension that never ends
    ],
)
def test_the_framing_of_a_chunked_body_is_bounded(
    served: Service, start: bytes, more: bytes
) -> None:
    head = (
        b"POST /v1/calibrators/framed/predict HTTP/1.1\r\nHost: t\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    with connect(served) as sock:
        sent = bytes_sent_until_refused(sock, head + start, more)
    assert sent is not None, "the server took framing for as long as it came"
    assert sent < BUFFERED


def test_a_client_that_pipelines_and_leaves_is_no_server_error(served: Service) -> None:
    with connect(served) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: t\r\n\r\n" * 40)
        time.sleep(0.5)
    time.sleep(0.5)
    with connect(served) as sock:  # and the server goes on
        sock.settimeout(WAIT)
        sock.sendall(get("/healthz"))
        assert read_response(sock.makefile("rb")) == (200, b'{"status":"ok"}')
    assert '"level":"ERROR"' not in served.output()


class _Transport(asyncio.Transport):
    """What the protocol is given by the event loop: a buffer the client drains by ``rate``
    bytes a look (0: it reads nothing), and a record of what is done to the connection."""

    def __init__(self, rate: int) -> None:
        super().__init__()
        self.rate = rate
        self.buffered = 10_000_000
        self.aborted = self.closed = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 8000) if name in ("sockname", "peername") else default

    def get_write_buffer_size(self) -> int:
        self.buffered -= self.rate
        return self.buffered

    def is_closing(self) -> bool:
        return self.aborted or self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


@pytest.mark.parametrize("rate", [0, 1])  # reads nothing; reads a byte now and then
def test_a_response_nobody_reads_is_dropped_at_the_send_deadline(
    monkeypatch: pytest.MonkeyPatch, rate: int
) -> None:
    monkeypatch.setenv("CALIBRATION_BODY_TIMEOUT_SECONDS", "0.2")
    get_settings.cache_clear()

    async def scenario() -> _Transport:
        config = Config(app=lambda *args: None, http=DeadlineProtocol)
        config.load()
        protocol = DeadlineProtocol(config=config, server_state=ServerState(), app_state={})
        transport = _Transport(rate)
        protocol.connection_made(transport)
        protocol.pause_writing()  # the transport's buffer is full
        await asyncio.sleep(0.5)
        protocol.connection_lost(None)
        return transport

    try:
        transport = asyncio.run(scenario())
    finally:
        get_settings.cache_clear()
    assert transport.aborted is (rate == 0)


def test_an_upgrade_request_is_an_ordinary_request_held_to_the_deadlines(
    served: Service,
) -> None:
    upgrade = (
        b"GET /healthz HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: MDEyMzQ1Njc4OWFiY2RlZg==\r\nSec-WebSocket-Version: 13\r\n"
    )
    with connect(served) as sock:
        sock.sendall(upgrade + b"\r\n")
        assert read_response(sock.makefile("rb")) == (200, b'{"status":"ok"}')
    with connect(served) as sock:
        started = time.monotonic()
        sock.sendall(upgrade + b"Content-Length: 5\r\n\r\n")  # and never the body
        sock.settimeout(TIMEOUT + MARGIN)
        try:
            while sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
        assert time.monotonic() - started < TIMEOUT + MARGIN


def test_headers_sent_in_two_reads_are_held_to_the_limit_together(served: Service) -> None:
    with connect(served) as sock:
        half = get("/healthz", "X-Big: " + "a" * 60_000)[:-4]  # no blank line yet
        sock.sendall(half)
        time.sleep(0.1)
        sock.sendall(b"X-More: " + b"b" * 60_000 + b"\r\n\r\n")
        status, _ = read_response(sock.makefile("rb"))
    assert status == 431


def test_a_request_the_parser_refuses_is_answered_400_problem_json(served: Service) -> None:
    with connect(served) as sock:
        sock.sendall(b"GET /healthz?x=\xff HTTP/1.1\r\nHost: t\r\n\r\n")
        status, body = read_response(sock.makefile("rb"))
    assert status == 400
    problem = json.loads(body)
    assert (problem["status"], problem["title"]) == (400, "Malformed request")
    assert problem["type"] == "/problems/malformed-request"
