"""The problem types the service answers with: one per kind of problem, each a page.

Every problem+json answer's ``type`` is ``/problems/{slug}`` (RFC 9457 §3.1.1: a URI that
identifies the problem type and, dereferenced, documents it for a person). The domain errors
carry their slug (:mod:`app.errors`); the few problems found below the application (an unknown
route, a request the HTTP parser refused) have theirs here. :data:`PROBLEM_TYPES` holds the
page of each: what it means and how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass

from app import errors

UNKNOWN_ROUTE = "unknown-route"
METHOD_NOT_ALLOWED = "method-not-allowed"
LARGE_HEADERS = "headers-too-large"
MALFORMED_REQUEST = "malformed-request"
HTTP_ERROR = "http-error"


@dataclass(frozen=True)
class ProblemType:
    """One problem type: its slug, title, the statuses it is sent with, and its page's text."""

    slug: str
    title: str
    statuses: tuple[int, ...]
    """The statuses it is sent with; empty: whatever status the HTTP layer chose."""
    meaning: str
    fix: str

    @property
    def uri(self) -> str:
        """The ``type`` of its problem documents: a path of this service."""
        return type_uri(self.slug)


def type_uri(slug: str, root_path: str = "") -> str:
    """``/problems/{slug}`` below the proxy prefix ``root_path`` (``scope["root_path"]``): a
    relative URI, resolved against the request's own URL."""
    return f"{root_path.rstrip('/')}/problems/{slug}"


def _of(error: type[errors.ServiceError], meaning: str, fix: str) -> ProblemType:
    return ProblemType(error.slug, error.title, (error.status,), meaning, fix)


