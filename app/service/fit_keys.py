"""Fits that are safe to retry: the use cases of an ``Idempotency-Key``.

A fit sent with a key claims it (:meth:`FitKeys.claim`) before it fits, holds it by a lease
that :meth:`FitKeys.renew` extends while the fit runs, and marks it with its version in the
transaction that stores the version (:meth:`app.service.versions.Versions.fit` with its
:class:`Claim`), or gives it up when the fit fails (:meth:`FitKeys.release`). A request that
finds the key claimed by another reads it again (:meth:`FitKeys.look`, no write) until that
fit is stored, fails, or its holder stops renewing. The HTTP side (the header, the payload's
fingerprint, the waiting) is :mod:`app.api.idempotency`.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from app.errors import DatabaseUnavailable
from app.store import Database, KeyState, Lease

logger = logging.getLogger("app.service")

RENEWALS_PER_LEASE = 5
"""A fitting request renews its claim five times a lease (``CALIBRATION_FIT_KEY_LEASE_SECONDS``,
10 s: how long a request whose process died holds its key), so a slow or failed renewal does
not lose it."""

LOST_CLAIM = (
    "the fit under Idempotency-Key {key!r} stopped renewing its claim and another request with "
    "the key took it over; nothing was stored: send the request again for that fit's version"
)


@dataclass(frozen=True)
class Claim:
    """A key this request holds, and the fingerprint of its batch as parsed (``content``,
    known once the batch is): what :meth:`~app.service.versions.Versions.fit` marks with the
    version it stores. It crosses into a worker process, so it is plain data."""

    name: str
    key: str
    owner: str
    content: str = ""


def utc_now() -> datetime:
    return datetime.now(UTC)


class FitKeys:
    """Claims of fits' idempotency keys: ``service.fit_keys.<verb>``."""

    def __init__(
        self, database: Database, lease: timedelta, clock: Callable[[], datetime] = utc_now
    ) -> None:
        self.database = database
        self.lease = lease
        self.clock = clock
        """The time leases are taken and judged by (a test's own, to age them)."""

    @property
    def renew_seconds(self) -> float:
        """How often a fitting request renews its claim."""
        return self.lease.total_seconds() / RENEWALS_PER_LEASE

    def look(self, name: str, key: str) -> KeyState | None:
        """The key as stored (None: unused, or expired), read without a write lock."""
        with self.database.transaction() as repo:
            return repo.read_fit_key(name, key, self.clock())

    def claim(self, name: str, key: str, fingerprint: str) -> tuple[KeyState, Claim | None]:
        """The key as found, and the claim when this request is to fit (a new key, or one
        whose holder stopped renewing it)."""
        owner = secrets.token_hex(16)
        now = self.clock()
        with self.database.transaction(write=True) as repo:
            state = repo.claim_fit_key(name, key, fingerprint, Lease(owner, now, now + self.lease))
        return state, Claim(name, key, owner) if state.claimed else None

    def stale(self, state: KeyState) -> bool:
        """Whether ``state`` is a claim whose holder stopped renewing it."""
        return state.stale(self.clock())

    def renew(self, claim: Claim) -> bool:
        """Extend the claim's lease; false when it was lost (or the database is down, which
        the next renewal tries again)."""
        try:
            with self.database.transaction(write=True) as repo:
                return repo.renew_fit_key(
                    claim.name, claim.key, claim.owner, self.clock() + self.lease
                )
        except DatabaseUnavailable:
            logger.warning("could not renew the claim of fit key %r of %s", claim.key, claim.name)
            return True  # not known to be lost: the lease may outlast the outage

    def release(self, claim: Claim) -> None:
        """Give the key up after a failed or abandoned fit, so a retry fits at once; when the
        database is down, the lease runs out instead."""
        try:
            with self.database.transaction(write=True) as repo:
                repo.release_fit_key(claim.name, claim.key, claim.owner)
        except DatabaseUnavailable:
            logger.warning("could not release fit key %r of %s", claim.key, claim.name)
