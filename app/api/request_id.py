"""Every response carries ``X-Request-ID``: the client's, when it sent a sane one, else new."""

from __future__ import annotations

import os
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.observability import current_request_id

_SANE = re.compile(rb"^[A-Za-z0-9._:-]{1,128}$")


class RequestIdMiddleware:
    """A pure ASGI middleware (no per-request task or body copying, unlike BaseHTTPMiddleware)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = b""
        for key, value in scope["headers"]:
            if key == b"x-request-id" and _SANE.match(value):
                request_id = value
                break
        if not request_id:
            request_id = os.urandom(16).hex().encode()  # 128 random bits, as uuid4 has 122
        scope.setdefault("state", {})["request_id"] = request_id.decode()
        token = current_request_id.set(request_id.decode())  # for every log line of the request

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            current_request_id.reset(token)
