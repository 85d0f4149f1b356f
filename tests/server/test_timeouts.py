"""Read deadlines and trusted proxies of ``python -m app.serve``, over real sockets.

One ``app.serve`` process on SQLite runs with 0.5 s header and body timeouts and trusts
``X-Forwarded-*`` only from 127.0.0.2 (the tests connect from 127.0.0.1, but for the one that
plays the proxy): :func:`tests.servers.deadline_server`, which ``test_protocol_limits.py``
shares. Raw sockets play the slow clients: one that sends nothing, half its headers, its
headers a byte at a time, or a body that stalls; each must be cut off within the deadline
plus a margin, and a body that stalls answers 408 problem+json. Normal keep-alive traffic and
a body sent in pieces with short pauses still work. Every wait is bounded.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from typing import BinaryIO

import httpx
import pytest
from pydantic import ValidationError

from app.settings import Settings
from tests.api.helpers import sigmoid_batch
from tests.servers import DEADLINE_SECONDS, MIN_BODY_RATE, TRUSTED_PROXY, Service

pytestmark = pytest.mark.serial  # connections must close within their deadlines' margins

TIMEOUT = DEADLINE_SECONDS
"""The header and body timeouts of the server under test, in seconds."""

MARGIN = 1.5
"""How much later than its deadline a connection may be closed (a loaded CI machine)."""

EARLY = 0.3
"""No connection may be closed sooner than this: the deadline, less the time to connect."""

WAIT = 5.0
"""The longest a socket operation of these tests waits, but for a fit's answer."""

ANSWER_WAIT = 60.0
"""The longest a fit's answer is waited for: only the connections' deadlines are timed here,
and on a loaded machine the first job also waits for the workers' fork server to start."""


@pytest.fixture
def served(deadline_server: Service) -> Service:
    """The server under test, shared with ``test_protocol_limits.py`` (one start for both)."""
    return deadline_server


def connect(service: Service, wait: float = WAIT) -> socket.socket:
    host, port = service.base_url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=WAIT)
    sock.settimeout(wait)
    return sock


def seconds_until_closed(sock: socket.socket, started: float) -> float:
    """Wait for the server to close ``sock`` without answering; how long after ``started``."""
    try:
        data = sock.recv(4096)
    except ConnectionResetError:
        data = b""
    assert data == b"", f"the server answered instead of closing: {data[:200]!r}"
    return time.monotonic() - started


