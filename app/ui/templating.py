"""Rendering the service's HTML pages (the web view's and the problem types'): one Jinja2
environment (autoescaping every template, no undefined name passing silently), the metrics
the tables show, and the headers every page carries.

Every link a template writes starts with ``root``, the path the service is mounted at behind
a proxy (``scope["root_path"]``, empty when none)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape
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


HEADLINE_METRICS = (("log_loss", "Log loss"), ("brier", "Brier"), ("ece", "ECE"))
"""The metrics of a version that every table of versions shows, with their column names."""
REPORTED_METRICS = (
    *(metric for metric, _ in HEADLINE_METRICS),
    "mce",
    "auc",
    "smooth_ece",
    "calibration_slope",
    "calibration_intercept",
)
"""The metrics of a reliability report that a version's table and the compare page show."""


def code_spans(text: str) -> Markup:
    """``text`` escaped, with its backquoted spans as ``<code>``."""
    parts = str(escape(text)).split("`")
    return Markup("".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts)))


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


def short_moment(value: Any) -> str:
    """A time as ``11-21 22:00``, where a column says the zone and the year is plain."""
    return f"{value:%m-%d %H:%M}" if isinstance(value, datetime) else "—"


ENVIRONMENT = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENVIRONMENT.filters.update(
    number=number, moment=moment, short_moment=short_moment, code_spans=code_spans
)
ENVIRONMENT.globals.update(
    interval=interval,
    HEADLINE_METRICS=HEADLINE_METRICS,
    REPORTED_METRICS=REPORTED_METRICS,
)


def page(
    template: str,
    context: Mapping[str, Any],
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    root: str = "",
) -> HTMLResponse:
    """``template`` rendered with ``context`` as an HTML answer with :data:`PAGE_HEADERS`.
    Every page gets ``signed_in`` (whether to offer signing out) from the context or False,
    and ``root``, the prefix of its links (:func:`root_of` a request)."""
    defaults = {"signed_in": False, "root": root}
    html = ENVIRONMENT.get_template(template).render({**defaults, **context})
    return HTMLResponse(html, status_code=status, headers={**PAGE_HEADERS, **(headers or {})})
