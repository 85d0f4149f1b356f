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

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse

from app.api.mounting import root_of

ASSETS_PATH = "/static/docs"
"""Where the Swagger UI and ReDoc files are mounted (open without a key: app.access.api_keys)."""

ASSETS_PACKAGE = ("fastapi_standalone_docs", "static")

SWAGGER_UI_PARAMETERS: dict[str, Any] = {
    "persistAuthorization": False,
    "validatorUrl": None,
    "displayRequestDuration": True,
}


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs``, ``/docs/oauth2-redirect`` and ``/redoc`` from local assets.

    ``app`` must be created with ``docs_url=None, redoc_url=None`` (FastAPI's CDN pages off).
    """
    app.mount(ASSETS_PATH, StaticFiles(packages=[ASSETS_PACKAGE]), name="docs-assets")
    title = f"{app.title} · API"
    openapi_url = app.openapi_url or "/openapi.json"
    redirect_url = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        """Swagger UI on the OpenAPI description, its assets served from this service."""
        root = root_of(request.scope)
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=title,
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/fastapi/favicon.png",
            oauth2_redirect_url=root + redirect_url,
            swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
        )

    @app.get(redirect_url, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        """The page Swagger UI's OAuth2 flows return to (kept for its scripts' sake)."""
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        """ReDoc on the OpenAPI description, its assets served from this service."""
        root = root_of(request.scope)
        return get_redoc_html(
            openapi_url=root + openapi_url,
            title=title,
            redoc_js_url=f"{root}{ASSETS_PATH}/redoc/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_PATH}/fastapi/favicon.png",
            with_google_fonts=False,
        )