def exchange(sock: socket.socket, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` on ``sock``; the status and body of the one whole response."""
    sock.sendall(request)
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, response.read()


def get(path: str, *headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: test", *headers, "", ""]
    return "\r\n".join(lines).encode()


def post_head(path: str, length: int) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        "Host: test",
        "Content-Type: application/json",
        f"Content-Length: {length}",
        "",
        "",
    ]
    return "\r\n".join(lines).encode()


def test_a_connection_that_sends_nothing_is_closed(served: Service) -> None:
    with connect(served) as sock:
        elapsed = seconds_until_closed(sock, time.monotonic())
    assert EARLY <= elapsed <= TIMEOUT + MARGIN


def test_a_connection_that_stops_half_way_through_its_headers_is_closed(
    served: Service,
) -> None:
    with connect(served) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n")  # no blank line: not complete
        elapsed = seconds_until_closed(sock, started)
    assert EARLY <= elapsed <= TIMEOUT + MARGIN


def test_headers_sent_a_byte_at_a_time_do_not_push_the_deadline_back(served: Service) -> None:
    request = get("/healthz", "X-Padding: " + "a" * 200)  # 10 s of bytes at 20 per second
    with connect(served) as sock:
        started = time.monotonic()
        sock.settimeout(0.05)
        closed_after = None
        for byte in request:
            try:
                sock.sendall(bytes([byte]))
                if sock.recv(4096) == b"":
                    closed_after = time.monotonic() - started
                    break
            except TimeoutError:
                continue
            except OSError:  # reset or broken pipe: closed as well
                closed_after = time.monotonic() - started
                break
    assert closed_after is not None, "the server waited for every trickled byte"
    assert EARLY <= closed_after <= TIMEOUT + MARGIN


def test_headers_past_the_limit_are_answered_431_and_the_connection_closed(
    served: Service,
) -> None:
    from app.server.limits import MAX_HEADER_BYTES

    near = get("/healthz", "X-Padding: " + "a" * (MAX_HEADER_BYTES - 200))
    with connect(served) as sock:
        assert exchange(sock, near) == (200, b'{"status":"ok"}')
    with connect(served) as sock:
        sock.sendall(get("/healthz", "X-Padding: " + "a" * MAX_HEADER_BYTES))
        response = http.client.HTTPResponse(sock)
        response.begin()
        body = json.loads(response.read())
        assert response.status == 431
        assert response.getheader("content-type") == "application/problem+json"
        assert body["status"] == 431
        assert body["type"] == "/problems/headers-too-large"
        assert f"exceed {MAX_HEADER_BYTES} bytes" in body["detail"]
        assert seconds_until_closed(sock, time.monotonic()) < MARGIN


def test_keep_alive_serves_several_requests_then_closes_when_idle(served: Service) -> None:
    with connect(served) as sock:
        for _ in range(3):
            assert exchange(sock, get("/healthz")) == (200, b'{"status":"ok"}')
        finished = time.monotonic()
        elapsed = seconds_until_closed(sock, finished)
    assert EARLY <= elapsed <= TIMEOUT + MARGIN


@pytest.mark.parametrize("route", ["fit", "predict"])  # the regular route, and the hot path
def test_a_body_that_stalls_is_answered_408(served: Service, route: str) -> None:
    path = f"/v1/calibrators/stalled/{route}"
    with connect(served) as sock:
        started = time.monotonic()
        sock.sendall(post_head(path, 100) + b'{"scores": [0.1,')  # 16 of the 100 bytes
        response = http.client.HTTPResponse(sock)
        response.begin()
        elapsed = time.monotonic() - started
        body = json.loads(response.read())
        assert response.status == 408
        assert response.getheader("content-type") == "application/problem+json"
        assert response.getheader("connection") == "close"
        assert body["status"] == 408
        assert body["title"] == "Request timeout"
        assert f"no part of it arrived for {TIMEOUT:g} s" in body["detail"]
        assert "body idle timeout" in body["detail"]
        assert seconds_until_closed(sock, started) <= TIMEOUT + MARGIN
    assert EARLY <= elapsed <= TIMEOUT + MARGIN
    # The server answers, then the application sees the client leave and logs the request.
    assert logged_within(served, f'"path":"{path}","status":408')
    assert '"level":"ERROR"' not in served.output()


def logged_within(service: Service, text: str) -> bool:
    """Whether ``text`` shows in ``service``'s log within :data:`WAIT` seconds."""
    deadline = time.monotonic() + WAIT
    while text not in service.output():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_body_sent_in_pieces_with_short_pauses_is_served(served: Service) -> None:
    body = json.dumps({**sigmoid_batch(200), "method": "platt"}).encode()
    pieces = [body[i : i + len(body) // 4 + 1] for i in range(0, len(body), len(body) // 4 + 1)]
    with connect(served, ANSWER_WAIT) as sock:
        started = time.monotonic()
        sock.sendall(post_head("/v1/calibrators/paused/fit", len(body)))
        for piece in pieces:
            time.sleep(TIMEOUT / 2)
            sock.sendall(piece)
        response = http.client.HTTPResponse(sock)
        response.begin()
        answer = json.loads(response.read())
        # The body came whole, so the connection stays open for the next request.
        assert response.getheader("connection") is None
        assert exchange(sock, get("/healthz")) == (200, b'{"status":"ok"}')

    assert time.monotonic() - started > TIMEOUT  # longer than the timeout, never idle that long
    assert response.status == 201, answer
    assert answer["version"] == 1


def test_a_body_that_trickles_is_answered_408_although_it_never_stalls(served: Service) -> None:
    # A byte every fifth of the idle timeout: never idle for long, but ~50 bytes a second
    # against MIN_BODY_RATE, so its deadline is the idle timeout and a few hundredths more.
    path = "/v1/calibrators/trickled/fit"
    stop = threading.Event()

    def trickle(sock: socket.socket) -> None:
        while not stop.wait(TIMEOUT / 5):
            try:
                sock.sendall(b" ")
            except OSError:  # closed once answered
                return

    with connect(served) as sock:
        started = time.monotonic()
        sock.sendall(post_head(path, 10_000) + b"{")
        sender = threading.Thread(target=trickle, args=(sock,), daemon=True)
        sender.start()
        try:
            response = http.client.HTTPResponse(sock)
            response.begin()
            elapsed = time.monotonic() - started
            body = json.loads(response.read())
        finally:
            stop.set()
            sender.join(WAIT)
    assert response.status == 408, body
    assert response.getheader("connection") == "close"
    assert "arrived too slowly" in body["detail"]
    assert f"less than the {MIN_BODY_RATE} bytes a second" in body["detail"]
    assert "body minimum rate" in body["detail"]
    assert TIMEOUT <= elapsed <= TIMEOUT + MARGIN
    assert logged_within(served, f'"path":"{path}","status":408')


def test_a_large_body_read_slower_than_it_arrives_is_not_cut_off(served: Service) -> None:
    # 8 MB at loopback speed: uvicorn stops reading while the application catches up, and
    # those pauses are the server's, not idle time of the client's.
    body = json.dumps({**sigmoid_batch(400_000), "method": "platt"}).encode()
    with connect(served, ANSWER_WAIT) as sock:
        status, answer = exchange(sock, post_head("/v1/calibrators/large/fit", len(body)) + body)
    assert status == 201, answer[:300]


def test_pipelined_requests_are_answered_in_order_and_a_stalled_one_cut_off(
    served: Service,
) -> None:
    # The fit takes longer than the body timeout: the stalled request waiting behind it is
    # not cut off then, only once it runs and its body still does not come.
    body = json.dumps({**sigmoid_batch(400_000), "method": "isotonic"}).encode()
    fit = post_head("/v1/calibrators/pipelined/fit", len(body)) + body
    stalled = post_head("/v1/calibrators/stalled/fit", 100) + b'{"scores": ['
    with connect(served, ANSWER_WAIT) as sock:
        started = time.monotonic()
        sock.sendall(get("/healthz") + fit + stalled)
        responses = sock.makefile("rb")  # one reader: the answers may arrive in one packet
        assert read_response(responses) == (200, b'{"status":"ok"}')
        status, answer = read_response(responses)
        assert status == 201, answer[:300]
        status, answer = read_response(responses)
        assert status == 408
        assert json.loads(answer)["status"] == 408
        assert seconds_until_closed(sock, started) <= 10 * TIMEOUT + MARGIN


def read_response(responses: BinaryIO) -> tuple[int, bytes]:
    """The status and body of the next response on a connection's one buffered reader."""
    status = int(responses.readline().split()[1])
    length = 0
    while (line := responses.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, responses.read(length)


def test_a_body_still_arriving_after_an_early_answer_cannot_hold_the_connection(
    served: Service,
) -> None:
    with connect(served) as sock:
        status, _ = exchange(sock, post_head("/v1/calibrators/big/fit", 10**9))
        assert status == 413  # refused on its Content-Length, before any body
        finished = time.monotonic()
        closed_after = None
        sock.settimeout(0.05)
        while time.monotonic() - finished < TIMEOUT + MARGIN:
            try:
                sock.sendall(b"0")  # the body the client keeps sending, slowly
                if sock.recv(4096) == b"":
                    closed_after = time.monotonic() - finished
                    break
            except TimeoutError:
                continue
            except OSError:
                closed_after = time.monotonic() - finished
                break
    assert closed_after is not None, "the trickled body held the connection"
    assert closed_after < TIMEOUT  # closed with the answer (Connection: close), at once


def test_forwarded_headers_count_only_from_trusted_proxies(served: Service) -> None:
    # X-Forwarded-Proto and -For are trusted together (uvicorn's ProxyHeadersMiddleware);
    # the scheme shows in the Location of the trailing-slash redirect.
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"}
    untrusted = httpx.get(f"{served.base_url}/healthz/", headers=forwarded, timeout=WAIT)
    assert untrusted.status_code == 307
    assert untrusted.headers["location"].startswith("http://")

    # The same request from the trusted proxy's address is believed.
    from_proxy = httpx.HTTPTransport(local_address=TRUSTED_PROXY)
    with httpx.Client(transport=from_proxy, timeout=WAIT) as proxy:
        trusted = proxy.get(f"{served.base_url}/healthz/", headers=forwarded)
    assert trusted.status_code == 307
    assert trusted.headers["location"].startswith("https://")
    # And the default trusts a proxy on the same host, as uvicorn is handed it.
    assert Settings.model_fields["forwarded_allow_ips"].default == "127.0.0.1"


@pytest.mark.parametrize("value", ["127.0.0.1", " 10.0.0.0/8, ::1", "*"])
def test_forwarded_allow_ips_accepts_addresses_networks_or_a_lone_star(value: str) -> None:
    Settings(forwarded_allow_ips=value)


@pytest.mark.parametrize("value", ["proxy", "10.0.0.1/8", "*,10.0.0.1", "127.0.0.1,"])
def test_forwarded_allow_ips_refuses_what_uvicorn_would_silently_ignore(value: str) -> None:
    with pytest.raises(ValidationError, match="forwarded_allow_ips"):
        Settings(forwarded_allow_ips=value)
