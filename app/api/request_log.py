"""Every HTTP request counted, timed and logged once, by a pure ASGI middleware.

Installed last, it is the outermost middleware: it sees the predict hot path, answers the
authentication and limit checks give before routing, and unhandled errors (recorded as 500,
which Starlette's outer error middleware then sends). The ``route`` label is the route
*template* (``/v1/calibrators/{name}/predict``), never the raw path, whose calibrator names
would make the label set unbounded: the router leaves the matched route in ``scope["route"]``;
for a request answered without routing, the path is matched against the route templates once
and remembered; anything else is ``unmatched``. The same templates say which methods a path
answers: ``HEAD`` where ``GET`` is (:mod:`app.api.head_requests`), and the ``Allow`` header of
a 405 (:mod:`app.api.problems`, through ``app.state.route_templates``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from starlette.routing import Mount, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.head_requests import HeadAsGet
from app.observability.metrics import record_request

UNMATCHED = "unmatched"
"""The route label of a path no route template matches (a 404)."""

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_REMEMBERED_PATHS = 4096
"""At most this many (method, path) → template answers are kept; then they start over."""

access_logger = logging.getLogger("app.access")

Templates = Mapping[str, frozenset[str]]
"""Route templates and the methods each answers."""


def route_templates(app: FastAPI) -> Templates:
    """The app's route templates with the methods each answers (``HEAD`` wherever ``GET``:
    :mod:`app.api.head_requests` answers it), from its routes (those the
    OpenAPI description leaves out too: the documentation and the web view), and one
    ``{mount}/{path:path}`` per mounted app (the docs' assets), whose files would otherwise be
    counted as unmatched. Read from the router, not from ``app.openapi()``, whose first build
    costs a quarter of a second."""
    templates: dict[str, frozenset[str]] = {}
    for route in iter_route_contexts(app.routes):
        path = route.path  # with its converters ({rest:path}), as scope["route"].path has it
        if not path:
            continue
        if isinstance(route.original_route, Mount):
            templates.setdefault(f"{path}/{{path:path}}", frozenset({"GET", "HEAD"}))
            continue
        methods = frozenset(method.upper() for method in route.methods or ())
        if "GET" in methods:
            methods |= {"HEAD"}
        templates[path] = templates.get(path, frozenset()) | methods
    return templates


class RouteTemplates:
    """The template of a path that was answered before (or without) routing, and the
    methods a path answers."""

    def __init__(self, templates: Callable[[], Templates]) -> None:
        self._templates = templates
        self._compiled: list[tuple[re.Pattern[str], str, frozenset[str]]] | None = None
        self._remembered: dict[tuple[str, str], str] = {}

    def __call__(self, method: str, path: str) -> str:
        key = (method, path)
        template = self._remembered.get(key)
        if template is None:
            template = self._match(method, path)
            if len(self._remembered) >= _REMEMBERED_PATHS:
                self._remembered.clear()
            self._remembered[key] = template
        return template

    def allowed(self, path: str) -> frozenset[str]:
        """Every method some route of ``path`` answers (none for an unknown path)."""
        methods: frozenset[str] = frozenset()
        for regex, _, answered in self._compile():
            if regex.match(path):
                methods |= answered
        return methods

    def _compile(self) -> list[tuple[re.Pattern[str], str, frozenset[str]]]:
        if self._compiled is None:
            try:
                templates = self._templates()
            except Exception:  # never fail a response over a label
                access_logger.exception("cannot list the route templates")
                templates = {}
            self._compiled = [
                (compile_path(template)[0], template, methods)
                for template, methods in templates.items()
            ]
        return self._compiled

    def _match(self, method: str, path: str) -> str:
        matching = [(t, methods) for regex, t, methods in self._compile() if regex.match(path)]
        for template, methods in matching:
            if method in methods:
                return template
        return matching[0][0] if matching else UNMATCHED  # a 405 keeps its template


class RequestTelemetry:
    """Count, time and log every HTTP request (one access line each)."""

    def __init__(self, app: ASGIApp, templates: RouteTemplates) -> None:
        self.app = app
        self._route_of = templates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what Starlette sends when an exception escapes before a response
        counted: tuple[str, float] | None = None  # (route, seconds)

        async def send_counting(message: Message) -> None:
            nonlocal status, counted
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                # Counted before the last byte leaves: a client that has its answer and
                # scrapes /metrics next finds the request counted.
                counted = self._count(scope, status, time.perf_counter() - started)
            await send(message)

        try:
            await self.app(scope, receive, send_counting)
        finally:
            if counted is None:
                counted = self._count(scope, status, time.perf_counter() - started)
            if access_logger.isEnabledFor(logging.INFO):
                self._log(scope, status, *counted)

    def _count(self, scope: Scope, status: int, seconds: float) -> tuple[str, float]:
        route = getattr(scope.get("route"), "path", None)
        if not isinstance(route, str):
            route = self._route_of(_method(scope), scope["path"])
        record_request(_method(scope), route, status, seconds)
        return route, seconds

    @staticmethod
    def _log(scope: Scope, status: int, route: str, seconds: float) -> None:
        state: dict[str, Any] = scope.get("state") or {}
        fields: dict[str, Any] = {
            "method": _method(scope),
            "route": route,
            "path": scope["path"],
            "status": status,
            "duration_ms": round(seconds * 1000, 3),
        }
        api_key = state.get("api_key")
        if api_key is not None:
            fields["api_key"] = str(getattr(api_key, "name", api_key))
        access_logger.info(
            "%s %s %d",
            fields["method"],
            scope["path"],
            status,
            extra={"fields": fields, "request_id": state.get("request_id")},
        )


def _method(scope: Scope) -> str:
    """The request method as a bounded label: a known one, or ``other``."""
    method: str = scope["method"]
    return method if method in _METHODS else "other"


def install_observability(app: FastAPI) -> None:
    """Add :class:`RequestTelemetry` and, inside it, :class:`~app.api.head_requests.HeadAsGet`
    (so a ``HEAD`` is counted and logged as one); call it after every other
    ``add_middleware``. The route templates are kept in ``app.state.route_templates``."""
    templates = RouteTemplates(lambda: route_templates(app))
    app.state.route_templates = templates
    app.add_middleware(HeadAsGet, allowed=templates.allowed)
    app.add_middleware(RequestTelemetry, templates=templates)
