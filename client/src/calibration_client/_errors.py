"""What a call raises. The tree, as httpx and openai-python write theirs::

    CalibrationError                 a call that failed: an error answer, no answer, or one unread
    ├── APIConnectionError           no answer: refused, reset, dropped (status None)
    │   └── APITimeoutError          no answer within the call's timeout
    ├── APIResponseValidationError   a 2xx answer this client cannot read (never retried)
    ├── ClientError              4xx the request was refused (another 4xx raises it itself)
    │   ├── BadRequestError          400 a body the service cannot read (/v2 request errors)
    │   ├── AuthenticationError      401 no or bad key
    │   ├── PermissionDeniedError    403 a key without the scope
    │   ├── NotFoundError            404 unknown calibrator, version or alias
    │   ├── ConflictError            409 e.g. an outcome whose stored label differs
    │   ├── PayloadTooLargeError     413 past the service's body or batch limits
    │   ├── UnprocessableError       422 invalid content: the detail names the field
    │   └── RateLimitError           429 retried
    └── ServerError              5xx the service failed
        └── ServiceUnavailableError  503 database down or the service busy: retried

Another status that is not a success (a 3xx: redirects are not followed) raises
:class:`CalibrationError` itself.
"""

from __future__ import annotations

import json
from typing import Any

import httpx


class CalibrationError(Exception):
    """A call that failed: the service's problem+json (RFC 9457) fields when it answered.

    ``status`` is None when no answer came; ``errors`` holds the validation entries
    (``{"loc": [...], "msg": ...}``); ``request_id`` is the ``X-Request-ID`` to quote to the
    service's operator."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        type: str | None = None,  # the problem+json member's name
        title: str | None = None,
        detail: str | None = None,
        errors: list[dict[str, Any]] | None = None,
        request_id: str | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.errors = errors or []
        self.request_id = request_id
        self.response = response


class APIConnectionError(CalibrationError):
    """The service could not be reached, or the connection broke before an answer."""


class APITimeoutError(APIConnectionError):
    """No answer within the call's timeout (which bounds all its attempts)."""


class APIResponseValidationError(CalibrationError):
    """A successful answer whose body this client cannot read (not JSON, a member missing,
    binary tensors shorter than their header says); ``status`` is the answer's."""


class ClientError(CalibrationError):
    """4xx: the service refused the request; sending it again would fail the same way
    (but 429, :class:`RateLimitError`, which is retried)."""


class BadRequestError(ClientError):
    """400: a body the service cannot read."""


class AuthenticationError(ClientError):
    """401: no key, or a key the service does not know."""


class PermissionDeniedError(ClientError):
    """403: a key without the scope the call needs."""


class NotFoundError(ClientError):
    """404: an unknown calibrator, version or alias."""


class ConflictError(ClientError):
    """409: the request contradicts what is stored."""


class PayloadTooLargeError(ClientError):
    """413: past the service's body or batch limits."""


class UnprocessableError(ClientError):
    """422: content the service refuses; ``detail`` names the field and index."""


class RateLimitError(ClientError):
    """429: too many requests (retried, honouring ``Retry-After``)."""


class ServerError(CalibrationError):
    """5xx: the service failed."""


class ServiceUnavailableError(ServerError):
    """503: the database is unreachable or the service's queue is full (retried)."""


_BY_STATUS: dict[int, type[CalibrationError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: UnprocessableError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def error_from_response(response: httpx.Response) -> CalibrationError:
    """The error an answer of status 4xx/5xx stands for, read from its problem+json body
    (``/v2``'s ``{"error": ...}`` becomes the detail; another body, its text)."""
    status = response.status_code
    kind = _BY_STATUS.get(status) or _family(status)
    try:
        body: Any = json.loads(response.content)
    except ValueError:
        body = None
    type_: str | None = None
    title: str | None = None
    errors: list[dict[str, Any]] | None = None
    if isinstance(body, dict) and "error" in body and "status" not in body:
        detail = _text(body["error"])
    elif isinstance(body, dict):
        type_, title, detail = (
            _text(body.get("type")),
            _text(body.get("title")),
            _text(body.get("detail")),
        )
        found = body.get("errors")
        errors = found if isinstance(found, list) else None
    else:
        detail = response.text[:500] or None
    title = title or response.reason_phrase
    message = f"{status} {title}" + (f": {detail}" if detail else "")
    return kind(
        message,
        status=status,
        type=type_,
        title=title,
        detail=detail,
        errors=errors,
        request_id=response.headers.get("x-request-id"),
        response=response,
    )


def unreadable_answer(response: httpx.Response, exc: Exception) -> APIResponseValidationError:
    """The error a successful answer stands for when reading its body failed with ``exc``."""
    error = APIResponseValidationError(
        f"{response.status_code} answer that cannot be read: {type(exc).__name__}: {exc}",
        status=response.status_code,
        request_id=response.headers.get("x-request-id"),
        response=response,
    )
    error.__cause__ = exc
    return error


def undecodable_answer(exc: httpx.DecodingError) -> APIResponseValidationError:
    """An answer whose body does not decode as its ``Content-Encoding`` says (not retried:
    the same server would send it again)."""
    error = APIResponseValidationError(f"an answer that cannot be decoded: {exc}")
    error.__cause__ = exc
    return error


def _family(status: int) -> type[CalibrationError]:
    if 400 <= status < 500:
        return ClientError
    return ServerError if status >= 500 else CalibrationError


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def connection_error(exc: httpx.TransportError) -> APIConnectionError:
    """The error a transport failure stands for: a timeout, or another connection failure."""
    if isinstance(exc, httpx.TimeoutException):
        return APITimeoutError(f"no answer in time: {exc!r}")
    return APIConnectionError(f"the service could not be reached: {exc!r}")
