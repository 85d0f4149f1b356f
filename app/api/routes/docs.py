"""Routes: ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), served with no request leaving the host.

FastAPI's own pages load their scripts, style sheet, favicon (and ReDoc's fonts) from CDNs, so
on a machine without internet they are blank. Here the same pages load everything from
:data:`ASSETS_PATH`, the Swagger UI and ReDoc builds that the ``fastapi-standalone-docs``
package ships (with their licences, served beside them: ``swagger/LICENSE``,
``redoc/redoc.standalone.js.LICENSE.txt``). Only its files are used, not its patching of
FastAPI.

Swagger UI forgets the bearer key given to its Authorize button when the page is left
(``persistAuthorization`` off): kept, it would sit in ``localStorage`` in plain text, where any
script of this origin (the web view's pages too) could read a write key. It never calls the
public validator (``validatorUrl: null``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse
from starlette.routing import BaseRoute, Mount

from app.api.mounting import root_of

ASSETS_PATH = "/static/docs"
"""Where the Swagger UI and ReDoc files are mounted (open without a key: app.access.api_keys)."""

ASSETS_PACKAGE = ("fastapi_standalone_docs", "static")

SWAGGER_UI_PARAMETERS: dict[str, Any] = {
    "persistAuthorization": False,
    "validatorUrl": None,
    "displayRequestDuration": True,
}


router = APIRouter(include_in_schema=False)

REDIRECT_PATH = "/docs/oauth2-redirect"


def docs_routes() -> list[BaseRoute]:
    """``/docs``, ``/docs/oauth2-redirect``, ``/redoc`` and their assets, for an app created with
    ``docs_url=None, redoc_url=None`` (FastAPI's CDN pages off)."""
    assets = StaticFiles(packages=[ASSETS_PACKAGE])
    return [Mount(ASSETS_PATH, app=assets, name="docs-assets"), *router.routes]


def _openapi_url(request: Request) -> str:
    app: FastAPI = request.app
    return root_of(request.scope) + (app.openapi_url or "/openapi.json")


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI on the OpenAPI description, its assets served from this service."""
    root = root_of(request.scope)
    return get_swagger_ui_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} · API",
        swagger_js_url=f"{root}{ASSETS_PATH}/swagger/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSETS_PATH}/swagger/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS_PATH}/fastapi/favicon.png",
        oauth2_redirect_url=root + REDIRECT_PATH,
        swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
    )


@router.get(REDIRECT_PATH)
async def swagger_ui_redirect() -> HTMLResponse:
    """The page Swagger UI's OAuth2 flows return to (kept for its scripts' sake)."""
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    """ReDoc on the OpenAPI description, its assets served from this service."""
    root = root_of(request.scope)
    return get_redoc_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} · API",
        redoc_js_url=f"{root}{ASSETS_PATH}/redoc/redoc.standalone.js",
        redoc_favicon_url=f"{root}{ASSETS_PATH}/fastapi/favicon.png",
        with_google_fonts=False,
    )
