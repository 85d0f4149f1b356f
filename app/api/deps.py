"""Dependencies shared by the routers: the service, path parameters, bodies and responses."""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from typing import Annotated, Any, Concatenate, ParamSpec, TypeVar

import orjson
from fastapi import Depends, Path, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, BeforeValidator
from pydantic_core import PydanticCustomError
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from app.api.bodies.json_process import IN_PROCESS_BYTES
from app.api.bodies.payloads import JSON_TYPES, byte_count, parse_json_object, require_media_type
from app.api.bodies.validation import validated
from app.api.documents import NAME_PATTERN, Document
from app.api.places import invalid
from app.api.problems import ANSWERED
from app.errors import ClientGone, NotFound, PayloadTooLarge, RequestTimeout
from app.service.inflight import Gone
from app.service.memo import Memo
from app.service.use_cases import CalibrationService
from app.store import Selector

# openapi_examples fill /docs' "Try it out" fields (Swagger UI ignores the schema's examples).
NameParam = Annotated[
    str,
    Path(
        pattern=NAME_PATTERN,
        description="Calibrator name.",
        examples=["churn"],
        openapi_examples={"churn": {"value": "churn"}},
    ),
]
SelectorParam = Annotated[
    str,
    Path(
        pattern=NAME_PATTERN,
        description="A version number, `latest`, or an alias.",
        examples=["latest", "3"],
        openapi_examples={"latest": {"value": "latest"}, "a number": {"value": "3"}},
    ),
]

AliasParam = Annotated[
    str, Path(pattern=NAME_PATTERN, description="Alias name.", examples=["production"])
]


def query_flag(value: object) -> object:
    """A boolean query parameter as the contract writes it: ``true`` or ``false`` (in any case,
    as ``requests`` sends ``True``), or ``1`` or ``0``; pydantic's ``yes``, ``on``, ``t``...
    are 422 (``?force=yes`` must not delete what an alias points to)."""
    if not isinstance(value, str):
        return value
    text = value.lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise PydanticCustomError(
        "bool_parsing",
        "must be true or false (or 1 or 0), not {given}",
        {"given": repr(value[:32])},
    )


Flag = Annotated[bool, BeforeValidator(query_flag)]
"""A boolean query parameter (:func:`query_flag`)."""

P = ParamSpec("P")
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

_DIGITS = re.compile(r"^[0-9]+$")
_ALIAS = re.compile(NAME_PATTERN)


def get_service(request: Request) -> CalibrationService:
    """The service the application's lifespan built."""
    service: CalibrationService = request.app.state.service
    return service


ServiceDep = Annotated[CalibrationService, Depends(get_service)]


MAX_VERSION = 2**31 - 1
"""The largest version number the store's columns hold: any larger one cannot exist."""


def existing_version_number(name: str, number: int) -> int:
    """``number``, or 404 when no version can have it (before the database sees it)."""
    if number < 1 or number > MAX_VERSION:
        raise NotFound(f"calibrator {name!r} has no version {number}")
    return number


def parse_selector(name: str, selector: str) -> Selector:
    """``"7"`` → 7; ``"latest"`` and alias names stay strings (resolved by the store)."""
    if _DIGITS.match(selector):
        if len(selector.lstrip("0")) > 18:  # and int() refuses past 4300 digits
            raise NotFound(f"calibrator {name!r} has no version {selector[:24]}...")
        return existing_version_number(name, int(selector))
    if not _ALIAS.fullmatch(selector):  # e.g. from a body: no alias can have this name
        shown = selector if len(selector) <= 130 else f"{selector[:128]}…"
        raise NotFound(f"alias {shown!r} of {name!r} not found")
    return selector


def check_alias_name(alias: str) -> None:
    """Alias names follow the calibrator-name pattern but are neither digits nor ``latest``."""
    if _DIGITS.match(alias) or alias == "latest":
        raise invalid(
            ("path", "alias"),
            f"is {alias!r}; an alias may not be all digits nor 'latest' (those are selectors)",
        )


PARSED_BODY = "parsed_body"
"""The request-state key of a body the hot path (:mod:`app.api.fast_predict`) parsed before it
handed the request on (a version not in memory): the route answers from it, not parsing twice."""

SMALL_BODY_BYTES = 1024 * 1024
"""The limit of bodies parsed on the event loop (aliases, PATCH): a few fields, never a batch."""


JOIN_ON_LOOP_BYTES = 2**20
"""A body up to this size is joined from its pieces on the event loop; a larger one in a
thread (:func:`read_body`)."""


