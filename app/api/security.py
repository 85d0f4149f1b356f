"""API-key authentication for every request, before routing (see :mod:`app.access.api_keys`).

:class:`ApiKeyAuth` is a plain ASGI middleware placed outside the predict hot path and the
router, so one check covers every ``/v1`` route, unknown routes (401 before any 404) and the
hot path alike. A refused request is answered here as problem+json with ``WWW-Authenticate``
(RFC 6750); an accepted one carries the key's name in ``scope["state"]["api_key"]`` (``None``
when the service runs open), which the hot path also takes as proof the check ran, and its
scope in ``scope["state"]["api_scope"]`` (:data:`KEY_SCOPE`), which predict and infer check
once their body says whether they log (:func:`may_log_predictions`).

The web view (``/ui``) is decided here too, by its session cookie instead of a Bearer header
(:func:`app.access.sessions.decide_ui`): a page without a valid session is redirected (303) to the
key form. The cookie is read for ``/ui`` paths only, so it never opens an API route.

Behind a proxy that strips a prefix (``scope["root_path"]``), paths are decided below it, as
Starlette routes them, and the redirect to the key form carries it.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI
from starlette.requests import cookie_parser
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.access.api_keys import (
    LOGGING_NEEDS,
    ApiKey,
    Decision,
    decide,
    may_log,
    required_scope,
)
from app.access.sessions import (
    COOKIE_NAME,
    KEY_FORM,
    Sessions,
    decide_ui,
    is_ui_path,
    session_secret,
)
from app.api.mounting import route_path
from app.api.problems import error_response
from app.errors import Forbidden, ServiceError, Unauthorized
from app.settings import Settings

logger = logging.getLogger("app.auth")

REALM = 'Bearer realm="calibration"'
SCHEME_NAME = "bearer"
KEY_SCOPE = "api_scope"
"""The request-state key of the accepted key's scope (None: open, or no key needed)."""


class ApiKeyAuth:
    """Refuse requests without a key of the scope their route needs; with no keys, run open."""

    def __init__(
        self, app: ASGIApp, keys: tuple[ApiKey, ...], sessions: Sessions | None = None
    ) -> None:
        self.app = app
        self.keys = keys
        self.sessions = sessions or Sessions(keys, None)  # None: the web view cannot sign in

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if not self.keys:
            _let_through(scope, None)
            await self.app(scope, receive, send)
            return
        path = route_path(scope)
        if is_ui_path(path):
            await self._web_view(scope, receive, send)
            return
        authorization = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value
                break
        method = scope.get("method", "GET")  # a websocket handshake is a GET
        decision = decide(self.keys, method, path, authorization)
        if decision.verdict in ("open", "granted"):
            _let_through(scope, decision.key)
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websocket routes exist; refuse the handshake
            await send({"type": "websocket.close", "code": 1008})
            return
        error, challenge = refusal(decision)
        response = error_response(
            path,
            error.status,
            error.detail,
            slug=error.slug,
            title=error.title,
            headers={"WWW-Authenticate": challenge},
            root_path=scope.get("root_path", ""),
        )
        await response(scope, receive, send)

    async def _web_view(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a ``/ui`` request with a valid session (or an open one), else send the
        browser to the key form with the page it asked for."""
        cookies = "; ".join(
            value.decode("latin-1") for name, value in scope["headers"] if name == b"cookie"
        )
        path = route_path(scope)
        decision = decide_ui(self.sessions, path, cookie_parser(cookies).get(COOKIE_NAME))
        if decision.verdict != "sign-in":
            _let_through(scope, decision.key)
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        query = scope.get("query_string", b"").decode("latin-1")
        asked = path + (f"?{query}" if query else "")
        root = scope.get("root_path", "").rstrip("/")
        target = f"{root}{KEY_FORM}?next={quote(asked, safe='')}"
        await RedirectResponse(target, status_code=303)(scope, receive, send)


def _let_through(scope: Scope, key: ApiKey | None) -> None:
    """Record who was let through (None: no key needed) in the request's state."""
    state = scope.setdefault("state", {})
    state["api_key"] = key.name if key else None
    state[KEY_SCOPE] = key.scope if key else None


def may_log_predictions(scope: Scope, ids: list[str] | None) -> None:
    """403 when a request that would log predictions under ``ids`` came with a key whose scope
    does not allow it (a read key); nothing is recorded then."""
    state = scope.get("state", {})
    if ids is not None and not may_log(state.get(KEY_SCOPE)):
        raise Forbidden(f"the API key {state.get('api_key')!r} may only read; {LOGGING_NEEDS}")


def refusal(decision: Decision) -> tuple[ServiceError, str]:
    """The error and the ``WWW-Authenticate`` challenge for a refused request."""
    if decision.verdict == "missing":
        detail = "this route needs an API key: send Authorization: Bearer <key>"
        return Unauthorized(detail), REALM
    if decision.verdict == "invalid":
        return Unauthorized("the API key is not valid"), f'{REALM}, error="invalid_token"'
    name, scope = (decision.key.name, decision.key.scope) if decision.key else ("?", "?")
    detail = f"the API key {name!r} has scope {scope}; this route needs a {decision.needed} key"
    return Forbidden(detail), f'{REALM}, error="insufficient_scope", scope="{decision.needed}"'


def install_authentication(app: FastAPI, settings: Settings) -> None:
    """Add :class:`ApiKeyAuth` (call it after the hot path's middleware, so it runs first)."""
    keys = settings.api_keys
    if settings.auth == "disabled":
        logger.warning("CALIBRATION_AUTH=disabled: every route is open to anyone who can connect")
        keys = ()
    elif not keys:
        logger.info("no CALIBRATION_API_KEYS: serving without authentication on %s", settings.host)
    sessions = Sessions(keys, session_secret(settings))
    if keys and settings.ui_sign_in == "off":
        logger.warning(
            "CALIBRATION_UI_SECRET is not set: the web view (/ui) cannot sign in (%d workers "
            "on %s need one secret they share); the API is unaffected. Set it to 32+ random "
            "characters, the same on every replica",
            settings.workers,
            settings.host,
        )
    app.state.ui_sessions = sessions
    app.add_middleware(ApiKeyAuth, keys=keys, sessions=sessions)
    if keys:  # open, no operation needs a key: /docs would show them all locked
        document_bearer_scheme(app)


def document_bearer_scheme(app: FastAPI) -> None:
    """Declare the bearer scheme in the OpenAPI description (/docs' Authorize button) on every
    operation that needs a key (:func:`app.access.api_keys.required_scope`): /docs shows them locked
    and sends the key given to Authorize with them."""

    describe = app.openapi

    def openapi() -> dict[str, Any]:
        """FastAPI's OpenAPI description with the bearer scheme on keyed operations
        (built once, then cached in ``app.openapi_schema`` as FastAPI does)."""
        if app.openapi_schema is None:
            spec = describe()  # FastAPI's own, which it caches in app.openapi_schema
            schemes = spec.setdefault("components", {}).setdefault("securitySchemes", {})
            schemes[SCHEME_NAME] = {
                "type": "http",
                "scheme": "bearer",
                "description": "An API key (`python -m app.keys`), of scope read, log "
                "(also predictions logged under ids) or write.",
            }
            for path, operations in spec.get("paths", {}).items():
                for method, operation in operations.items():
                    if required_scope(method.upper(), path) is not None:
                        operation["security"] = [{SCHEME_NAME: []}]
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
