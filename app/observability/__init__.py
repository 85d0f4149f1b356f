"""What the service tells its operators: Prometheus metrics and one-line JSON logs.

The HTTP side (the middleware that counts, times and logs each request) is
:mod:`app.api.request_log`, installed by :func:`app.main.create_app`; this package's
top level is what the rest of the service records through, and knows no HTTP.
"""

from .live_gauges import Leadership, LiveSnapshot, LiveValues, publish_live, published_live
from .logs import JsonFormatter, LogFormat, TextFormatter, configure_logging, current_request_id
from .metrics import (
    CONTENT_TYPE_LATEST,
    exposition,
    record_artifact_cache,
    record_fit,
    record_predictions,
    record_request,
    record_traffic,
)

__all__ = [
    "CONTENT_TYPE_LATEST",
    "JsonFormatter",
    "Leadership",
    "LiveSnapshot",
    "LiveValues",
    "LogFormat",
    "TextFormatter",
    "configure_logging",
    "current_request_id",
    "exposition",
    "publish_live",
    "published_live",
    "record_artifact_cache",
    "record_fit",
    "record_predictions",
    "record_request",
    "record_traffic",
]
