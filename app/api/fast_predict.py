"""The hot path of ``POST /v1/calibrators/{name}/predict`` and of the Open Inference
Protocol's ``POST /v2/models/{name}[/versions/{version}]/infer``, in plain ASGI.

Model servers call predict on every request they serve, so its overhead is their latency.
When a small request (JSON for predict; JSON or binary tensors for infer) names a version
that may be served from memory (the freshness policy of :mod:`app.service.version_cache`), this
middleware answers it directly, without FastAPI's routing, dependency solving or the
threadpool hop. It runs the very function the regular route runs
(:mod:`app.api.answers`),
so the answer is the same either way; anything that function cannot answer from memory — a cache
miss that needs the database, a large body, an error to report — is handed, body and all,
to the regular route (on a miss with the body as parsed, so that it is not parsed twice).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.answers import Answer, answer_infer, answer_predict, parse_infer_body
from app.api.bodies.media import parse_predict
from app.api.bodies.payloads import byte_count
from app.api.bodies.tensors import is_compressed
from app.api.deps import PARSED_BODY
from app.api.documents import NAME_PATTERN
from app.service.use_cases import CalibrationService

_PATH = re.compile(rf"^/v1/calibrators/({NAME_PATTERN.strip('^$')})/predict$")
_INFER_PATH = re.compile(rf"^/v2/models/({NAME_PATTERN.strip('^$')})(?:/versions/([^/]+))?/infer$")
_INFER_HEADERS = (b"content-encoding", b"inference-header-content-length")
FAST_MAX_BYTES = 64 * 1024
"""Larger bodies take the regular route, whose kernel runs off the event loop."""


class FastPredict:
    """Answer cached, well-formed, small predict and infer requests; pass everything else on."""

    def __init__(self, app: ASGIApp, service: Callable[[], CalibrationService | None]) -> None:
        self.app = app
        self._service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        # Answer only what app.api.security.ApiKeyAuth (outside this one) has let through: were
        # the middleware order ever changed, the hot path would answer nothing unchecked.
        authorised = "api_key" in scope.get("state", {})
        service = self._service()
        answer = _answerer(scope) if authorised and service is not None else None
        length = _content_length(scope, json_only=answer is _answer) if answer else None
        if answer is None or service is None or length is None or length > FAST_MAX_BYTES:
            await self.app(scope, receive, send)
            return
        body, more = await _read(receive, length)
        try:
            answered = None if more else answer(service, scope, body)
        except Exception:  # any doubt: the regular route answers, and reports any error
            answered = None
        if answered is None:
            await self.app(scope, _replay(body, more, receive), send)
            return
        content, headers, media_type = answered
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", media_type.encode()),
                    (b"content-length", str(len(content)).encode()),
                    *((k.lower().encode(), v.encode()) for k, v in headers.items()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": content})


def _answerer(scope: Scope) -> Callable[[CalibrationService, Scope, bytes], Answer | None] | None:
    """The hot path's function for the request's route: predict's, infer's, or None."""
    path = scope["path"]
    if _PATH.match(path):
        return _answer
    if _INFER_PATH.match(path):
        return _answer_infer
    return None


def _content_length(scope: Scope, *, json_only: bool) -> int | None:
    """The declared length of the body (with ``json_only``, of a JSON body); None (the
    regular route decides) for anything else, including a request with two Content-Type
    headers."""
    types = []
    length = None
    for key, value in scope["headers"]:
        if key == b"content-type":
            types.append(value.split(b";", 1)[0].strip().lower())
        elif key == b"content-length":
            length = byte_count(value)
    if json_only and types != [b"application/json"]:
        return None
    return length if len(types) <= 1 else None


async def _read(receive: Receive, length: int) -> tuple[bytes, bool]:
    """The body (up to ``length`` bytes), and whether the client sent more than it said."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), True  # a disconnect: let the regular path see it
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), size > length
        if size > length:
            return b"".join(chunks), True


def _replay(body: bytes, more: bool, receive: Receive) -> Receive:
    """A ``receive`` that yields the bytes already read, then whatever the client still sends."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replay


def _answer(service: CalibrationService, scope: Scope, body: bytes) -> Answer | None:
    """Predict's response, or None when the regular route should decide (a query parameter
    other than one ``version``, a version not served from memory, any error)."""
    match = _PATH.match(scope["path"])
    assert match is not None
    raw: bytes = scope["query_string"]
    if not raw:
        version = None
    elif raw.startswith(b"version=") and not any(c in raw for c in (b"&", b"%", b"+", b";")):
        version = raw[8:].decode("latin-1")  # what parse_qsl gives, at a fifth of its cost
    else:
        query = parse_qsl(raw.decode("latin-1"), keep_blank_values=True)
        if any(key != "version" for key, _ in query) or len(query) > 1:
            return None
        version = query[0][1] if query else None
    args = parse_predict("application/json", body, service.settings.max_batch_rows)
    content = answer_predict(service, match.group(1), args, version, None, scope, cached_only=True)
    if content is None:
        scope.setdefault("state", {})[PARSED_BODY] = args
        return None
    return content, {}, "application/json"


def _answer_infer(service: CalibrationService, scope: Scope, body: bytes) -> Answer | None:
    """Infer's response, or None when the regular route should decide (a compressed body,
    whose inflating is no work for the event loop; a version not served from memory; any
    error)."""
    match = _INFER_PATH.match(scope["path"])
    assert match is not None
    headers = {k: v.decode("latin-1") for k, v in scope["headers"] if k in _INFER_HEADERS}
    if is_compressed(headers.get(b"content-encoding")):
        return None
    request = parse_infer_body(service, body, None, headers.get(b"inference-header-content-length"))
    answer = answer_infer(
        service, match.group(1), match.group(2) or "latest", request, scope, cached_only=True
    )
    if answer is None:
        scope.setdefault("state", {})[PARSED_BODY] = request
    return answer
