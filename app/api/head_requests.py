"""``HEAD`` on every ``GET`` route: answered as the ``GET``, without its body (RFC 9110 9.3.2).

FastAPI's routes answer only the methods they declare, so a ``HEAD`` was 405 although a
read key may send it. :class:`HeadAsGet`, a pure ASGI middleware inside the request
telemetry (which still counts and logs the request as ``HEAD``), hands the application a
``GET`` for any path that has a ``GET`` route and sends its status and headers
(``Content-Length`` included: the ``GET`` body's) with an empty body. A ``HEAD`` on a path
without a ``GET`` route goes on as it came, to its 405 or 404.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.mounting import route_path


class HeadAsGet:
    """Answer ``HEAD`` as ``GET`` without the body where ``allowed(path)`` includes ``GET``."""

    def __init__(self, app: ASGIApp, allowed: Callable[[str], frozenset[str]]) -> None:
        self.app = app
        self._allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "HEAD"
            or "GET" not in self._allowed(route_path(scope))
        ):
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})  # one state for both scopes: the key, the request id
        inner = {**scope, "method": "GET"}

        async def send_headers_only(message: Message) -> None:
            if message["type"] == "http.response.start":
                if "route" in inner:  # the matched route, for the telemetry's label
                    scope["route"] = inner["route"]
                await send(message)
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                await send({"type": "http.response.body", "body": b""})
            elif message["type"] != "http.response.body":
                await send(message)

        await self.app(inner, receive, send_headers_only)
