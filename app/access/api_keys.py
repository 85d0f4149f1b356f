"""API keys: parsing ``CALIBRATION_API_KEYS``, checking a presented key, deciding a route's scope.

Pure logic, no HTTP framework: :mod:`app.api.security` applies it to requests.

- An entry is ``name:scope:sha256hex``; the server stores only the SHA-256 of each key, so the
  configuration (and a leaked copy of it) never holds a usable key. Scopes are ordered
  ``read`` < ``log`` < ``write``: ``write`` implies ``log``, which implies ``read``.
- ``log`` is a model server's scope: reading, and predictions sent with ids, which are
  recorded in the traffic log (the first record of an id wins, so logging is a write). A
  route's scope cannot tell (the ids are in the body): :func:`may_log` decides after parsing.
- A presented key is hashed and compared with **every** configured digest by
  :func:`hmac.compare_digest`: the time taken depends on neither how much of a digest matched nor
  which entry matched.
- A route's scope follows from its method and path alone, before routing, so unknown routes are
  refused exactly like known ones (an unauthenticated caller learns nothing about what exists).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Scope = Literal["read", "log", "write"]
SCOPES: tuple[Scope, ...] = ("read", "log", "write")
"""Every scope, each implying those before it."""

LOGGING_NEEDS = "logging predictions (ids) needs a key of scope log or write"

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_HEX_DIGEST = re.compile(r"^[0-9a-fA-F]{64}$")

OPEN_PATHS = frozenset(
    {
        "/healthz",
        "/readyz",
        "/metrics",
        "/docs",
        "/docs/oauth2-redirect",
        "/redoc",
        "/openapi.json",
        "/problems",
        "/v2/health/live",
        "/v2/health/ready",
    }
)
"""Paths anyone may call: probes (the protocol's too), metrics scrapes and the API's own
description."""

OPEN_PREFIXES = ("/problems/", "/static/docs/")
"""Path prefixes anyone may read: the problem types' pages and the assets of /docs and /redoc
(a path with a ``..`` segment is never open: it is not what it seems to be)."""

_READ_METHODS = frozenset({"GET", "HEAD"})
# POSTs that compute on a batch without changing anything stored (predict and infer sent
# with ids log their predictions, which needs log: may_log, once the body is parsed).
_READ_POSTS = re.compile(
    r"^/v1/calibrators/[^/]+/(?:predict|compare|versions/[^/]+/(?:diagnostics|estimate))$"
    r"|^/v2/models/[^/]+(?:/versions/[^/]+)?/infer$"
)


@dataclass(frozen=True)
class ApiKey:
    """One configured key: who holds it, what it may do, and the SHA-256 of the key itself."""

    name: str
    scope: Scope
    digest: bytes

    def allows(self, needed: Scope) -> bool:
        """Whether this key may do what needs ``needed`` (write implies log implies read)."""
        return SCOPES.index(self.scope) >= SCOPES.index(needed)

    def entry(self) -> str:
        """The ``name:scope:sha256hex`` form of ``CALIBRATION_API_KEYS``."""
        return f"{self.name}:{self.scope}:{self.digest.hex()}"


def key_digest(key: str | bytes) -> bytes:
    """The SHA-256 of a key as a client sends it."""
    return hashlib.sha256(key.encode() if isinstance(key, str) else key).digest()


def parse_api_keys(text: str) -> tuple[ApiKey, ...]:
    """Parse comma-separated ``name:scope:sha256hex`` entries (blank entries are skipped).

    Raises ValueError naming the first bad entry by position and name. The rest of an entry is
    never echoed: a raw key pasted by mistake must not end up in a log.
    """
    entries = [part.strip() for part in text.split(",")]
    keys = [parse_entry(entry, number) for number, entry in enumerate(entries, 1) if entry]
    check_unique(keys)
    return tuple(keys)


def parse_entry(entry: str, number: int = 1) -> ApiKey:
    """One ``name:scope:sha256hex`` entry; ``number`` is its position, for the message."""
    parts = entry.split(":")
    where = f"CALIBRATION_API_KEYS entry {number}"
    if len(parts) != 3:
        hint = " (a raw key? list its SHA-256, see `python -m app.keys`)" if len(parts) == 1 else ""
        raise ValueError(f"{where} is not name:scope:sha256hex{hint}")
    name, scope, digest = (part.strip() for part in parts)
    if not NAME_PATTERN.match(name):
        raise ValueError(f"{where}: the name must be 1-64 of A-Z a-z 0-9 . _ - (got {name!r})")
    where = f"{where} ({name!r})"
    known = scope_named(scope)
    if known is None:
        raise ValueError(f"{where}: the scope must be read, log or write (got {scope[:16]!r})")
    if not _HEX_DIGEST.match(digest):
        raise ValueError(f"{where}: the hash must be 64 hexadecimal digits (a SHA-256)")
    return ApiKey(name, known, bytes.fromhex(digest))


def scope_named(text: str) -> Scope | None:
    """The scope called ``text``, or None."""
    return next((scope for scope in SCOPES if scope == text), None)


def may_log(scope: Scope | None) -> bool:
    """Whether a request let through with a key of ``scope`` (None: the service runs open, or
    the route needed no key) may record its predictions in the traffic log."""
    return scope is None or SCOPES.index(scope) >= SCOPES.index("log")


def check_unique(keys: Iterable[ApiKey]) -> None:
    """Refuse two entries with one name (logs could not tell them apart) or one hash."""
    names: set[str] = set()
    digests: set[bytes] = set()
    for key in keys:
        if key.name in names:
            raise ValueError(f"CALIBRATION_API_KEYS names {key.name!r} twice")
        if key.digest in digests:
            raise ValueError(f"CALIBRATION_API_KEYS lists the hash of {key.name!r} twice")
        names.add(key.name)
        digests.add(key.digest)


def match_key(presented: str | bytes, keys: Iterable[ApiKey]) -> ApiKey | None:
    """The configured key whose digest equals the presented key's, or None.

    Every digest is compared, in constant time, whether or not an earlier one matched.
    """
    digest = key_digest(presented)
    found = None
    for key in keys:
        if hmac.compare_digest(digest, key.digest) and found is None:
            found = key
    return found


def required_scope(method: str, path: str) -> Scope | None:
    """The scope a request needs, or None for the open paths (:data:`OPEN_PATHS`,
    :data:`OPEN_PREFIXES`).

    GET and HEAD read; so do the POSTs that only compute (predict, diagnostics on a batch,
    compare, estimate). Everything else — fit, deletes, aliases, PATCH, and any other
    method — writes.
    """
    path = path.rstrip("/") or "/"
    if path in OPEN_PATHS:
        return None
    if path.startswith(OPEN_PREFIXES) and ".." not in path.split("/"):
        return None
    if method in _READ_METHODS or (method == "POST" and _READ_POSTS.match(path)):
        return "read"
    return "write"


def bearer_token(authorization: bytes | None) -> bytes | None:
    """The token of an ``Authorization: Bearer <token>`` header (None without one)."""
    if authorization is None:
        return None
    scheme, _, token = authorization.strip().partition(b" ")
    token = token.strip()
    return token if scheme.lower() == b"bearer" and token else None


Verdict = Literal["open", "granted", "missing", "invalid", "forbidden"]


@dataclass(frozen=True)
class Decision:
    """What to do with one request: let it through (``open``, ``granted``) or refuse it."""

    verdict: Verdict
    key: ApiKey | None = None
    needed: Scope | None = None


def decide(
    keys: tuple[ApiKey, ...], method: str, path: str, authorization: bytes | None
) -> Decision:
    """Check one request against ``keys`` (non-empty: with none, the caller runs open)."""
    needed = required_scope(method, path)
    if needed is None:
        return Decision("open")
    token = bearer_token(authorization)
    if token is None:
        return Decision("missing", needed=needed)
    key = match_key(token, keys)
    if key is None:
        return Decision("invalid", needed=needed)
    return Decision("granted" if key.allows(needed) else "forbidden", key, needed)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
