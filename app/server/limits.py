"""What one connection may make the server hold, and how the protocol refuses the rest
(:mod:`app.server.protocol`)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import socket
import struct
import termios
from http import HTTPStatus

from app.api.problems import problem_response

logger = logging.getLogger("app.http")

MAX_HEADER_BYTES = 64 * 1024
"""The most a request line and its headers may take before they are routed: twice nginx's
default (4 buffers of 8 KiB), room for long bearer tokens, a bound on what one connection
holds while it has not yet said what it wants."""

HEADERS_TOO_LARGE = f"the request line and headers exceed {MAX_HEADER_BYTES} bytes"
FRAMING_TOO_LARGE = (
    f"the body's framing (chunk sizes, extensions, trailers) exceeds {MAX_HEADER_BYTES} bytes "
    "and an eighth of the body"
)


def framing_allowed(body_bytes: int) -> int:
    """The bytes of a chunked body's framing (chunk sizes, extensions, trailers) allowed
    around ``body_bytes`` of body: a header's worth, and an eighth of the body for the chunk
    sizes of small chunks."""
    return MAX_HEADER_BYTES + body_bytes // 8


class HeaderScan:
    """Counts the bytes of request headers before the parser sees them (httptools buffers
    a header value whole, at a cost that grows with its square)."""

    def __init__(self) -> None:
        self._bytes = 0
        self._tail = b""  # the last bytes seen, where a blank line may begin

    def restart(self) -> None:
        """A new request's headers are awaited."""
        self._bytes, self._tail = 0, b""

    def too_large(self, data: bytes) -> bool:
        """Whether ``data`` takes the headers past :data:`MAX_HEADER_BYTES` before the blank
        line that ends them."""
        room = MAX_HEADER_BYTES - self._bytes
        window = self._tail + data[: room + 1]
        if b"\r\n\r\n" in window or b"\n\n" in window:
            return False  # the headers end within the limit
        self._bytes += len(data)
        self._tail = window[-3:]
        return self._bytes > MAX_HEADER_BYTES


def problem_bytes(status: int, slug: str, title: str, detail: str) -> bytes:
    """A whole HTTP/1.1 problem+json response of the type ``slug`` that closes the
    connection."""
    response = problem_response(status, detail, slug=slug, title=title)
    head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}".encode()]
    head += [name + b": " + value for name, value in response.raw_headers]
    head.append(b"connection: close")
    return b"\r\n".join(head) + b"\r\n\r\n" + bytes(response.body)


def unsent_bytes(transport: asyncio.Transport) -> int:
    """The bytes of response the client has not taken yet: the transport's buffer, and the
    kernel's send queue where the kernel tells (Linux's ``SIOCOUTQ``); the transport wakes
    only after half the kernel's buffer has gone, so a slow reader shows there first."""
    queued = 0
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4)
            queued = struct.unpack("i", raw)[0]
        except (OSError, ValueError):
            pass
    return transport.get_write_buffer_size() + queued


class SendWatch:
    """While a transport cannot write: drop the connection once the client has taken
    nothing of the response for ``timeout`` seconds (looked at every second or so)."""

    def __init__(self, transport: asyncio.Transport, timeout: float, client: object) -> None:
        self._transport, self._timeout, self._client = transport, timeout, client
        self._loop = asyncio.get_running_loop()
        self._every = min(1.0, timeout / 4)
        self._unsent, self._read_at = unsent_bytes(transport), self._loop.time()
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(self._every, self._look)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _look(self) -> None:
        self._timer = None
        unsent, now = unsent_bytes(self._transport), self._loop.time()
        if unsent < self._unsent:  # the client took some
            self._unsent, self._read_at = unsent, now
        if now - self._read_at < self._timeout:
            self._timer = self._loop.call_later(self._every, self._look)
            return
        logger.info(
            "dropping the connection to %s: it read nothing of the response for %g s",
            self._client,
            self._timeout,
        )
        drop(self._transport)


def drop(transport: asyncio.Transport) -> None:
    """Abandon the connection and what it still had to send: a reset, so that the kernel
    does not keep the unread response queued (``SO_LINGER`` 0, then abort)."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def cancel_timer(timer: asyncio.TimerHandle | None) -> None:
    """Cancel ``timer`` unless there is none."""
    if timer is not None:
        timer.cancel()
