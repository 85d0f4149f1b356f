"""The service's Prometheus metrics, and their exposition for ``GET /metrics``.

Every metric recorded here is a counter or a histogram: with several uvicorn workers
(``python -m app.serve`` sets ``PROMETHEUS_MULTIPROC_DIR``), each process writes its samples to
files there and a scrape sums them over every process that ever ran, whichever worker answers
it. prometheus-client's gauges are avoided on purpose: their per-process values do not add up,
uvicorn has no hook to mark a worker dead, and a series once written is never removed. The one
set of gauges, the live calibration of each calibrator's traffic, is a snapshot that one
process computes and every process exports (:mod:`app.observability.live_gauges`).
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector

from .live_gauges import LiveCollector, multiprocess_directory

__all__ = [
    "CONTENT_TYPE_LATEST",
    "exposition",
    "record_artifact_cache",
    "record_fit",
    "record_predictions",
    "record_request",
    "record_traffic",
]

# ``*_created`` series exist only in single-process mode; leave them out so both read alike.
disable_created_metrics()  # type: ignore[no-untyped-call]

HTTP_REQUESTS = Counter(
    "calibration_http_requests",
    "HTTP requests answered, by method, route template and status code.",
    ["method", "route", "status"],
)
HTTP_REQUEST_SECONDS = Histogram(
    "calibration_http_request_duration_seconds",
    "Time from a request's arrival to the end of its response, by method and route template.",
    ["method", "route"],
    # The predict hot path answers in well under a millisecond; fits take seconds.
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
FITS = Counter(
    "calibration_fits",
    "Versions fitted and stored, by requested method (auto counts as auto).",
    ["method"],
)
FIT_SECONDS = Histogram(
    "calibration_fit_duration_seconds",
    "Time to fit, cross-validate and store one version, by requested method.",
    ["method"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
PREDICTIONS = Counter(
    "calibration_predictions",
    "Scores (rows) calibrated by predict, hot path and regular route, by the version's method.",
    ["method"],
)
TRAFFIC = {
    "logged": Counter(
        "calibration_traffic_logged", "Predictions sent with ids and written to the log."
    ),
    "duplicate": Counter(
        "calibration_traffic_duplicates",
        "Predictions whose id was already logged for that calibrator (the first record kept).",
    ),
    "discarded": Counter(
        "calibration_traffic_discarded",
        "Predictions not logged because the version that answered them was deleted before "
        "they were written (a deleted calibrator's traffic goes with it).",
    ),
    "dropped": Counter(
        "calibration_traffic_dropped",
        "Predictions sent with ids that were never logged: the buffer was full while the "
        "database was slow or down.",
    ),
}
ARTIFACT_CACHE = Counter(
    "calibration_artifact_cache",
    "Lookups of a version's fitted calibrator: hit = already decoded in memory, "
    "miss = artifact read from the database and decoded.",
    ["result"],
)


# Children by label values, looked up without ``labels()``'s lock and validation: the labels
# are bounded (route templates, not paths), and the predict hot path counts every microsecond.
_request_children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
_prediction_children: dict[str, Counter] = {}
_cache_children = {True: ARTIFACT_CACHE.labels("hit"), False: ARTIFACT_CACHE.labels("miss")}

LIVE_GAUGES = LiveCollector()
REGISTRY.register(LIVE_GAUGES)


def record_request(method: str, route: str, status: int, seconds: float) -> None:
    """Count one answered request and its duration."""
    key = (method, route, status)
    children = _request_children.get(key)
    if children is None:
        children = (
            HTTP_REQUESTS.labels(method, route, str(status)),
            HTTP_REQUEST_SECONDS.labels(method, route),
        )
        _request_children[key] = children
    children[0].inc()
    children[1].observe(seconds)


def record_fit(method: str, seconds: float) -> None:
    """Count one stored version and how long it took."""
    FITS.labels(method).inc()
    FIT_SECONDS.labels(method).observe(seconds)


def record_predictions(method: str, n_scores: int) -> None:
    """Count ``n_scores`` calibrated scores (rows, for a multiclass batch)."""
    child = _prediction_children.get(method)
    if child is None:
        child = _prediction_children[method] = PREDICTIONS.labels(method)
    child.inc(n_scores)


def record_artifact_cache(*, hit: bool) -> None:
    """Count one calibrator lookup as a hit or a miss."""
    _cache_children[hit].inc()


def record_traffic(result: str, rows: int) -> None:
    """Count ``rows`` predictions sent with ids as ``logged``, ``duplicate``, ``discarded``
    or ``dropped``."""
    TRAFFIC[result].inc(rows)


def exposition() -> bytes:
    """The current metrics in Prometheus text format (:data:`CONTENT_TYPE_LATEST`).

    In multiprocess mode a fresh registry per scrape collects every worker's files and the
    live gauges' published snapshot; the default registry would only know this process.
    """
    if multiprocess_directory() is not None:
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        registry.register(LIVE_GAUGES)
        return generate_latest(registry)
    return generate_latest(REGISTRY)
