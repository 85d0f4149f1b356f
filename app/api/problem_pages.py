"""Routes: ``GET /problems`` and ``GET /problems/{slug}``, the pages problem ``type``s point to.

Plain HTML for a person who followed a ``type`` from an error: what the problem means and
how to fix it. No script, no external style sheet or font: the pages read the same offline.
They are open to anyone (:data:`app.auth.OPEN_PREFIXES`) and not part of the OpenAPI
description, which documents the API, not its help pages.
"""

from __future__ import annotations

from html import escape

from fastapi import APIRouter
from starlette.exceptions import HTTPException
from starlette.responses import HTMLResponse

from .problem_types import PROBLEM_TYPES, ProblemType

router = APIRouter(prefix="/problems", include_in_schema=False)

STYLE = """
body { font: 16px/1.5 system-ui, sans-serif; max-width: 46rem; margin: 2rem auto;
       padding: 0 1rem; color: #1b1b1b; background: #fff; }
h1 { font-size: 1.6rem; margin-bottom: .25rem; }
code { background: #f0f0f0; padding: 0 .2em; border-radius: 3px; }
.status { color: #4a4a4a; margin-top: 0; }
a { color: #0b57d0; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid #ddd; }
"""


def _page(title: str, body: str) -> HTMLResponse:
    document = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} · calibration service</title><style>{STYLE}</style>"
        f"</head><body>{body}</body></html>\n"
    )
    return HTMLResponse(document)


def _inline_code(text: str) -> str:
    """Escape ``text`` and show its backquoted spans as ``<code>``."""
    parts = escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _statuses(problem: ProblemType) -> str:
    return " or ".join(str(status) for status in problem.statuses) or "any other"


@router.get("")
async def problem_index() -> HTMLResponse:
    """Every problem type the service answers with, linked to its page."""
    rows = "".join(
        f'<tr><td><a href="{escape(p.uri)}">{escape(p.slug)}</a></td>'
        f"<td>{_statuses(p)}</td><td>{escape(p.title)}</td></tr>"
        for p in sorted(PROBLEM_TYPES.values(), key=lambda p: (p.statuses or (999,), p.slug))
    )
    body = (
        "<h1>Problem types</h1>"
        "<p>Every error of the calibration service is an <code>application/problem+json</code> "
        "document (RFC 9457) whose <code>type</code> is one of these pages. Clients should "
        "read <code>status</code>, <code>detail</code> and, for invalid input, "
        '<code>errors</code>. The API itself is described at <a href="/docs">/docs</a>.</p>'
        '<table><thead><tr><th scope="col">type</th><th scope="col">status</th>'
        f'<th scope="col">title</th></tr></thead><tbody>{rows}</tbody></table>'
    )
    return _page("Problem types", body)


@router.get("/{slug}")
async def problem_page(slug: str) -> HTMLResponse:
    """The page of one problem type; 404 (a problem itself) for a slug that names none."""
    problem = PROBLEM_TYPES.get(slug)
    if problem is None:
        raise HTTPException(404, f"no problem type {slug[:64]!r}; see /problems")
    body = (
        f"<h1>{escape(problem.title)}</h1>"
        f'<p class="status">HTTP {_statuses(problem)} · '
        f"<code>type: {escape(problem.uri)}</code></p>"
        f"<h2>What it means</h2><p>{_inline_code(problem.meaning)}</p>"
        f"<h2>How to fix it</h2><p>{_inline_code(problem.fix)}</p>"
        '<p><a href="/problems">All problem types</a> · <a href="/docs">API documentation</a></p>'
    )
    return _page(problem.title, body)
