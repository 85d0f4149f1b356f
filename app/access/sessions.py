"""The web view's sessions: a read key entered once, kept as a signed cookie.

Pure logic, no HTTP framework (like :mod:`app.access.api_keys`): :mod:`app.api.security` reads the
cookie and applies :func:`decide_ui` to every ``/ui`` request before routing, the one place
that decides; :mod:`app.ui.signin` issues and clears the cookie.

The cookie holds ``name:issued:mac``: the key's name, when the session began, and
HMAC-SHA256 over both and the key's configured SHA-256, under a secret of the server's. It
never holds the key nor its hash, so a copied cookie reveals nothing that opens the API.

A session is stateless: it stops working after :data:`SESSION_SECONDS`, when its key is
removed from or changed in ``CALIBRATION_API_KEYS``, and when the secret changes, and at
no other moment. Signing out deletes the cookie from the browser that signed out; a copy
of it stays valid elsewhere until one of those happens (revoking one session across
replicas would need state every replica shares).

Which secret signs is :attr:`app.settings.Settings.ui_sign_in`'s decision
(:func:`session_secret` applies it).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from app.access.api_keys import ApiKey
from app.settings import Settings

COOKIE_NAME = "calibration_ui"
SESSION_SECONDS = 8 * 3600
"""How long a session lasts after its key was entered (the cookie's Max-Age)."""
CLOCK_SKEW_SECONDS = 60
"""How far in the future a session may begin (replicas' clocks differ a little)."""

UI_ROOT = "/ui"
KEY_FORM = "/ui/key"
SIGN_OUT = "/ui/logout"
STATIC_PREFIX = "/ui/static/"
_ISSUED = re.compile(r"[1-9][0-9]{0,11}")
"""A token's issue time: whole seconds, as the service writes them."""
_CONTEXT = b"calibration-ui-session\x00"


def is_ui_path(path: str) -> bool:
    """Whether ``path`` (below the proxy prefix) belongs to the web view (``/ui`` and below)."""
    return path == UI_ROOT or path.startswith(UI_ROOT + "/")


def cookie_path(root_path: str) -> str:
    """The cookie's ``Path``: the web view below the proxy prefix ``root_path``, if any."""
    return root_path.rstrip("/") + UI_ROOT


def session_secret(settings: Settings) -> bytes | None:
    """The secret that signs sessions, as :attr:`Settings.ui_sign_in` decided: the shared
    ``CALIBRATION_UI_SECRET``, a random one of this process, or None (no sign-in)."""
    if settings.ui_sign_in == "shared-secret":
        assert settings.ui_secret is not None
        return settings.ui_secret.get_secret_value().encode()
    if settings.ui_sign_in == "process-secret":
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
        # one spelling of each time (no sign, no leading zero; "²" is no digit to int)
        if key is None or not _ISSUED.fullmatch(issued_text):
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


def decide_ui(sessions: Sessions, path: str, token: str | None) -> UiDecision:
    """Check one request to the web view (with keys configured) for ``path`` below the proxy
    prefix, with the session cookie's value ``token``: the key form, sign-out and the
    stylesheet are open; every other page needs a valid session."""
    if path in (KEY_FORM, SIGN_OUT) or path.startswith(STATIC_PREFIX):
        return UiDecision("open")
    key = None if token is None else sessions.verify(token)
    return UiDecision("sign-in") if key is None else UiDecision("granted", key)


def safe_next(target: str | None) -> str:
    """Where to go after signing in: ``target`` when it is a path of the web view on this
    server (``/ui`` or below, with its query, below the proxy prefix), else ``/ui``; never
    another site."""
    if (
        not target
        or len(target) > 2000
        or any(c in target for c in "\\\r\n\t ")
        or (any(ord(c) < 0x20 or ord(c) == 0x7F for c in target))
    ):
        return UI_ROOT
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not is_ui_path(parts.path) or target.startswith("//"):
        return UI_ROOT
    if parts.path in (KEY_FORM, SIGN_OUT) or ".." in unquote(parts.path):
        return UI_ROOT
    return target
