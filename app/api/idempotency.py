"""``Idempotency-Key`` on fits, over HTTP: the header read, the request's fingerprints, the
wait for another request's fit under the same key, and the claim held while this one fits.

The same key on the same calibrator within a day answers the version its first request made
(200, the version's body and ``Location``, ``Idempotent-Replayed: true``) and fits nothing;
the key with another batch or other options is 422; a request that finds the key's fit under
way waits for it and answers its version, or fits itself when that fit failed or its process
died. A retry is recognised by the payload as received (media type, options and bytes, the
fingerprint the IETF HTTPAPI Idempotency-Key draft suggests), and failing that by the batch
and options as parsed (:func:`content_fingerprint`): the same rows sent in other bytes (CSV
for Arrow, another JSON encoder) are the same fit. The claims themselves:
:mod:`app.service.fit_keys`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable

import orjson
from fastapi import Request
from fastapi.concurrency import run_in_threadpool

from app.api.bodies.contracts import FitOptions
from app.api.bodies.labelled import BatchSource
from app.api.bodies.media import FitArgs
from app.api.deps import client_gone
from app.api.places import invalid
from app.errors import ClientGone, Conflict, FitUnderWay, NotFound
from app.service.batches import Batch
from app.service.fit_keys import Claim
from app.service.use_cases import CalibrationService
from app.service.views import VersionView

logger = logging.getLogger("app.api")

HEADER = "Idempotency-Key"
KEY = re.compile(r"[\x20-\x7e]{1,128}")
"""1 to 128 printable ASCII characters (CLIENT.md)."""

FIRST_POLL_SECONDS = 0.02
LAST_POLL_SECONDS = 0.5
"""A request waiting for another's fit reads the key again after 20 ms, then twice as long
each time, up to half a second."""

REUSED = (
    "was sent before with another batch or other options: a key names one fit; use a new key "
    "for a new fit"
)


def idempotency_key(request: Request) -> str | None:
    """The request's key, None without one; 422 for a value out of the contract (read
    before the body, which a bad key makes pointless to upload)."""
    values = request.headers.getlist(HEADER)
    if not values:
        return None
    if len(values) > 1:
        raise invalid(("header", HEADER), "was sent more than once; send one key")
    value = values[0]
    if not KEY.fullmatch(value):
        raise invalid(("header", HEADER), "must be 1 to 128 printable ASCII characters")
    return value


async def fingerprint(source: BatchSource) -> str:
    """The sha256 of what the request sent: media type, options and bytes (hashed off the
    event loop: hashlib lets go of the GIL on large inputs)."""
    head = orjson.dumps([source.kind, source.options], option=orjson.OPT_SORT_KEYS)
    return await run_in_threadpool(lambda: hashlib.sha256(head + b"\0" + source.data).hexdigest())


def content_fingerprint(args: FitArgs) -> str:
    """The sha256 of a fit's batch and options as parsed: its arrays' float64 and int64 bytes
    and shapes (or the traffic range it names) and its options, whatever media type, field
    order, number spelling or place (body, query, form) they came in."""
    options = args.options.model_dump(mode="json", include=set(FitOptions.model_fields))
    digest = hashlib.sha256(orjson.dumps(options, option=orjson.OPT_SORT_KEYS))
    batch = args.batch
    if isinstance(batch, Batch):
        for array in (batch.scores, batch.labels, batch.weights):
            digest.update(repr(array.shape).encode())
            digest.update(array.tobytes())
    else:
        digest.update(orjson.dumps(batch.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS))
    return digest.hexdigest()


async def settle(
    request: Request,
    service: CalibrationService,
    name: str,
    key: str,
    payload: str,
    content: Callable[[], Awaitable[str]],
) -> Claim | int:
    """The claim when this request is to fit, or the version the key's fit stored.

    While another request holds the key, read it again with a growing pause, for as long as
    that fit may run (its time budget, and a lease past it); 503 with ``Retry-After`` past
    that, and nothing more to do once the client left. A stored key whose payload differs
    from this one's is this request's only if its parsed batch is the same (``content``,
    computed once when needed)."""
    loop = asyncio.get_running_loop()
    deadline = (
        loop.time() + service.settings.fit_timeout_seconds + service.settings.fit_key_lease_seconds
    )
    pause = FIRST_POLL_SECONDS
    gone = asyncio.ensure_future(client_gone(request))
    try:
        while True:
            state = await run_in_threadpool(service.fit_keys.look, name, key)
            if state is None or service.fit_keys.stale(state):
                found, claim = await run_in_threadpool(service.fit_keys.claim, name, key, payload)
                if claim is not None:
                    return claim
                state = found
            if state.version is not None:
                if state.fingerprint != payload and state.content != await content():
                    raise invalid(("header", HEADER), REUSED)
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
    """Renew ``claim`` while the block fits; give it up when the block fails or is cancelled
    (the fit stores the key's version itself, in its transaction)."""
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
        with contextlib.suppress(asyncio.CancelledError):
            await renewing


async def _renew(service: CalibrationService, claim: Claim) -> None:
    """Every fifth of a lease until cancelled, or until the claim is found lost (the
    fit then ends in a 503 that a retry answers with the other request's version)."""
    while True:
        await asyncio.sleep(service.fit_keys.renew_seconds)
        try:
            if not await run_in_threadpool(service.fit_keys.renew, claim):
                logger.warning("lost the claim of fit key %r of %s", claim.key, claim.name)
                return
        except Exception:  # a renewal that failed is tried again; the lease outlasts a few
            logger.exception("could not renew the claim of fit key %r of %s", claim.key, claim.name)
