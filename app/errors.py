"""The service's domain exceptions, each carrying its HTTP status and its problem type.

One handler in :mod:`app.api.problems` renders every one of them as RFC 9457
``application/problem+json``; nothing below this module knows about HTTP beyond the number.
A class's ``slug`` names its problem type: the answer's ``type`` is ``/problems/{slug}``, a
page the service serves (:mod:`app.ui.problem_pages`). One slug per kind of problem, not per
status: the three 503s are three types.

Exception tree::

    ServiceError
    ├── MalformedBody          400  the body cannot be parsed at all
    ├── Unauthorized           401  no valid API key (sent with WWW-Authenticate)
    ├── Forbidden              403  the key's scope does not cover the route
    ├── CrossSiteRequest       403  a web view form posted from another site's page (CSRF)
    ├── NotFound               404  unknown calibrator, version or alias
    ├── RequestTimeout         408  the request body stalled or trickled (CALIBRATION_BODY_*)
    ├── Conflict               409
    ├── PayloadTooLarge        413  body or batch above the configured limits
    ├── UnsupportedMediaType   415
    ├── InvalidInput           422  parsed, but the content is invalid (names field and index)
    ├── ClientGone             499  the client left before its job ended (logged, never sent)
    ├── DatabaseUnavailable    503  the database did not answer (sent with Retry-After)
    ├── Busy                   503  the queued work holds its memory budget (Retry-After)
    ├── OverBudget             503  a job ran past CALIBRATION_FIT_TIMEOUT_SECONDS (Retry-After)
    ├── FitUnderWay            503  a fit under the same Idempotency-Key still runs (Retry-After)
    ├── WorkerLost             503  the worker process running the job died (Retry-After)
    ├── ShuttingDown           503  the server stopped before the request finished (Retry-After)
    ├── OverMemory             413  a job needed more than CALIBRATION_JOB_MEMORY_MB
    ├── SignInUnavailable      503  the web view has keys but no CALIBRATION_UI_SECRET to sign with
    ├── ObjectStoreUnavailable 503  a blob in object storage is missing, corrupt or unreachable
    ├── StoredDataCorrupt      500  a stored artifact or batch failed its sha256 check
    └── NotExportable          501  a version without a faithful ONNX graph
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class FieldError:
    """One validation failure: where (``("scores", 17)``; the HTTP layer adds the place in the
    request, ``("body", "scores", 17)``) and what."""

    loc: tuple[str | int, ...]
    msg: str


@dataclass
class ServiceError(Exception):
    """Base of every error the service answers deliberately."""

    detail: str
    errors: Sequence[FieldError] = field(default_factory=tuple)

    status = 500
    title = "Internal Server Error"
    slug = "internal-error"
    retry_after_seconds: ClassVar[int | None] = None
    """Sent as ``Retry-After`` when set: the condition is expected to pass."""

    def __post_init__(self) -> None:
        super().__init__(self.detail)


class MalformedBody(ServiceError):
    status = 400
    title = "Malformed request body"
    slug = "malformed-body"


class Unauthorized(ServiceError):
    status = 401
    title = "Unauthorized"
    slug = "unauthorized"


class Forbidden(ServiceError):
    status = 403
    title = "Forbidden"
    slug = "forbidden"


class CrossSiteRequest(ServiceError):
    """A form of the web view posted from another site's page: refused, whatever the key."""

    status = 403
    title = "Cross-site request"
    slug = "cross-site-request"


class NotFound(ServiceError):
    status = 404
    title = "Not found"
    slug = "not-found"


class RequestTimeout(ServiceError):
    status = 408
    title = "Request timeout"
    slug = "request-timeout"


class Conflict(ServiceError):
    status = 409
    title = "Conflict"
    slug = "conflict"


class PayloadTooLarge(ServiceError):
    status = 413
    title = "Payload too large"
    slug = "payload-too-large"


class UnsupportedMediaType(ServiceError):
    status = 415
    title = "Unsupported media type"
    slug = "unsupported-media-type"


class InvalidInput(ServiceError):
    """Below the HTTP layer a failure's ``loc`` starts at the field (``("scores", 17)``); the
    layer that knows where the client put each field adds the place (:mod:`app.api.places`)."""

    status = 422
    title = "Invalid input"
    slug = "invalid-input"


class ClientGone(ServiceError):
    """The client disconnected before its job ended: nobody is there to read an answer."""

    status = 499
    title = "Client closed request"
    slug = "client-gone"


class DatabaseUnavailable(ServiceError):
    status = 503
    title = "Database unavailable"
    slug = "database-unavailable"
    retry_after_seconds = 5


class Busy(ServiceError):
    """The jobs waiting and running already hold the memory budget of waiting work (or the
    queue is at its length limit): come back shortly."""

    status = 503
    title = "Busy"
    slug = "busy"
    retry_after_seconds = 2


class OverBudget(ServiceError):
    """A job ran past its time budget and was stopped; nothing it would have written was."""

    status = 503
    title = "Over the time budget"
    slug = "over-budget"
    retry_after_seconds = 30


class FitUnderWay(ServiceError):
    """Another request's fit under the same idempotency key ran past the time this one could
    wait for it, or took the key over from this one: its version is answered to a retry once
    it is stored."""

    status = 503
    title = "Fit under way"
    slug = "fit-under-way"
    retry_after_seconds = 5


class WorkerLost(ServiceError):
    """The worker process running the job died (killed, out of memory): nothing was stored,
    another process takes the next job."""

    status = 503
    title = "Worker lost"
    slug = "worker-lost"
    retry_after_seconds = 5


class ShuttingDown(ServiceError):
    """The server was stopping (SIGTERM) and the request was still running when its grace
    period ended: another replica, or this one restarted, takes it again."""

    status = 503
    title = "Shutting down"
    slug = "shutting-down"
    retry_after_seconds = 1


class OverMemory(PayloadTooLarge):
    """A job needed more memory than one job may take: the same request would fail again."""

    title = "Over the memory limit"
    slug = "over-memory"


class SignInUnavailable(ServiceError):
    """Keys are configured but no secret every worker shares signs the web view's sessions."""

    status = 503
    title = "Sign-in unavailable"
    slug = "sign-in-unavailable"


class ObjectStoreUnavailable(ServiceError):
    """A version's blob in object storage (``CALIBRATION_BLOB_URL``) could not be read: the
    bucket did not answer, or the object is missing or fails its sha256 check. Logged; a
    retry helps only in the first case."""

    status = 503
    title = "Object store unavailable"
    slug = "object-store-unavailable"
    retry_after_seconds = 5


class StoredDataCorrupt(ServiceError):
    """A stored artifact or batch failed its integrity check: the database was altered."""

    status = 500
    title = "Stored version is corrupt"
    slug = "stored-data-corrupt"


class NotExportable(ServiceError):
    """A version whose ONNX graph would not answer as its predict does (a defect of ours, so
    no export is better than a wrong one), or a method without a graph."""

    status = 501
    title = "Not exportable"
    slug = "not-exportable"


def invalid(loc: Sequence[str | int], msg: str) -> InvalidInput:
    """A 422 whose detail reads ``field[index] msg`` (``msg`` alone for an empty ``loc``: the
    request's body or query as a whole)."""
    detail = f"{describe_loc(loc)} {msg}" if loc else msg
    return InvalidInput(detail, errors=(FieldError(tuple(loc), msg),))


def describe_loc(loc: Sequence[str | int]) -> str:
    """``("labels", 17)`` → ``labels[17]``; ``("params", "targets")`` → ``params.targets``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text
