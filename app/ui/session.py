"""Moved to :mod:`app.sessions` (pure logic beside :mod:`app.auth`, so that
:mod:`app.api.security` need not import the web view). These names remain for the web
view's own imports until they import :mod:`app.sessions` directly; add nothing here.
"""

from __future__ import annotations

from app.sessions import (
    COOKIE_NAME,
    KEY_FORM,
    SESSION_SECONDS,
    SIGN_OUT,
    STATIC_PREFIX,
    Sessions,
    UiDecision,
    decide_ui,
    is_ui_path,
    safe_next,
    session_secret,
)

__all__ = [
    "COOKIE_NAME",
    "KEY_FORM",
    "SESSION_SECONDS",
    "SIGN_OUT",
    "STATIC_PREFIX",
    "Sessions",
    "UiDecision",
    "decide_ui",
    "is_ui_path",
    "safe_next",
    "session_secret",
]
