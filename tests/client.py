"""The suite's in-process client: Starlette's :class:`~starlette.testclient.TestClient` with a
transport that crosses to the app's event loop once per request.

Starlette's own transport streams a response through its portal: eight calls from the test's
thread to the loop's for a ``GET /healthz`` (events, a stream, the app's task, each body part),
each a thread hand-off. Measured with the app in one process, that is ~4 ms of CPU a request
against ~1 ms through :class:`httpx.ASGITransport`, and the suite sends tens of thousands; on
two busy cores each hand-off also waits for the other thread to be scheduled. This transport
runs the whole exchange in one coroutine (:func:`_exchange`) and hands back the status, the
headers and the whole body. What a test sees is the same: the response, the app's exception
raised where ``raise_server_exceptions`` says so, a 500 with no body where it does not and the
app sent nothing, ``HEAD`` without a body, and ``http.disconnect`` for an app that listens
past its request until its response is complete. What it gives up is streaming a response
piece by piece, which no test here reads (``client.stream`` would wait for the whole body);
websockets go through Starlette's transport unchanged.

Tests import :class:`TestClient` from here: ``ruff`` refuses ``fastapi.testclient`` and
``starlette.testclient`` anywhere else but ``docs/render_diagram.py`` (``pyproject.toml``,
banned-api). It leans on the attributes of Starlette's transport (its portal factory, app,
state, client and ``raise_server_exceptions``), which its constructor checks are there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import anyio
import httpx
from starlette.testclient import TestClient as StarletteTestClient
from starlette.testclient import _TestClientTransport
from starlette.types import ASGIApp, Message

__all__ = ["TestClient"]


class TestClient(StarletteTestClient):
    """:class:`starlette.testclient.TestClient`, whose requests go through :class:`_OneCall`."""

    __test__ = False

    def __init__(self, app: ASGIApp, *args: Any, **kwargs: Any) -> None:
        super().__init__(app, *args, **kwargs)
        starlette_transport = self._transport
        needed = ("portal_factory", "app", "app_state", "client", "raise_server_exceptions")
        if not isinstance(starlette_transport, _TestClientTransport) or not all(
            hasattr(starlette_transport, name) for name in needed
        ):  # pragma: no cover - a Starlette release that changed its transport
            raise TypeError("Starlette's TestClient transport is not the one tests/client.py knows")
        self._transport = _OneCall(starlette_transport)


@dataclass
class _Answer:
    """What the app sent: its response's start, its body parts, and what it raised."""

    status: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: list[bytes] = field(default_factory=list)
    error: BaseException | None = None


class _OneCall(httpx.BaseTransport):
    """The transport of :class:`TestClient`: one portal call per HTTP request."""

    def __init__(self, starlette: _TestClientTransport) -> None:
        self._starlette = starlette

    def close(self) -> None:
        self._starlette.close()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme not in {"http", "https"}:
            return self._starlette.handle_request(request)  # websockets
        starlette = self._starlette
        with starlette.portal_factory() as portal:
            answer = portal.call(_exchange, starlette.app, self._scope(request), request.read())
        if answer.error is not None and starlette.raise_server_exceptions:
            raise answer.error
        if answer.status is None:
            if starlette.raise_server_exceptions:
                raise AssertionError("TestClient did not receive any response.")
            return httpx.Response(500, request=request)
        body = b"" if request.method == "HEAD" else b"".join(answer.body)
        stream = httpx.ByteStream(
            body
        )  # as content=, but adding no Content-Length the app did not send
        return httpx.Response(answer.status, headers=answer.headers, stream=stream, request=request)

    def _scope(self, request: httpx.Request) -> dict[str, Any]:
        """The ASGI scope of ``request``, as Starlette's transport writes it."""
        starlette, url = self._starlette, request.url
        port = url.port or {"http": 80, "https": 443}[url.scheme]
        headers = [(b"host", url.netloc)] if "host" not in request.headers else []
        headers += [
            (key.lower().encode(), value.encode()) for key, value in request.headers.multi_items()
        ]
        return {
            "type": "http",
            "http_version": "1.1",
            "method": request.method,
            "path": unquote(url.path),
            "raw_path": url.raw_path.split(b"?", 1)[0],
            "root_path": starlette.root_path,
            "scheme": url.scheme,
            "query_string": url.query,
            "headers": headers,
            "client": starlette.client,
            "server": [url.raw_host.decode("ascii"), port],
            "state": starlette.app_state.copy(),
        }


async def _exchange(app: ASGIApp, scope: dict[str, Any], body: bytes) -> _Answer:
    """Run ``app`` on one request whose body is ``body``, to its end: what it sent."""
    answer = _Answer()
    complete = anyio.Event()
    received = False

    async def receive() -> Message:
        nonlocal received
        if received:  # past its body the client is connected until the response is complete
            await complete.wait()
            return {"type": "http.disconnect"}
        received = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            if answer.status is not None:
                raise AssertionError('Received multiple "http.response.start" messages.')
            answer.status = message["status"]
            answer.headers = [(k.decode(), v.decode()) for k, v in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            if answer.status is None or complete.is_set():
                raise AssertionError('Received "http.response.body" out of order.')
            answer.body.append(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                complete.set()

    try:
        await app(scope, receive, send)
    except Exception as error:  # handed to the test's thread, as Starlette's transport does
        answer.error = error
    finally:
        complete.set()
    return answer
