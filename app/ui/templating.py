"""Rendering the web view's pages: one Jinja2 environment (autoescaping every template, no
undefined name passing silently) and the headers every page carries."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.responses import HTMLResponse

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"

PAGE_HEADERS = {
    # No script may run, whatever a page held; inline SVG carries style attributes.
    "Content-Security-Policy": "default-src 'none'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def number(value: Any, digits: int = 4) -> str:
    """A metric for a table: fixed digits, small values in scientific notation, a dash for
    none (an empty bin, a metric a method does not have)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "—"
    if value != 0 and abs(value) < 10 ** (-digits + 1):
        return f"{value:.{digits - 2}e}"
    return f"{value:.{digits}f}"


def interval(metrics: Mapping[str, Any] | None, name: str) -> str:
    """The 95% interval of ``metrics[name]`` as ``[lo, hi]``, or an empty string."""
    pair = ((metrics or {}).get("intervals") or {}).get(name)
    if not isinstance(pair, list | tuple) or len(pair) != 2:
        return ""
    return f"[{number(pair[0])}, {number(pair[1])}]"


def moment(value: Any) -> str:
    """A time as ``2026-11-21 22:00 UTC``."""
    return f"{value:%Y-%m-%d %H:%M} UTC" if isinstance(value, datetime) else "—"


ENVIRONMENT = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENVIRONMENT.filters.update(number=number, moment=moment)
ENVIRONMENT.globals.update(interval=interval)


def page(
    template: str,
    context: Mapping[str, Any],
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> HTMLResponse:
    """``template`` rendered with ``context`` as an HTML answer with :data:`PAGE_HEADERS`.
    Every page gets ``signed_in`` (whether to offer signing out) from the context or False."""
    html = ENVIRONMENT.get_template(template).render({"signed_in": False, **context})
    return HTMLResponse(html, status_code=status, headers={**PAGE_HEADERS, **(headers or {})})
