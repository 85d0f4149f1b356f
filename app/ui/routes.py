"""Routes of the web view: the pages, the key form, signing out, and HTML error pages.

Who may see a page is decided before routing (:mod:`app.api.security`); these routes only
read. Every failure is a page too, never problem+json nor a 500: an unknown calibrator, a
name no calibrator can have, a bad query, a busy server.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles

from app.api.contracts import tag_filter
from app.api.deps import get_service, off_loop, parse_selector
from app.api.schemas import NAME_PATTERN
from app.api.traffic import Monitored, monitoring_query
from app.calibration.bootstrap import RESAMPLES
from app.diagnosis import DEFAULT_BINS
from app.errors import InvalidInput, NotFound
from app.monitoring import WINDOW_SECONDS, Window
from app.store import Selector

from . import pages, signin
from .answers import answer, error_page
from .templating import STATIC

router = APIRouter(prefix="/ui", include_in_schema=False)

Text = Annotated[str | None, Query()]
_NAME = re.compile(NAME_PATTERN)


def calibrator_name(name: str) -> str:
    """``name`` when a calibrator can have it, else 404 (the API answers 422: a page is
    looked up, not validated)."""
    if not _NAME.match(name):
        raise NotFound(f"there is no calibrator named {name[:130]!r}")
    return name


def selector_of(name: str, text: str | None) -> Selector | None:
    """A version number, ``latest`` or an alias from a query, None when empty."""
    if text is None or text.strip() == "":
        return None
    return parse_selector(name, text.strip())


def monitored_range(window: str | None, version: str | None = None) -> Monitored:
    """The monitored range of the monitoring route's defaults: 30 windows back from now."""
    chosen: Window = "1d"
    if window:
        if window not in WINDOW_SECONDS:
            raise InvalidInput(f"window is {window[:16]!r}; expected 1h, 1d or 7d")
        chosen = window  # type: ignore[assignment]
    return monitoring_query(chosen, None, None, version, DEFAULT_BINS, RESAMPLES)


@router.get("")
async def calibrator_list(request: Request, tag: Text = None) -> Response:
    """Every calibrator with its latest version's method, metrics, aliases and tags."""

    async def build() -> dict[str, Any]:
        wanted = tag_filter(tag) if tag else None
        number = pages.page_number(request.query_params.get("page"))
        return await run_in_threadpool(pages.calibrators, get_service(request), number, wanted)

    return await answer(request, "list.html", build)


@router.get("/calibrators/{name}")
async def calibrator_page(request: Request, name: str) -> Response:
    """A calibrator's versions, newest first, with their diagrams and reports."""

    async def build() -> dict[str, Any]:
        number = pages.page_number(request.query_params.get("page"))
        found = calibrator_name(name)
        monitored = monitored_range(None)
        service = get_service(request)
        return await off_loop(request, pages.calibrator, service, found, number, monitored)

    return await answer(request, "calibrator.html", build)


@router.get("/calibrators/{name}/compare")
async def compare_page(request: Request, name: str, a: Text = None, b: Text = None) -> Response:
    """Two versions' stored reliability curves overlaid, and their metrics side by side."""

    async def build() -> dict[str, Any]:
        found = calibrator_name(name)
        first, second = selector_of(found, a), selector_of(found, b)
        service = get_service(request)
        return await off_loop(request, pages.comparison, service, found, first, second)

    return await answer(request, "compare.html", build)


@router.get("/calibrators/{name}/monitoring")
async def monitoring_page(
    request: Request, name: str, version: Text = None, window: Text = None
) -> Response:
    """The monitoring of a calibrator's logged traffic (of one version, or of all)."""

    async def build() -> dict[str, Any]:
        found = calibrator_name(name)
        selector = selector_of(found, version)
        monitored = monitored_range(window, None if selector is None else str(selector))
        service = get_service(request)
        return await off_loop(request, pages.monitoring, service, found, monitored, selector)

    return await answer(request, "monitoring.html", build)


@router.get("/{rest:path}")
async def unknown_page(request: Request, rest: str) -> Response:
    """Any other path under /ui: the list for ``/ui/``, else a 404 page with a way back."""
    if rest == "":
        return RedirectResponse("/ui", status_code=303)
    return error_page(request, NotFound("there is no such page of the web view"))


def install_web_view(app: FastAPI) -> None:
    """Serve the stylesheet and the pages (the key form before the catch-all)."""
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")
    app.include_router(signin.router)
    app.include_router(router)
