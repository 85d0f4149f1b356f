"""``Idempotency-Key`` on fits, over HTTP: the header read, the request's fingerprint, the wait
for another request's fit under the same key, and the claim held while this one fits.

The same key on the same calibrator within a day answers the version its first request made
(200, the version's body and ``Location``, ``Idempotent-Replayed: true``) and fits nothing;
the key with another payload is 422; a request that finds the key's fit under way waits for it
and answers its version, or fits itself when that fit failed or its process died. The
fingerprint is the payload as received (its media type, options and bytes), as the IETF
HTTPAPI Idempotency-Key draft suggests: the same batch sent again byte for byte matches.
The claims themselves: :mod:`app.service.fit_keys`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections.abc import AsyncIterator

import orjson
from fastapi import Request
from fastapi.concurrency import run_in_threadpool

from app.api.bodies.labelled import BatchSource
from app.api.deps import client_gone
from app.api.places import invalid
from app.errors import ClientGone, Conflict, FitUnderWay, NotFound
from app.service.fit_keys import LEASE, RENEW_SECONDS, Claim
from app.service.use_cases import CalibrationService
from app.service.views import VersionView

HEADER = "Idempotency-Key"
KEY = re.compile(r"[\x20-\x7e]{1,128}")
"""1 to 128 printable ASCII characters (CLIENT.md)."""

FIRST_POLL_SECONDS = 0.02
LAST_POLL_SECONDS = 0.5
"""A request waiting for another's fit asks again after 20 ms, then twice as long each time,
up to half a second."""


def idempotency_key(request: Request) -> str | None:
    """The request's key, None without one; 422 for a value out of the contract."""
    value = request.headers.get(HEADER)
    if value is None:
        return None
    if not KEY.fullmatch(value):
        raise invalid(("header", HEADER), "must be 1 to 128 printable ASCII characters")
    return value


async def fingerprint(source: BatchSource) -> str:
    """The sha256 of what the request sent: media type, options and bytes (hashed off the
    event loop: hashlib lets go of the GIL on large inputs)."""
    head = orjson.dumps([source.kind, source.options], option=orjson.OPT_SORT_KEYS)
    return await run_in_threadpool(lambda: hashlib.sha256(head + b"\0" + source.data).hexdigest())


async def settle(
    request: Request, service: CalibrationService, name: str, key: str, payload: str
) -> Claim | int:
    """The claim when this request is to fit, or the version the key's fit stored.

    While another request holds the key, ask again with a growing pause, for as long as that
    fit may run (its time budget, and a lease past it); 503 with ``Retry-After`` past that,
    and nothing more to do once the client left."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + service.settings.fit_timeout_seconds + LEASE.total_seconds()
    pause = FIRST_POLL_SECONDS
    gone = asyncio.ensure_future(client_gone(request))
    try:
        while True:
            state, claim = await run_in_threadpool(service.fit_keys.claim, name, key, payload)
            if state.fingerprint != payload:
                raise invalid(
                    ("header", HEADER),
                    "was sent before with another batch or other options: a key names one "
                    "fit; use a new key for a new fit",
                )
            if claim is not None:
                return claim
            if state.version is not None:
                return state.version
            if loop.time() + pause > deadline:
                raise FitUnderWay(f"a fit under {HEADER} {key!r} is still running")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(gone), pause)
            if gone.done():
                raise ClientGone("the client disconnected while waiting for the key's fit")
            pause = min(2 * pause, LAST_POLL_SECONDS)
    finally:
        gone.cancel()


async def replayed(service: CalibrationService, name: str, key: str, version: int) -> VersionView:
    """The version a key's first request stored (409 when it was deleted since)."""
    try:
        return await run_in_threadpool(service.versions.get, name, version)
    except NotFound:
        raise Conflict(
            f"version {version} of '{name}', made under {HEADER} {key!r}, was deleted; "
            "use a new key to fit again"
        ) from None


@contextlib.asynccontextmanager
async def holding(service: CalibrationService, claim: Claim | None) -> AsyncIterator[None]:
    """Renew ``claim`` while the block fits; give it up when the block fails, is cancelled,
    or stops (the fit stores the key's version itself, in its transaction)."""
    if claim is None:
        yield
        return
    renewing = asyncio.ensure_future(_renew(service, claim))
    try:
        yield
    except BaseException:
        await asyncio.shield(run_in_threadpool(service.fit_keys.release, claim))
        raise
    finally:
        renewing.cancel()


async def _renew(service: CalibrationService, claim: Claim) -> None:
    while True:
        await asyncio.sleep(RENEW_SECONDS)
        await run_in_threadpool(service.fit_keys.renew, claim)
