"""Log lines: one JSON object per line (or readable text), each with its request id.

:data:`current_request_id` is set by :class:`app.api.request_id.RequestIdMiddleware` for the
whole request, threadpool work included (Starlette copies the context into it), so any
``logger.info`` made while answering a request carries the id without being handed it.
Structured fields go in ``extra={"fields": {...}}``.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

LogFormat = Literal["json", "text"]

current_request_id: ContextVar[str | None] = ContextVar("current_request_id", default=None)
"""The id of the request being answered in this context, if any."""

_OURS = "_calibration_handler"
"""Marks the root handler :func:`configure_logging` installed, so a second call replaces it."""


def _request_id(record: logging.LogRecord) -> str | None:
    given = getattr(record, "request_id", None)
    return given if isinstance(given, str) else current_request_id.get()


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, dict) else {}


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", "request_id"?, ...fields, "exc"?}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        request_id = _request_id(record)
        if request_id is not None:
            line["request_id"] = request_id
        for key, value in _fields(record).items():
            line.setdefault(key, value)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(line, default=str).decode()


class TextFormatter(logging.Formatter):
    """``time LEVEL logger message key=value ...`` for a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        pairs = dict(_fields(record))
        request_id = _request_id(record)
        if request_id is not None:
            pairs.setdefault("request_id", request_id)
        if not pairs:
            return text
        head, newline, tail = text.partition("\n")  # keep a traceback below the pairs
        extra = " ".join(f"{key}={value}" for key, value in pairs.items())
        return f"{head} {extra}{newline}{tail}"


def configure_logging(level: str, log_format: LogFormat) -> None:
    """One stderr handler on the root logger with the chosen format (idempotent).

    uvicorn's own loggers are routed through it, and its access log is silenced: the
    service writes its own access line per request (:mod:`app.api.request_log`).
    Handlers others put on the root (pytest's capture) are left alone.
    """
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(handler)
    handler = logging.StreamHandler()
    setattr(handler, _OURS, True)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    access = logging.getLogger("uvicorn.access")
    access.handlers.clear()
    access.propagate = False
