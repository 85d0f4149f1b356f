"""Routes of the web view: the pages, the key form, signing out, and HTML error pages.

Who may see a page is decided before routing (:mod:`app.api.security`); these routes only
read, each page's use case as a job of the bounded pool, in a worker process
(:func:`app.api.deps.in_worker`): the list's sparklines read traffic, the other pages compute
reports and figures.
Every failure under ``/ui`` is a page too, never problem+json: an unknown calibrator, a name
no calibrator can have, a bad query, a busy server, a wrong method, a missing stylesheet, an
unexpected error (:func:`app.ui.page_responses.install_error_pages`).
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from app.api.bodies.fields import tag_filter
from app.api.deps import in_worker, parse_selector
from app.api.documents import NAME_PATTERN
from app.api.monitoring_csv import monitoring_csv
from app.api.mounting import root_of
from app.calibration import RESAMPLES
from app.errors import InvalidInput, NotFound, ServiceError
from app.service.reporting import DEFAULT_BINS, Curve
from app.service.traffic.cases import Monitored, monitored_range
from app.service.traffic.monitoring import WINDOW_SECONDS, Window
from app.store import Selector

from . import list_page, pages, signin
from .compare_page import comparison
from .page_responses import error_page, render_page
from .templating import PAGE_HEADERS, STATIC

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


def curve_of(text: str | None) -> Curve:
    """``?curve=``: ``smooth`` (the default) or ``binned``."""
    if text is None or text == "" or text == "smooth":
        return "smooth"
    if text == "binned":
        return "binned"
    raise InvalidInput(f"curve is {text[:16]!r}; expected smooth or binned")


def monitored(window: str | None, version: str | None = None) -> Monitored:
    """What the monitoring route reads by default: 30 windows back from now."""
    chosen: Window = "1d"
    if window:
        if window not in WINDOW_SECONDS:
            raise InvalidInput(f"window is {window[:16]!r}; expected 1h, 1d or 7d")
        chosen = window  # type: ignore[assignment]
    since, until = monitored_range(chosen, None, None)
    return Monitored(chosen, since, until, version, DEFAULT_BINS, RESAMPLES)


@router.get("")
async def calibrator_list(request: Request, tag: Text = None) -> Response:
    """Every calibrator with the versions its aliases serve and its latest, their metrics and
    tags, and its live version's log loss over the last 14 days."""

    async def read_page() -> pages.PageAnswer:
        wanted = tag_filter(tag) if tag else None
        number = pages.page_number(request.query_params.get("page"))
        return await in_worker(request, list_page.calibrators, number, wanted), 200

    return await render_page(request, "list.html", read_page)


@router.get("/calibrators/{name}")
async def calibrator_page(
    request: Request, name: str, version: Text = None, curve: Text = None
) -> Response:
    """A calibrator's live version (or the one asked) in full: its diagram, smooth curve or
    bins, its metrics, decision and traffic; its aliases' moves; its versions as a table."""

    async def read_page() -> pages.PageAnswer:
        number = pages.page_number(request.query_params.get("page"))
        checked = calibrator_name(name)
        shown, drawn = selector_of(checked, version), curve_of(curve)
        asked = monitored(None)
        found = await in_worker(request, pages.calibrator, checked, shown, number, asked, drawn)
        return found, 200

    return await render_page(request, "calibrator.html", read_page)


@router.get("/calibrators/{name}/compare")
async def compare_page(request: Request, name: str, a: Text = None, b: Text = None) -> Response:
    """Two versions picked from select lists: their stored reliability curves overlaid, their
    metrics side by side, and which one is better, in words."""

    async def read_page() -> pages.PageAnswer:
        checked = calibrator_name(name)
        first, second = selector_of(checked, a), selector_of(checked, b)
        shown: pages.PageAnswer = await in_worker(request, comparison, checked, first, second)
        return shown

    return await render_page(request, "compare.html", read_page)


@router.get("/calibrators/{name}/monitoring")
async def monitoring_page(
    request: Request, name: str, version: Text = None, window: Text = None
) -> Response:
    """The monitoring of a calibrator's logged traffic (of one version, or of all)."""

    async def read_page() -> pages.PageAnswer:
        checked = calibrator_name(name)
        selector = selector_of(checked, version)
        asked = monitored(window, None if selector is None else str(selector))
        found = await in_worker(request, pages.monitoring, checked, asked, selector)
        return found, 200

    return await render_page(request, "monitoring.html", read_page)


@router.get("/calibrators/{name}/monitoring.csv")
async def monitoring_download(
    request: Request, name: str, version: Text = None, window: Text = None
) -> Response:
    """The monitoring page's windows as CSV (``GET /v1/…/monitoring.csv``'s columns), for the
    page's session: its cookie opens ``/ui`` only, never the API."""
    try:
        checked = calibrator_name(name)
        selector = selector_of(checked, version)
        asked = monitored(window, None if selector is None else str(selector))
        rows = await in_worker(request, pages.monitoring_rows, checked, asked, selector)
    except ServiceError as exc:
        return error_page(request, exc)
    filename = f"{checked}-monitoring-{asked.window}.csv"
    return Response(
        monitoring_csv(rows),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"', **PAGE_HEADERS},
    )


@router.get("/{rest:path}")
async def unknown_page(request: Request, rest: str) -> Response:
    """Any other path under /ui: the list for ``/ui/``, else a 404 page with a way back."""
    if rest == "":
        return RedirectResponse(f"{root_of(request.scope)}/ui", status_code=303)
    return error_page(request, NotFound("there is no such page of the web view"))


def web_view_routes() -> list[BaseRoute]:
    """The stylesheet and the pages, the key form before the catch-all."""
    static = Mount("/ui/static", app=StaticFiles(directory=STATIC), name="ui-static")
    return [static, *signin.router.routes, *router.routes]
