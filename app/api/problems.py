"""RFC 9457 problem details: the one way every error leaves the service.

Domain errors (:mod:`app.errors`), FastAPI's request validation, Starlette's HTTP errors
(unknown routes, wrong methods) and, as a last resort, anything unexpected are all rendered
here as ``application/problem+json`` with ``type``, ``title``, ``status`` and ``detail``
(``type`` is ``/problems/{slug}``, a page of :mod:`app.ui.problem_pages`, below the proxy
prefix ``root_path`` when there is one);
under ``/v2``, the Open Inference Protocol's routes, as its ``{"error": "..."}``
(:func:`error_response` chooses), with 400 where ``/v1`` says 422.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from app.api.mounting import root_of, route_path
from app.api.places import default_place, describe, placed
from app.api.problem_types import HTTP_ERROR, METHOD_NOT_ALLOWED, UNKNOWN_ROUTE, type_uri
from app.errors import FieldError, InvalidInput, MalformedBody, ServiceError

PROBLEM_JSON = "application/problem+json"
logger = logging.getLogger("app.errors")

ANSWERED = "answered_by_protocol"
"""The request-state key holding the status the protocol answered (408, 413) while the
application was still reading the body."""


_HTTP_SLUGS = {400: MalformedBody.slug, 404: UNKNOWN_ROUTE, 405: METHOD_NOT_ALLOWED}
"""The problem types of Starlette's HTTP errors (unknown routes, wrong methods, a multipart
body it could not parse); any other status is a plain :data:`HTTP_ERROR`."""


def problem_response(
    status: int,
    detail: str,
    *,
    slug: str,
    title: str | None = None,
    errors: Sequence[FieldError] = (),
    headers: dict[str, str] | None = None,
    root_path: str = "",
) -> Response:
    """Render one problem document of the type ``slug`` (:mod:`app.api.problem_types`);
    ``root_path`` is the proxy prefix its ``type`` needs to resolve to the page."""
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    body: dict[str, Any] = {
        "type": type_uri(slug, root_path),
        "title": title or phrase,
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = [{"loc": list(e.loc), "msg": e.msg} for e in errors]
    return Response(
        orjson.dumps(body), status_code=status, media_type=PROBLEM_JSON, headers=headers
    )


def protocol_error(status: int, detail: str, headers: dict[str, str] | None = None) -> Response:
    """An Open Inference Protocol error: ``{"error": detail}``; its clients read a request
    they should fix as 400, so an invalid one (422 in ``/v1``) is a 400 here."""
    return Response(
        orjson.dumps({"error": detail}),
        status_code=400 if status == 422 else status,
        media_type="application/json",
        headers=headers,
    )


def is_protocol_path(path: str) -> bool:
    """Whether ``path`` is one of the Open Inference Protocol's (``/v2``)."""
    return path == "/v2" or path.startswith("/v2/")


def error_response(
    path: str,
    status: int,
    detail: str,
    *,
    slug: str,
    title: str | None = None,
    errors: Sequence[FieldError] = (),
    headers: dict[str, str] | None = None,
    root_path: str = "",
) -> Response:
    """The error of a request for ``path`` (below the proxy prefix ``root_path``): the
    protocol's under ``/v2``, else a problem."""
    if is_protocol_path(path):
        return protocol_error(status, detail, headers)
    return problem_response(
        status, detail, slug=slug, title=title, errors=errors, headers=headers, root_path=root_path
    )


async def _service_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServiceError)
    return service_error_response(request, exc)


def service_error_response(request: Request, exc: ServiceError) -> Response:
    """The answer to ``exc`` for ``request``: its problem (or the protocol's error under
    ``/v2``), with ``Retry-After`` where the error sets one."""
    if isinstance(exc, InvalidInput):  # what a route did not place is where its method puts it
        exc = placed(exc, lambda _: default_place(request.method))
    headers = None
    if exc.retry_after_seconds is not None:
        headers = {"Retry-After": str(exc.retry_after_seconds)}
    return error_response(
        request.url.path,
        exc.status,
        exc.detail,
        slug=exc.slug,
        title=exc.title,
        errors=exc.errors,
        headers=headers,
        root_path=root_of(request.scope),
    )


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = [
        FieldError(tuple(e.get("loc", ())), str(e.get("msg", "invalid"))) for e in exc.errors()
    ]
    detail = "; ".join(f"{describe(e.loc)}: {e.msg}" for e in errors[:5]) or "invalid request"
    # A JSON body FastAPI could not decode is malformed (400), not merely invalid (422).
    malformed = any(e.get("type") == "json_invalid" for e in exc.errors())
    error = MalformedBody if malformed else InvalidInput
    return error_response(
        request.url.path,
        error.status,
        detail,
        slug=error.slug,
        title=error.title,
        errors=errors,
        root_path=root_of(request.scope),
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404 and exc.detail == "Not Found":
        detail = f"no route matches {request.method} {request.url.path}"
    elif exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
    else:
        detail = str(exc.detail)
    headers = getattr(exc, "headers", None)
    if exc.status_code == 405:
        headers = {**(headers or {}), **_allow(request)}
    slug = _HTTP_SLUGS.get(exc.status_code, HTTP_ERROR)
    return error_response(
        request.url.path,
        exc.status_code,
        detail,
        slug=slug,
        headers=headers,
        root_path=root_of(request.scope),
    )


def _allow(request: Request) -> dict[str, str]:
    """``Allow`` with every method the path answers: Starlette names only those of the first
    route whose path matched (GET of ``/v1/calibrators/{name}``, not its DELETE)."""
    templates = getattr(request.app.state, "route_templates", None)
    methods = templates.allowed(route_path(request.scope)) if templates is not None else None
    return {"Allow": ", ".join(sorted(methods))} if methods else {}


async def _unexpected_error(request: Request, exc: Exception) -> Response:
    logger.exception("unexpected error on %s %s", request.method, request.url.path)
    detail = "an unexpected error occurred; it has been logged"
    return error_response(
        request.url.path, 500, detail, slug=ServiceError.slug, root_path=root_of(request.scope)
    )


def install_problem_handlers(app: FastAPI) -> None:
    """Route every kind of error through :func:`problem_response`."""
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
