"""What :class:`~calibration_client.Client` and :class:`~calibration_client.AsyncClient`
share: each operation as a :class:`Call` (the request to send and how to read its answer),
the requests' headers and deadline, and the retry decision. The two differ only in how they
send and sleep (openai-python's ``_base_client.py`` shape).

Every operation is safe to retry, so each is: GETs and the alias PUT are idempotent;
predict is pure (with ``ids`` the first record of an id wins); outcomes repeated are counted
as duplicates, not stored twice; diagnostics and compare POSTs store nothing; and a fit
always carries an ``Idempotency-Key`` (generated when not given), under which the service
answers the version the first attempt created, also after a read timeout."""

from __future__ import annotations

import random
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx

from calibration_client import _arrays, _inference
from calibration_client._batches import BULK_ROWS, BatchTransport, Body, QueryValue, dumps
from calibration_client._batches import labelled_body as _labelled_body
from calibration_client._errors import (
    APITimeoutError,
    CalibrationError,
    connection_error,
    error_from_response,
)
from calibration_client._retry import RetryPolicy
from calibration_client._types import Comparison, Diagnostics, OutcomeReceipt, Prediction, Version
from calibration_client._version import __version__

T = TypeVar("T")
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
PredictTransport = Literal["auto", "json", "binary"]
Selector = int | str
_KEY = re.compile(r"^[\x20-\x7e]{1,128}$")  # the service's Idempotency-Key: printable ASCII


