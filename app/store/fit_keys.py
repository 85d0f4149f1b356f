"""Idempotency keys of fits: a claim per (calibrator name, key), the fingerprints of the
request that made it, and the version it created.

A fit sent with ``Idempotency-Key`` first claims its key in a short transaction of its own
(:meth:`FitKeyOperations.claim_fit_key`), so that a second request with the key sees the
claim at once; the fit then writes its version and marks the key done in one transaction
(:meth:`FitKeyOperations.complete_fit_key`), so a key never names a version that was not
stored. The request that claimed a key holds it by a lease it renews while it fits; a claim
whose lease ran out (its process died) may be taken over by the next request with the key.

Two fingerprints: ``fingerprint``, of the payload as received (media type, options, bytes),
known before anything is parsed, and ``content``, of the batch and options as parsed, stored
with the version: a retry that sends the same rows in other bytes (another JSON encoder, CSV
for Arrow) is the same fit. The shape follows the IETF HTTPAPI working group's
Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header): a key, a fingerprint of
the request compared on reuse, and an expiry.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, CursorResult, Executable, delete, select, tuple_, update

from app.store.models import FitKey
from app.store.queries import upsert
from app.store.session import RepositoryBase

KEY_LIFETIME = timedelta(hours=24)
"""How long a key answers with its version; after that it is free for a new fit."""

EXPIRED_PER_CLAIM = 100
"""Expired keys each new key's claim deletes: the table holds about a day of keys without a
task of its own to keep it so."""


class Lease(NamedTuple):
    """Who claims a key, when, and until when the claim holds unless renewed."""

    owner: str
    now: datetime
    until: datetime


@dataclass(frozen=True)
class KeyState:
    """A key as found: the fingerprint of the request that claimed it, who holds it and until
    when, and once its fit was stored, the version and the parsed batch's ``content``
    fingerprint. ``claimed``: this request holds it (new, or taken over from a lease that ran
    out)."""

    fingerprint: str
    owner: str
    lease_until: datetime
    version: int | None
    content: str | None
    claimed: bool = False

    def stale(self, now: datetime) -> bool:
        """Whether it is an unfinished claim whose lease ran out: its holder stopped."""
        return self.version is None and self.lease_until < now


class FitKeyOperations(RepositoryBase):
    """Reading, claiming, renewing, completing and releasing fits' idempotency keys."""

    def read_fit_key(self, name: str, key: str, now: datetime) -> KeyState | None:
        """The key as stored, None when there is none or it expired (a read: what a request
        waiting for another's fit asks, without taking a write lock)."""
        row = self._session.execute(
            select(
                FitKey.fingerprint,
                FitKey.owner,
                FitKey.lease_until,
                FitKey.version,
                FitKey.content,
            ).where(FitKey.name == name, FitKey.key == key, FitKey.created_at >= now - KEY_LIFETIME)
        ).one_or_none()
        return None if row is None else KeyState(*row)

    def claim_fit_key(self, name: str, key: str, fingerprint: str, lease: Lease) -> KeyState:
        """Claim ``key`` of ``name`` for ``lease``'s owner, unless a live claim or a stored
        version holds it: then that state, unclaimed.

        An expired key (older than :data:`KEY_LIFETIME`) is deleted first, so it is claimed
        anew. ``INSERT .. ON CONFLICT DO NOTHING`` makes concurrent claims of one key queue on
        its primary key (PostgreSQL) or on SQLite's write lock: exactly one inserts. A claim
        whose lease ran out without a version is taken over by a compare-and-set on its owner
        and its lapsed lease, so of two requests that find it stale one takes it, and a
        renewal that lands first keeps it for its holder.
        """
        expired = lease.now - KEY_LIFETIME
        mine = (FitKey.name == name, FitKey.key == key)
        self._session.execute(delete(FitKey).where(*mine, FitKey.created_at < expired))
        while True:  # again when the key was released between the insert and the read
            found = self._insert_or_read(name, key, fingerprint, lease)
            if found is not None:
                break
        if found.claimed:
            self._purge_expired(expired)
            return found
        if not found.stale(lease.now):
            return found
        taken = self._changed(
            update(FitKey)
            .where(*_held_by(name, key, found.owner), FitKey.lease_until < lease.now)
            .values(owner=lease.owner, lease_until=lease.until, fingerprint=fingerprint)
            .execution_options(synchronize_session=False)
        )
        if taken:
            return KeyState(fingerprint, lease.owner, lease.until, None, None, claimed=True)
        return found  # renewed, or taken over by another request first: a live claim

    def _insert_or_read(
        self, name: str, key: str, fingerprint: str, lease: Lease
    ) -> KeyState | None:
        """The new claim, or the key as another request left it (None: gone meanwhile)."""
        inserted = self._session.execute(
            upsert(self._session, FitKey)
            .values(
                name=name,
                key=key,
                fingerprint=fingerprint,
                owner=lease.owner,
                lease_until=lease.until,
                version=None,
                content=None,
                created_at=lease.now,
            )
            .on_conflict_do_nothing(index_elements=["name", "key"])
            .returning(FitKey.owner)
        ).first()
        if inserted is not None:  # (RETURNING: psycopg counts no rows of an upsert)
            return KeyState(fingerprint, lease.owner, lease.until, None, None, claimed=True)
        return self.read_fit_key(name, key, lease.now)

    def renew_fit_key(self, name: str, key: str, owner: str, lease_until: datetime) -> bool:
        """Extend ``owner``'s claim; false when it no longer holds the key (a key its own fit
        has marked done is still its: a renewal that comes after the version is no loss)."""
        return bool(
            self._changed(
                update(FitKey)
                .where(FitKey.name == name, FitKey.key == key, FitKey.owner == owner)
                .values(lease_until=lease_until)
                .execution_options(synchronize_session=False)
            )
        )

    def complete_fit_key(self, name: str, key: str, owner: str, version: int, content: str) -> bool:
        """Record ``version`` and the parsed batch's ``content`` fingerprint as the key's
        answer, in the transaction that stored the version; false when ``owner`` lost the
        claim (the caller then rolls the version back)."""
        return bool(
            self._changed(
                update(FitKey)
                .where(*_held_by(name, key, owner))
                .values(version=version, content=content)
                .execution_options(synchronize_session=False)
            )
        )

    def release_fit_key(self, name: str, key: str, owner: str) -> None:
        """Give up ``owner``'s claim (its fit failed or was abandoned): the next request with
        the key fits."""
        self._session.execute(delete(FitKey).where(*_held_by(name, key, owner)))

    def _changed(self, statement: Executable) -> int:
        """How many rows ``statement`` inserted, updated or deleted."""
        result: CursorResult[Any] = self._session.execute(statement)  # type: ignore[assignment]
        return int(result.rowcount)

    def _purge_expired(self, expired: datetime) -> None:
        """Delete up to :data:`EXPIRED_PER_CLAIM` keys created before ``expired``, skipping
        rows another transaction holds (PostgreSQL), so that two claims never wait on each
        other's purge, let alone deadlock."""
        oldest = (
            select(FitKey.name, FitKey.key)
            .where(FitKey.created_at < expired)
            .limit(EXPIRED_PER_CLAIM)
            .with_for_update(skip_locked=True)
        )
        self._session.execute(
            delete(FitKey)
            .where(tuple_(FitKey.name, FitKey.key).in_(oldest))
            .execution_options(synchronize_session=False)
        )


def _held_by(name: str, key: str, owner: str) -> tuple[ColumnElement[bool], ...]:
    """The conditions selecting ``key`` of ``name`` while ``owner`` claims it, unfinished."""
    return (FitKey.name == name, FitKey.key == key, FitKey.owner == owner, FitKey.version.is_(None))
