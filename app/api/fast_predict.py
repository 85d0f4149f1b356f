"""The hot path of ``POST /v1/calibrators/{name}/predict``, in plain ASGI.

Model servers call predict on every request they serve, so its overhead is their latency.
When a small JSON request names a version that is loaded and confirmed fresh (see
:mod:`app.predictors`), this middleware answers it directly: orjson in, the kernel, orjson
out, without FastAPI's routing, dependency solving or the threadpool hop. Anything else — a
cache miss that needs the database, a large body, any doubt about the input — is handed,
body and all, to the regular route, which validates it and answers errors as problem+json.
The answer is the same either way; only the time it takes differs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import parse_qsl

import numpy as np
import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.observability import record_predictions
from app.resolver import Selector
from app.service import CalibrationService

_PATH = re.compile(r"^/v1/calibrators/([A-Za-z0-9][A-Za-z0-9._-]{0,127})/predict$")
_DIGITS = re.compile(r"^[0-9]{1,18}$")
FAST_MAX_BYTES = 64 * 1024
"""Larger bodies take the regular route, whose kernel runs off the event loop."""


class FastPredict:
    """Answer cached, well-formed, small predict requests; pass everything else on."""

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
        match = _PATH.match(scope["path"]) if authorised else None
        service = self._service()
        length = _content_length(scope) if match else None
        if match is None or service is None or length is None or length > FAST_MAX_BYTES:
            await self.app(scope, receive, send)
            return
        body, more = await _read(receive, length)
        try:
            answer = None if more else _answer(service, match.group(1), scope, body)
        except Exception:  # any doubt: the regular route answers (and reports errors properly)
            answer = None
        if answer is None:
            await self.app(scope, _replay(body, more, receive), send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(answer)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": answer})


def _content_length(scope: Scope) -> int | None:
    """The declared length of a JSON body; None (the regular route decides) for anything
    else, including a request with two Content-Type headers."""
    types = []
    length = None
    for key, value in scope["headers"]:
        if key == b"content-type":
            types.append(value.split(b";", 1)[0].strip().lower())
        elif key == b"content-length" and value.isdigit():
            length = int(value)
    return length if types == [b"application/json"] else None


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


def _answer(service: CalibrationService, name: str, scope: Scope, body: bytes) -> bytes | None:
    """The response body, or None when the regular route should decide."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not data.keys() <= {"scores", "version"}:
        return None
    scores = data.get("scores")
    selector = _selector(data.get("version"), scope["query_string"])
    if not isinstance(scores, list) or selector is None:
        return None
    if len(scores) > service.settings.max_batch_rows:
        return None
    loaded = service.cached(name, selector)
    if loaded is None:
        return None
    array = np.asarray(scores)
    expected_ndim = 1 if loaded.n_classes == 2 else 2
    if array.dtype.kind not in "fi" or array.ndim != expected_ndim:
        return None
    if array.ndim == 2 and array.shape[1] != loaded.n_classes:
        return None
    array = array.astype(np.float64, copy=False)
    if not np.isfinite(array).all():
        return None
    probabilities = loaded.calibrator.predict(array)
    record_predictions(loaded.method, len(array))
    return orjson.dumps(
        {"name": name, "version": loaded.version, "probabilities": probabilities},
        option=orjson.OPT_SERIALIZE_NUMPY,
    )


def _selector(in_body: object, query_string: bytes) -> Selector | None:
    """The selector from the body or the query (None when they disagree or look odd)."""
    in_query = None
    if query_string:
        pairs = parse_qsl(query_string.decode("latin-1"))
        if any(key != "version" for key, _ in pairs) or len(pairs) > 1:
            return None
        in_query = pairs[0][1] if pairs else None
    if in_body is not None and (isinstance(in_body, bool) or not isinstance(in_body, int | str)):
        return None
    text = str(in_body) if in_body is not None else in_query
    if in_body is not None and in_query is not None and text != in_query:
        return None
    if text is None:
        return "latest"
    if _DIGITS.match(text):
        number = int(text)
        return number if number >= 1 else None
    return text