PROBLEM_TYPES: dict[str, ProblemType] = {
    problem.slug: problem
    for problem in (
        _of(
            errors.MalformedBody,
            "The body could not be read at all: not JSON, not an object, empty, a CSV that is "
            "not UTF-8, or a Parquet or Arrow stream that does not decode.",
            "Send the body in one of the documented media types, with a matching "
            "Content-Type; `detail` says what the parser found.",
        ),
        _of(
            errors.Unauthorized,
            "The route needs an API key and none was sent, or the one sent is not configured.",
            "Send `Authorization: Bearer <key>`. Keys are made with `python -m app.keys`; the "
            "server lists their SHA-256 in CALIBRATION_API_KEYS.",
        ),
        _of(
            errors.Forbidden,
            "The key is valid but its scope does not cover the route: a read key on a route "
            "that fits, deletes or moves an alias.",
            "Use a key of scope `write` for routes that change what is stored.",
        ),
        _of(
            errors.CrossSiteRequest,
            "A form of the web view (/ui: the key form, sign-out) was posted from a page of "
            "another site, or the browser could not show that it came from this one "
            "(`Sec-Fetch-Site`, else `Origin`). It is refused so that no other site can sign "
            "you in or out (cross-site request forgery).",
            "Open the web view at the address the service is served from and use its own "
            "form. Behind a reverse proxy, pass the client's `Host` header with its port "
            "(nginx: `proxy_set_header Host $http_host;`).",
        ),
        _of(
            errors.NotFound,
            "The calibrator, version or alias named in the URL does not exist (or was deleted).",
            "List what exists with `GET /v1/calibrators` and `GET /v1/calibrators/{name}`; a "
            "selector is a version number, `latest` or an alias.",
        ),
        _of(
            errors.RequestTimeout,
            "The request body stalled: no part of it arrived within the body idle timeout "
            "(CALIBRATION_BODY_TIMEOUT_SECONDS), or it arrived more slowly than the body "
            "minimum rate (CALIBRATION_BODY_MIN_RATE_BYTES a second, after that timeout).",
            "Send the body without pauses and at network speed, or ask the operator for a "
            "longer timeout or a lower minimum rate.",
        ),
        _of(
            errors.Conflict,
            "The request contradicts what is stored: deleting a version an alias points to, or "
            "an outcome that differs from the one already recorded for an id.",
            "Move or delete the alias first (or delete with `?force=true`); for outcomes, send "
            "`?overwrite=true` if the new label is the right one.",
        ),
        _of(
            errors.PayloadTooLarge,
            "The body, the batch's rows or an inflated (gzip) body is above the configured "
            "limits (CALIBRATION_MAX_BODY_BYTES, CALIBRATION_MAX_BATCH_ROWS).",
            "Split the batch into smaller requests, or sample it; `detail` gives the limit.",
        ),
        _of(
            errors.UnsupportedMediaType,
            "The Content-Type is not one this route reads.",
            "Send `application/json`, `text/csv`, `multipart/form-data` (a `file` field), "
            "`application/vnd.apache.parquet` or `application/vnd.apache.arrow.stream`, as the "
            "route documents in /docs.",
        ),
        _of(
            errors.InvalidInput,
            "The body or query was read but its content is invalid: a wrong field, a length "
            "mismatch, a NaN, a label outside the allowed set, a single class, a method that "
            "does not take these scores. Nothing was stored.",
            "Fix what `detail` names; `errors` lists each problem with its location "
            '(`loc`, e.g. `["body", "scores", 17]`) and message.',
        ),
        _of(
            errors.ClientGone,
            "The client disconnected before its job ended; the job was stopped. This status "
            "appears in the server's logs only: nobody was there to receive it.",
            "Wait for the answer: keep the connection open for as long as the job takes.",
        ),
        _of(
            errors.DatabaseUnavailable,
            "The database did not answer in time. The request changed nothing.",
            "Retry after the `Retry-After` seconds; if it persists, the operator should check "
            "the database (`GET /readyz` answers 503 meanwhile).",
        ),
        _of(
            errors.Busy,
            "The jobs already waiting hold the memory the service sets aside for waiting work "
            "(CALIBRATION_QUEUE_MEMORY_MB: their bodies' bytes), or the queue is at its length "
            "limit (CALIBRATION_MAX_QUEUED_FITS); the detail says which.",
            "Retry after the `Retry-After` seconds, or send fewer large bodies at once.",
        ),
        _of(
            errors.FitUnderWay,
            "A fit sent with the same Idempotency-Key is still running, longer than this "
            "request could wait for it; or this request's fit stopped renewing its claim of the "
            "key and another request with the key took it over (nothing of this one is stored).",
            "Send the request again, with the same key, after the `Retry-After` seconds: it "
            "answers that fit's version once it is stored.",
        ),
        _of(
            errors.WorkerLost,
            "The worker process running the job died (killed, or out of memory); nothing was "
            "stored, and another process takes the next job.",
            "Retry after the `Retry-After` seconds; if the same request loses its worker again, "
            "send a smaller batch.",
        ),
        _of(
            errors.ShuttingDown,
            "The server was stopping and this request was still running when its grace "
            "period for requests in flight (CALIBRATION_SHUTDOWN_GRACE_SECONDS) ended. Any job "
            "it started was stopped; a change that had already reached its commit was stored.",
            "Retry after the `Retry-After` seconds (another replica, or this one restarted, "
            "answers); before retrying a fit, list the calibrator's versions to see whether it "
            "was stored.",
        ),
        _of(
            errors.OverMemory,
            "The job needed more memory than one job may take (CALIBRATION_JOB_MEMORY_MB), so "
            "it was stopped; nothing was stored. The same request would fail again.",
            "Send a smaller batch, or ask the operator for a larger limit.",
        ),
        _of(
            errors.SignInUnavailable,
            "The service has API keys, so the web view (/ui) needs a session, and sessions are "
            "signed with a secret every worker and replica shares; none is configured. (One "
            "worker on a loopback address signs with a secret of its own.)",
            "Set CALIBRATION_UI_SECRET, at least 32 characters, the same on every replica, "
            "and restart. The API itself is unaffected.",
        ),
        _of(
            errors.ObjectStoreUnavailable,
            "The version's artifact or fitting batch lives in object storage "
            "(CALIBRATION_BLOB_URL) and could not be read: the bucket did not answer, or the "
            "object is missing or fails its sha256 check; the detail says which object. "
            "Nothing was changed.",
            "Retry after the `Retry-After` seconds when the bucket was unreachable (`GET "
            "/readyz` answers 503 meanwhile). A missing or altered object will not come back "
            "by itself: the operator restores it from the bucket's versioning or a backup.",
        ),
        _of(
            errors.OverBudget,
            "The job ran past its time budget (CALIBRATION_FIT_TIMEOUT_SECONDS) and was "
            "stopped; nothing it would have written was stored.",
            "Send a smaller batch, choose a faster method than `auto`, ask for fewer bootstrap "
            "resamples, or ask the operator for a larger budget.",
        ),
        _of(
            errors.StoredDataCorrupt,
            "A stored artifact or batch failed its integrity check (sha256): the database was "
            "altered outside the service.",
            "Tell the operator; fit a new version, which does not read the damaged one.",
        ),
        _of(
            errors.NotExportable,
            "This version has no ONNX graph that answers as predict does (the method has none, "
            "or the graph's parity check failed).",
            "Use the JSON artifact (`.../artifact`) or predict over HTTP for this version.",
        ),
        _of(
            errors.ServiceError,
            "Something failed that the service did not expect. It has been logged with the "
            "request's X-Request-ID.",
            "Retry once; if it happens again, report it with the X-Request-ID of the answer.",
        ),
        ProblemType(
            UNKNOWN_ROUTE,
            "Not Found",
            (404,),
            "No route or page of the service answers at this path.",
            "Check the path against /docs; calibrator routes start with `/v1/calibrators`.",
        ),
        ProblemType(
            METHOD_NOT_ALLOWED,
            "Method Not Allowed",
            (405,),
            "The path exists, but not with this HTTP method.",
            "See /docs for the methods the path takes (the `Allow` header lists them too).",
        ),
        ProblemType(
            LARGE_HEADERS,
            "Request header fields too large",
            (431,),
            "The request line and headers exceed 64 KiB; the connection was closed.",
            "Send shorter headers (cookies, tokens) or fewer of them.",
        ),
        ProblemType(
            MALFORMED_REQUEST,
            "Malformed request",
            (400,),
            "The request is not valid HTTP/1.1 (its framing or headers could not be parsed); "
            "the connection was closed.",
            "Use an HTTP client library rather than writing requests by hand.",
        ),
        ProblemType(
            HTTP_ERROR,
            "HTTP error",
            (),
            "The HTTP layer refused the request before the service read it; `status` and "
            "`detail` say why.",
            "Fix what `detail` names.",
        ),
    )
}
