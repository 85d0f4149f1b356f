"""The key form of the web view: enter a read key once, keep a session cookie, sign out.

The key travels only in a POST body, never in a URL; the answer sets a signed session
(:mod:`app.access.sessions`) as a cookie that scripts cannot read (``HttpOnly``), that no other
site's page sends (``SameSite=Strict``), that only the web view receives (``Path=/ui``, below
the proxy prefix) and that travels only over TLS when the request came over it (``Secure``;
behind a proxy trusted by ``CALIBRATION_FORWARDED_ALLOW_IPS``, its ``X-Forwarded-Proto``
counts). Forms posted from another site are refused (:func:`same_origin`), and the page to
return to must be one of the web view's (:func:`app.access.sessions.safe_next`): no open redirect.

Signing out deletes the cookie in this browser only: a copy of it stays valid until it
expires, or until its key or the secret changes (sessions are stateless, see
:mod:`app.access.sessions`).
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from starlette.exceptions import HTTPException
from starlette.responses import RedirectResponse, Response

from app.access.api_keys import match_key
from app.access.sessions import COOKIE_NAME, KEY_FORM, SESSION_SECONDS, cookie_path, safe_next
from app.api.bodies.payloads import require_media_type
from app.api.deps import read_body
from app.api.mounting import root_of
from app.errors import CrossSiteRequest, MalformedBody, ServiceError, SignInUnavailable

from .page_responses import error_page, sessions_of
from .templating import page

router = APIRouter(prefix="/ui", include_in_schema=False)

FORM_BYTES = 4096
"""The largest sign-in form read (a key is 43 characters)."""
FORM_FIELDS = 4
"""The most fields a sign-in form may have (it has one)."""
FORM_TYPE = "application/x-www-form-urlencoded"
SAME_SITE_FETCHES = ("same-origin", "none")
"""``Sec-Fetch-Site`` values of a form of ours (``none``: the user's own navigation)."""
NextQuery = Annotated[str | None, Query(alias="next")]


def form_page(
    request: Request, next_path: str, *, problem: str | None = None, status: int = 200
) -> Response:
    """The key form, posting back with the page to return to in its action."""
    action = f"{root_of(request.scope)}{KEY_FORM}?next={quote(next_path, safe='')}"
    return page("key.html", {"action": action, "problem": problem}, status=status)


@router.get("/key")
async def key_form(request: Request, next_path: NextQuery = None) -> Response:
    """The form that asks for a key (or says none is needed, or that sign-in is off)."""
    sessions = sessions_of(request)
    target = safe_next(next_path)
    if not sessions.keys:
        return RedirectResponse(root_of(request.scope) + target, status_code=303)
    if not sessions.can_sign_in:
        return error_page(request, _no_secret())
    return form_page(request, target)


@router.post("/key")
async def sign_in(request: Request, next_path: NextQuery = None) -> Response:
    """Check the posted key; on success set the session cookie and go where the user was."""
    sessions = sessions_of(request)
    target = root_of(request.scope) + safe_next(next_path)
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
        return form_page(
            request, safe_next(next_path), problem="That key is not valid here.", status=403
        )
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE_NAME,
        sessions.issue(key),
        max_age=SESSION_SECONDS,
        path=cookie_path(root_of(request.scope)),
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


@router.post("/logout")
async def sign_out(request: Request) -> Response:
    """Forget the session cookie in this browser and show the key form."""
    try:
        same_origin(request)
    except ServiceError as exc:
        return error_page(request, exc)
    response = RedirectResponse(root_of(request.scope) + KEY_FORM, status_code=303)
    response.delete_cookie(
        COOKIE_NAME,
        path=cookie_path(root_of(request.scope)),
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


def same_origin(request: Request) -> None:
    """Refuse a form posted by another site's page (CSRF).

    ``Sec-Fetch-Site``, which the browser sets and no page can, decides when it is sent: only
    ``same-origin`` and ``none`` pass. It compares the page's origin with the URL the browser
    posted to, so a proxy that rewrites ``Host`` cannot make it fail. Browsers that send none
    (older ones) are checked by ``Origin``, when they send it: it must be this request's
    scheme and ``Host`` (which a proxy must then pass on with its port).
    """
    fetched = request.headers.get("sec-fetch-site")
    if fetched is not None:
        if fetched not in SAME_SITE_FETCHES:
            raise CrossSiteRequest(f"a form posted from another site ({fetched[:20]!r}) is refused")
        return
    origin = request.headers.get("origin")
    ours = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin is not None and origin != ours:
        raise CrossSiteRequest(f"a form posted from {origin[:100]!r} to {ours[:100]!r} is refused")


async def posted_key(request: Request) -> str | None:
    """The ``key`` field of a urlencoded form body (None when absent or empty)."""
    require_media_type(request.headers.get("content-type"), (FORM_TYPE,))
    body = await read_body(request, FORM_BYTES)  # request.form() parses what it read
    if not body.isascii():  # a urlencoded body is ASCII; a key is never anything else
        raise MalformedBody("the form is not a urlencoded body")
    try:
        form = await request.form(max_files=0, max_fields=FORM_FIELDS)
    except HTTPException:
        raise MalformedBody(f"the form has more than {FORM_FIELDS} fields") from None
    value = form.get("key")
    return (value.strip() or None) if isinstance(value, str) else None


def _no_secret() -> SignInUnavailable:
    return SignInUnavailable(
        "the web view cannot sign in: set CALIBRATION_UI_SECRET (the same secret on every "
        "replica and worker) to enable its sessions"
    )