@dataclass(frozen=True)
class Call(Generic[T]):
    """One operation: its request, how to read a successful answer, its own timeout."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: Mapping[str, QueryValue] | None = None
    content: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None


def _path(name: str, *rest: Selector) -> str:
    parts = [quote(str(p), safe="") for p in (name, *rest)]
    return "/v1/calibrators/" + "/".join(parts)


class BaseClient:
    """Configuration and request building of a client; no I/O."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        timeout: float = 30.0,
        retries: int = 3,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.bulk_rows = BULK_ROWS
        self._policy = RetryPolicy(retries=retries)
        # clocks and the jitter's draw are attributes so that tests can make them fake
        self._clock: Callable[[], float] = time.monotonic
        self._wall: Callable[[], float] = time.time
        self._uniform: Callable[[], float] = random.random

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    # -- sending, shared by both loops --------------------------------------------------

    def _deadline(self, call: Call[Any]) -> float:
        return self._clock() + (self.timeout if call.timeout is None else call.timeout)

    def _request(
        self, http: httpx.Client | httpx.AsyncClient, call: Call[Any], deadline: float
    ) -> httpx.Request:
        """The attempt's request, its timeout the time left (APITimeoutError when none)."""
        left = deadline - self._clock()
        if left <= 0:
            raise APITimeoutError("the call's timeout passed before an answer came")
        headers = {"User-Agent": f"calibration-client/{__version__}", **call.headers}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return http.build_request(
            call.method,
            self.base_url + call.path,
            params=call.params,
            content=call.content,
            headers=headers,
            timeout=left,
        )

    def _answer_error(self, response: httpx.Response) -> CalibrationError:
        return error_from_response(response)

    def _failed(self, exc: httpx.TransportError) -> CalibrationError:
        error = connection_error(exc)
        error.__cause__ = exc
        return error

    def _wait(self, error: CalibrationError, attempt: int, deadline: float) -> float | None:
        """Seconds to sleep before the next attempt, or None to raise ``error``."""
        left = deadline - self._clock()
        return self._policy.wait(error, attempt, left, self._uniform, self._wall)

    # -- the operations ---------------------------------------------------------------

    def _fit_call(
        self,
        name: str,
        scores: Any,
        labels: Any,
        method: str,
        params: Mapping[str, Any] | None,
        sample_weight: Any,
        description: str,
        tags: Mapping[str, str] | None,
        idempotency_key: str | None,
        transport: BatchTransport,
        timeout: float | None,
    ) -> Call[Version]:
        key = idempotency_key if idempotency_key is not None else f"fit-{uuid.uuid4().hex}"
        if not _KEY.match(key):
            raise ValueError("idempotency_key must be 1 to 128 printable ASCII characters")
        options = {
            "method": method,
            "params": None if params is None else dict(params),
            "description": description or None,
            "tags": None if tags is None else dict(tags),
        }
        body = self._batch(scores, labels, sample_weight, options, transport)
        headers = {"Content-Type": body.content_type, "Idempotency-Key": key}
        return Call(
            "POST",
            _path(name, "fit"),
            lambda r: Version.from_json(r.json()),
            body.params,
            body.content,
            headers,
            timeout,
        )

    def _predict_call(
        self,
        name: str,
        scores: Any,
        version: Selector | None,
        ids: Sequence[str] | None,
        intervals: bool,
        transport: PredictTransport,
        timeout: float | None,
    ) -> Call[Prediction]:
        values = _arrays.as_scores(scores)
        plain = ids is None and not intervals
        if transport not in ("auto", "json", "binary") or (transport == "binary" and not plain):
            raise ValueError(
                f"transport {transport!r}: auto, json, or binary without ids/intervals"
            )
        if transport == "binary" or (
            transport == "auto" and plain and len(values) >= self.bulk_rows
        ):
            content, headers = _inference.infer_body(values)
            path = _inference.infer_path(name, version)
            read = lambda r: _inference.read_infer(name, r)  # noqa: E731
            return Call("POST", path, read, None, content, headers, timeout)
        document: dict[str, Any] = {"scores": values}
        if version is not None:
            document["version"] = version
        if ids is not None:
            document["ids"] = _arrays.as_ids(ids, len(values))
        if intervals:
            document["intervals"] = True
        read_json = lambda r: Prediction.from_json(r.json())  # noqa: E731
        return self._json_call("POST", _path(name, "predict"), document, read_json, timeout)

    def _outcomes_call(
        self, name: str, ids: Any, labels: Any, overwrite: bool, timeout: float | None
    ) -> Call[OutcomeReceipt]:
        id_list = _arrays.as_ids(ids, len(ids))
        values = _arrays.as_labels(labels, len(id_list), of="ids")
        read = lambda r: OutcomeReceipt.from_json(r.json())  # noqa: E731
        params = {"overwrite": "true"} if overwrite else None
        path = _path(name, "outcomes")
        return self._json_call(
            "POST", path, {"ids": id_list, "labels": values}, read, timeout, params
        )

    def _version_call(self, name: str, selector: Selector, timeout: float | None) -> Call[Version]:
        read = lambda r: Version.from_json(r.json())  # noqa: E731
        return Call("GET", _path(name, "versions", selector), read, timeout=timeout)

    def _versions_page_call(
        self, name: str, offset: int, timeout: float | None
    ) -> Call[tuple[list[Version], int]]:
        """One page of ``name``'s versions, newest first, and how many it has in all."""

        def read(response: httpx.Response) -> tuple[list[Version], int]:
            data = response.json()
            return [Version.from_json(v) for v in data["versions"]], int(data["n_versions"])

        params = {"limit": "1000", "offset": str(offset)}
        return Call("GET", _path(name), read, params, timeout=timeout)

    def _alias_call(
        self, name: str, alias: str, version: int, timeout: float | None
    ) -> Call[Version]:
        read = lambda r: Version.from_json(r.json())  # noqa: E731
        path = _path(name, "aliases", alias)
        return self._json_call("PUT", path, {"version": int(version)}, read, timeout)

    def _diagnostics_call(
        self,
        name: str,
        selector: Selector,
        options: Mapping[str, Any],
        batch: tuple[Any, Any, Any] | None,
        transport: BatchTransport,
        timeout: float | None,
    ) -> Call[Diagnostics]:
        path = _path(name, "versions", selector, "diagnostics")
        read = lambda r: Diagnostics.from_json(r.json())  # noqa: E731
        if batch is None:  # the stored version's own (out-of-fold) diagnostics
            given = {k: str(v) for k, v in options.items() if v is not None}
            return Call("GET", path, read, given, timeout=timeout)
        body = self._batch(*batch, options, transport)
        headers = {"Content-Type": body.content_type}
        return Call("POST", path, read, body.params, body.content, headers, timeout)

    def _compare_call(
        self,
        name: str,
        batch: tuple[Any, Any, Any],
        versions: Sequence[Selector] | None,
        by: str,
        bootstrap: int | None,
        transport: BatchTransport,
        timeout: float | None,
    ) -> Call[Comparison]:
        options = {"versions": None if versions is None else list(versions), "bootstrap": bootstrap}
        body = self._batch(*batch, options, transport)
        read = lambda r: Comparison.from_json(r.json())  # noqa: E731
        params = {**body.params, "by": by}
        headers = {"Content-Type": body.content_type}
        return Call("POST", _path(name, "compare"), read, params, body.content, headers, timeout)

    def _given_batch(
        self, scores: Any, labels: Any, sample_weight: Any
    ) -> tuple[Any, Any, Any] | None:
        """The optional labelled batch of a call such as diagnostics: both arrays or none."""
        if scores is None and labels is None:
            if sample_weight is not None:
                raise ValueError("sample_weight goes with scores and labels")
            return None
        if scores is None or labels is None:
            raise ValueError("scores and labels go together: give both or neither")
        return scores, labels, sample_weight

    def _batch(
        self,
        scores: Any,
        labels: Any,
        sample_weight: Any,
        options: Mapping[str, Any],
        transport: BatchTransport,
    ) -> Body:
        values = _arrays.as_scores(scores)
        rows = len(values)
        label_values = _arrays.as_labels(labels, rows)
        weights = None if sample_weight is None else _arrays.as_weights(sample_weight, rows)
        return _labelled_body(values, label_values, weights, options, transport, self.bulk_rows)

    def _json_call(
        self,
        method: str,
        path: str,
        document: Mapping[str, Any],
        read: Callable[[httpx.Response], T],
        timeout: float | None,
        params: Mapping[str, QueryValue] | None = None,
    ) -> Call[T]:
        headers = {"Content-Type": "application/json"}
        return Call(method, path, read, params, dumps(document), headers, timeout)
