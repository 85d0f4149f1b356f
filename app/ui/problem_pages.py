"""Routes: ``GET /problems`` and ``GET /problems/{slug}``, the pages problem ``type``s point to.

HTML for a person who followed a ``type`` from an error: what the problem means and how to
fix it, rendered like the web view's pages (:mod:`app.ui.templating`: its templates, its
stylesheet, its security headers), with no script and nothing from elsewhere, so they read the
same offline. They are open to anyone (:data:`app.access.api_keys.OPEN_PREFIXES`) and not part of
the OpenAPI description, which documents the API, not its help pages.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import HTMLResponse

from app.api.mounting import root_of
from app.api.problem_types import PROBLEM_TYPES, ProblemType
from app.errors import NotFound
from app.ui.templating import page

router = APIRouter(prefix="/problems", include_in_schema=False)


def statuses(problem: ProblemType) -> str:
    """The statuses a problem type is sent with, as ``404`` or ``400 or 422``."""
    return " or ".join(str(status) for status in problem.statuses) or "any other"


@router.get("")
async def problem_index(request: Request) -> HTMLResponse:
    """Every problem type the service answers with, linked to its page."""
    problems = sorted(PROBLEM_TYPES.values(), key=lambda p: (p.statuses or (999,), p.slug))
    context = {"problems": problems, "statuses": statuses}
    return page("problems.html", context, root=root_of(request.scope))


@router.get("/{slug}")
async def problem_page(request: Request, slug: str) -> HTMLResponse:
    """The page of one problem type; 404 (a problem itself) for a slug that names none."""
    problem = PROBLEM_TYPES.get(slug)
    if problem is None:
        raise NotFound(f"no problem type {slug[:64]!r}; see /problems")
    context = {"problem": problem, "statuses": statuses}
    return page("problem.html", context, root=root_of(request.scope))
