"""The web view's sessions: a read key entered once, kept as a signed cookie.

Pure logic, no HTTP framework (like :mod:`app.auth`); :mod:`app.api.security` applies
:func:`decide_ui` to every ``/ui`` request before routing, the one place that decides.

The cookie holds ``name:issued:mac``: the key's name, when the session began, and
HMAC-SHA256 over both and the key's configured SHA-256, under a secret of the server's. It
never holds the key nor its hash, so a copied cookie reveals nothing that opens the API; it
stops working after :data:`SESSION_SECONDS`, when its key is removed from or changed in
``CALIBRATION_API_KEYS``, and when the secret changes.

The secret (:func:`session_secret`) is ``CALIBRATION_UI_SECRET``, which every replica and
worker shares so that a cookie one signed is valid on all. Without it, a random secret of
the process serves a single worker on a loopback address (``make run``); anywhere else the
sign-in is refused, rather than sessions that fail on every other worker.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from app.auth import ApiKey, is_loopback
from app.settings import Settings

COOKIE_NAME = "calibration_ui"
COOKIE_PATH = "/ui"
SESSION_SECONDS = 8 * 3600
"""How long a session lasts after its key was entered (the cookie's Max-Age)."""
CLOCK_SKEW_SECONDS = 60
"""How far in the future a session may begin (replicas' clocks differ a little)."""

KEY_FORM = "/ui/key"
SIGN_OUT = "/ui/logout"
STATIC_PREFIX = "/ui/static/"
_CONTEXT = b"calibration-ui-session\x00"


def is_ui_path(path: str) -> bool:
    """Whether ``path`` belongs to the web view (``/ui`` and below)."""
    return path == "/ui" or path.startswith("/ui/")


def session_secret(settings: Settings) -> bytes | None:
    """The secret that signs sessions: ``CALIBRATION_UI_SECRET``; without it a random one of
    this process when it serves alone on a loopback address; else None (no sign-in)."""
    if settings.ui_secret is not None:
        return settings.ui_secret.get_secret_value().encode()
    if is_loopback(settings.host) and settings.workers == 1:
        return secrets.token_bytes(32)
    return None


class Sessions:
    """Issue and check session tokens for ``keys`` under one ``secret``."""

    def __init__(self, keys: tuple[ApiKey, ...], secret: bytes | None) -> None:
        self.keys = {key.name: key for key in keys}
        self.secret = secret

    @property
    def can_sign_in(self) -> bool:
        """Whether sessions can be issued (a secret every worker shares, or one worker)."""
        return self.secret is not None

    def issue(self, key: ApiKey, now: float | None = None) -> str:
        """A token for ``key`` beginning ``now`` (seconds since the epoch)."""
        if self.secret is None:
            raise RuntimeError("no session secret: set CALIBRATION_UI_SECRET")
        issued = int(time.time() if now is None else now)
        return f"{key.name}:{issued}:{self._mac(key, issued)}"

    def verify(self, token: str, now: float | None = None) -> ApiKey | None:
        """The key a valid, unexpired token was issued for, else None."""
        if self.secret is None:
            return None
        name, _, rest = token.partition(":")
        issued_text, _, mac = rest.partition(":")
        key = self.keys.get(name)
        if key is None or not issued_text.isdigit() or len(issued_text) > 12:
            return None
        issued = int(issued_text)
        moment = time.time() if now is None else now
        if not -CLOCK_SKEW_SECONDS <= moment - issued <= SESSION_SECONDS:
            return None
        if not hmac.compare_digest(mac.encode(), self._mac(key, issued).encode()):
            return None
        return key

    def _mac(self, key: ApiKey, issued: int) -> str:
        assert self.secret is not None
        message = _CONTEXT + f"{key.name}\x00{issued}\x00".encode() + key.digest
        digest = hmac.new(self.secret, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


UiVerdict = Literal["open", "granted", "sign-in"]


@dataclass(frozen=True)
class UiDecision:
    """What to do with one ``/ui`` request: serve it (``open``: no key needed, ``granted``:
    a valid session of ``key``) or send the browser to the key form."""

    verdict: UiVerdict
    key: ApiKey | None = None


def decide_ui(sessions: Sessions, path: str, cookie_header: str | None) -> UiDecision:
    """Check one request to the web view (with keys configured): the key form, sign-out and
    the stylesheet are open; every other page needs a valid session cookie."""
    if path in (KEY_FORM, SIGN_OUT) or path.startswith(STATIC_PREFIX):
        return UiDecision("open")
    token = cookie_value(cookie_header, COOKIE_NAME)
    key = None if token is None else sessions.verify(token)
    return UiDecision("sign-in") if key is None else UiDecision("granted", key)


def cookie_value(header: str | None, name: str) -> str | None:
    """The value of cookie ``name`` in a ``Cookie`` header (the first one), or None."""
    for part in (header or "").split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value.strip().strip('"')
    return None


def safe_next(target: str | None) -> str:
    """Where to go after signing in: ``target`` when it is a path of the web view on this
    server (``/ui`` or below, with its query), else ``/ui``; never another site."""
    if (
        not target
        or len(target) > 2000
        or any(c in target for c in "\\\r\n\t ")
        or (any(ord(c) < 0x20 or ord(c) == 0x7F for c in target))
    ):
        return "/ui"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not is_ui_path(parts.path) or target.startswith("//"):
        return "/ui"
    if parts.path in (KEY_FORM, SIGN_OUT) or ".." in unquote(parts.path):
        return "/ui"
    return target