async def read_body(request: Request, limit: int | None = None) -> bytes:
    """The request body, refused with 413 as soon as it passes ``limit`` (default:
    ``max_body_bytes``)."""
    if limit is None:
        limit = request.app.state.settings.max_body_bytes
    declared = byte_count(request.headers.get("content-length"))
    if declared is not None and declared > limit:
        raise PayloadTooLarge(f"the body has {declared} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"the body exceeds the limit of {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:  # not a server error: logged and counted as 499 (or 408)
        answered = getattr(request.state, ANSWERED, None)  # the server answered, then left
        if answered is not None:
            error = RequestTimeout if answered == RequestTimeout.status else PayloadTooLarge
            raise error(f"answered {answered} by the server after {size} bytes") from None
        raise ClientGone(f"the client disconnected after sending {size} bytes") from None
    # A join of 64 MiB takes ~70 ms (a fresh mapping, faulted in page by page): in a thread,
    # where CPython lets the GIL go over a copy of a MiB or more, not on the event loop.
    body = (
        b"".join(chunks)
        if size <= JOIN_ON_LOOP_BYTES
        else await run_in_threadpool(b"".join, chunks)
    )
    request._body = body  # so that request.form() can parse what was read
    request.state.body_bytes = len(body)  # what a job of this request holds (its admission)
    return body


async def read_job_body(request: Request) -> bytes:
    """The body of a request whose work is a job (:func:`off_loop`, :func:`in_worker`): 503
    before it is read when the pool could not admit a body of its declared size, rather
    than read up to 64 MiB for nothing."""
    declared = byte_count(request.headers.get("content-length"))
    get_service(request).work.refuse_when_full(declared)
    return await read_body(request)


async def off_loop(
    request: Request, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs
) -> T:
    """``function`` run as a job of the service's bounded pool (:mod:`app.service.work`) in
    one of its threads: admitted (503 when the pool is full), off the event loop, within its
    time budget, abandoned when the client disconnects. Read the body first
    (:func:`read_job_body`): a slow upload never holds a place meant for work."""
    work = get_service(request).work
    with work.admit(_held(request)):
        return await work.supervise(lambda: client_gone(request), function, *args, **kwargs)


async def in_worker(
    request: Request,
    function: Callable[Concatenate[CalibrationService, P], T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """``function(service, *args, **kwargs)`` as a heavy job of the service's pool: in a
    worker process, with the worker's own service (:mod:`app.service.workers`), admitted for
    the body the request holds. ``function`` is a module-level function and its arguments
    picklable; it sees no state of this process but the database (a route that changes what
    this process caches says so after the job)."""
    service = get_service(request)
    body_bytes = _held(request)
    return await service.work.run_job(
        lambda: client_gone(request), service, function, body_bytes, *args, **kwargs
    )


async def shared_in_worker(
    request: Request,
    memo: Memo[T],
    key: Hashable,
    function: Callable[Concatenate[CalibrationService, P], T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """The answer ``memo`` keeps under ``key`` (a result that never changes, named by a
    version's number, without a body), else :func:`in_worker`'s, kept there before any
    request that waits for it is answered. Requests for the same ``key`` while its job runs
    share that job (:class:`~app.service.inflight.InFlight`; keys of different memos differ)."""
    service = get_service(request)
    kept = memo.get(key)
    if kept is not None:  # nothing is awaited from here until the job is joined or started
        return kept

    async def job(gone: Gone) -> T:
        answer = await service.work.run_job(gone, service, function, 0, *args, **kwargs)
        memo.put(key, answer)
        return answer

    return await service.work.in_flight.run(key, lambda: client_gone(request), job)


def _held(request: Request) -> int:
    """The bytes of the body :func:`read_body` read for ``request`` (0 before, or without)."""
    held: int = getattr(request.state, "body_bytes", 0)
    return held


async def client_gone(request: Request) -> None:
    """Return once the client disconnects (read the body first: other ASGI messages, a body's
    rest among them, are passed over)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def read_small_json(request: Request, contract: type[M]) -> M:
    """A small JSON body (an alias, a patch) read and validated by its ``contract``."""
    require_media_type(request.headers.get("content-type"), JSON_TYPES)
    body = await read_body(
        request, min(SMALL_BODY_BYTES, get_service(request).settings.max_body_bytes)
    )
    return validated(contract, parse_json_object(body))


async def answer_by_size(
    request: Request, answer: Callable[[bytes], T], *, inflates: bool = False
) -> T:
    """``answer(body)``: in the threadpool for a body declared under
    :data:`~app.api.bodies.json_process.IN_PROCESS_BYTES` (a few ms of work, which a model server's
    every request must not queue behind fits for), else as a job of the bounded pool
    (:func:`off_loop`: up to millions of rows, CPU-heavy work like any other). A body that
    ``inflates`` (compressed) is a job whatever its size: a small one may inflate to the limit."""
    declared = byte_count(request.headers.get("content-length"))
    if not inflates and declared is not None and declared < IN_PROCESS_BYTES:
        return await run_in_threadpool(answer, await read_body(request))
    return await off_loop(request, answer, await read_job_body(request))


def json_response(
    content: Any, status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """orjson with numpy arrays and UTC datetimes written as ``...Z``; a
    :class:`~app.api.documents.Document` as its content."""
    if isinstance(content, Document):
        content = content.content()
    return Response(
        orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_UTC_Z),
        status_code=status_code,
        media_type="application/json",
        headers=headers,
    )
