""":class:`app.api.shutdown.AnswerCancelled` driven with plain asyncio: a request of a stopping
server cancelled before its answer gets a 503 ``shutting-down``; any other cancellation goes on.
(``tests/server/test_deployment.py`` checks it over a real stop.)"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from starlette.types import Message, Receive, Scope, Send

from app.api.shutdown import STOPPING, AnswerCancelled


def _scope(*, stopping: bool) -> Scope:
    state = {STOPPING: True} if stopping else {}
    return {
        "type": "http",
        "method": "POST",
        "path": "/v1/calibrators/c/fit",
        "headers": [],
        "query_string": b"",
        "root_path": "",
        "state": state,
    }


async def _served(scope: Scope, *, start_first: bool) -> tuple[list[Message], asyncio.Task[Any]]:
    """Run a request whose application waits forever (after starting its answer, if
    ``start_first``), cancel it as uvicorn does at the end of a grace period; what was sent,
    and the finished task."""
    sent: list[Message] = []
    waiting = asyncio.Event()

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        if start_first:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        waiting.set()
        await asyncio.Event().wait()

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    task = asyncio.create_task(AnswerCancelled(application)(scope, receive, send))
    await waiting.wait()
    task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
    await asyncio.wait([task])
    return sent, task


def test_a_stopping_servers_request_is_answered_503_and_ends_uncancelled() -> None:
    sent, task = asyncio.run(_served(_scope(stopping=True), start_first=False))
    assert not task.cancelled()
    assert task.exception() is None
    assert task.cancelling() == 0
    start, body = sent
    assert start["status"] == 503
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"application/problem+json"
    assert headers[b"retry-after"] == b"1"
    problem = orjson.loads(body["body"])
    assert problem["type"] == "/problems/shutting-down"
    assert problem["status"] == 503


@pytest.mark.parametrize(
    ("stopping", "start_first"),
    [(False, False), (True, True)],
    ids=["not-a-stop", "answer-begun"],
)
def test_any_other_cancellation_goes_on(stopping: bool, start_first: bool) -> None:
    """Not a stop's request, or one whose answer has begun: cancelled as it came, nothing
    added to what the application sent."""
    sent, task = asyncio.run(_served(_scope(stopping=stopping), start_first=start_first))
    assert task.cancelled()
    assert [m["type"] for m in sent] == (["http.response.start"] if start_first else [])
