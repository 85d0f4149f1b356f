"""The key form of the web view: enter a read key once, keep a session cookie, sign out.

The key travels only in a POST body, never in a URL; the answer sets a signed session
(:mod:`app.ui.session`) as a cookie that scripts cannot read (``HttpOnly``), that no other
site's page sends (``SameSite=Strict``), that only ``/ui`` receives (``Path=/ui``) and that
travels only over TLS when the request came over it (``Secure``; behind a proxy trusted by
``CALIBRATION_FORWARDED_ALLOW_IPS``, its ``X-Forwarded-Proto`` counts). Forms posted from
another origin are refused (``Origin``, ``Sec-Fetch-Site``), and the page to return to must
be one of the web view's (:func:`app.ui.session.safe_next`): no open redirect.

The form is parsed here (a urlencoded body of two fields, at most :data:`FORM_BYTES`) rather
than by python-multipart: nothing of a multipart parser is needed for one field.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from app.api.deps import read_body
from app.auth import match_key
from app.errors import (
    Forbidden,
    MalformedBody,
    ServiceError,
    SignInUnavailable,
    UnsupportedMediaType,
)

from .answers import error_page, sessions_of
from .session import COOKIE_NAME, COOKIE_PATH, KEY_FORM, SESSION_SECONDS, safe_next
from .templating import page

router = APIRouter(prefix="/ui", include_in_schema=False)

FORM_BYTES = 4096
"""The largest sign-in form read (a key is 43 characters)."""
FORM_TYPE = "application/x-www-form-urlencoded"
NextQuery = Annotated[str | None, Query(alias="next")]


def form_page(next_path: str, *, problem: str | None = None, status: int = 200) -> Response:
    """The key form, posting back with the page to return to in its action."""
    action = f"{KEY_FORM}?next={quote(next_path, safe='')}"
    return page("key.html", {"action": action, "problem": problem}, status=status)


@router.get("/key")
async def key_form(request: Request, next_path: NextQuery = None) -> Response:
    """The form that asks for a key (or says none is needed, or that sign-in is off)."""
    sessions = sessions_of(request)
    target = safe_next(next_path)
    if not sessions.keys:
        return RedirectResponse(target, status_code=303)
    if not sessions.can_sign_in:
        return error_page(request, _no_secret())
    return form_page(target)


@router.post("/key")
async def sign_in(request: Request, next_path: NextQuery = None) -> Response:
    """Check the posted key; on success set the session cookie and go where the user was."""
    sessions = sessions_of(request)
    target = safe_next(next_path)
    try:
        same_origin(request)
        if not sessions.keys:
            return RedirectResponse(target, status_code=303)
        if not sessions.can_sign_in:
            raise _no_secret()
        presented = await posted_key(request)
    except ServiceError as exc:
        return error_page(request, exc)
    key = None if presented is None else match_key(presented, sessions.keys.values())
    if key is None:
        return form_page(target, problem="That key is not valid here.", status=403)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE_NAME,
        sessions.issue(key),
        max_age=SESSION_SECONDS,
        path=COOKIE_PATH,
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


@router.post("/logout")
async def sign_out(request: Request) -> Response:
    """Forget the session cookie and show the key form."""
    try:
        same_origin(request)
    except ServiceError as exc:
        return error_page(request, exc)
    response = RedirectResponse(KEY_FORM, status_code=303)
    response.delete_cookie(
        COOKIE_NAME,
        path=COOKIE_PATH,
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


def same_origin(request: Request) -> None:
    """403 for a form posted by another site's page (CSRF): its ``Origin`` (when the browser
    sent one) must be ours, and ``Sec-Fetch-Site`` must not say cross-site."""
    origin = request.headers.get("origin")
    ours = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin is not None and origin != ours:
        raise Forbidden(f"a form posted from {origin[:100]!r} is refused here")
    fetched = request.headers.get("sec-fetch-site")
    if fetched is not None and fetched not in ("same-origin", "none"):
        raise Forbidden("a form posted from another site is refused here")


async def posted_key(request: Request) -> str | None:
    """The ``key`` field of a urlencoded form body (None when absent or empty)."""
    media = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if media != FORM_TYPE:
        raise UnsupportedMediaType(f"the key form is posted as {FORM_TYPE}")
    body = await read_body(request, FORM_BYTES)
    try:
        fields = parse_qs(body.decode("ascii"), max_num_fields=4, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise MalformedBody("the form is not a urlencoded body of at most 4 fields") from None
    values = fields.get("key") or [""]
    return values[0].strip() or None


def _no_secret() -> SignInUnavailable:
    return SignInUnavailable(
        "the web view cannot sign in: set CALIBRATION_UI_SECRET (the same secret on every "
        "replica and worker) to enable its sessions"
    )
