"""Each operation of the service as a :class:`~calibration_client._base.Call`: its path, its
body encoded once (its deadline taken first), and how its answer is read. An operation of
several requests (every page of the versions) is a generator of calls, fed their results
(:meth:`Operations._versions_steps`), which each client drives with its own I/O."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import httpx
from numpy.typing import ArrayLike

from calibration_client import _arrays, _inference
from calibration_client._base import BaseClient, Call, Progress
from calibration_client._batches import (
    BatchTransport,
    Body,
    QueryValue,
    dumps,
    dumps_fast,
    file_body,
    loads,
)
from calibration_client._batches import labelled_body as _labelled_body
from calibration_client._types import Comparison, Diagnostics, OutcomeReceipt, Prediction, Version

T = TypeVar("T")
PredictTransport = Literal["auto", "json", "binary"]
Selector = int | str
Batch = tuple[ArrayLike, ArrayLike, ArrayLike | None]
VersionsPage = tuple[list[Version], int]
_KEY = re.compile(r"[\x20-\x7e]{1,128}")  # the service's Idempotency-Key: printable ASCII
_PNG = b"\x89PNG\r\n\x1a\n"


_PLAIN = re.compile(r"[A-Za-z0-9._-]+")
"""Path segments that need no quoting: every valid name, number, alias and route word."""


def _path(name: str, *rest: Selector) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a calibrator's name, not {name!r}")
    parts = [_segment(str(p)) for p in (name, *rest)]
    return "/v1/calibrators/" + "/".join(parts)


def _segment(part: str) -> str:
    return part if _PLAIN.fullmatch(part) else quote(part, safe="")


def _fit_key(idempotency_key: str | None) -> str:
    key = idempotency_key if idempotency_key is not None else f"fit-{uuid.uuid4().hex}"
    if not _KEY.fullmatch(key):
        raise ValueError("idempotency_key must be 1 to 128 printable ASCII characters")
    return key


def fit_options(
    method: str | None,
    params: Mapping[str, Any] | None,
    description: str | None,
    tags: Mapping[str, str] | None,
) -> dict[str, Any]:
    return {
        "method": method,
        "params": None if params is None else dict(params),
        "description": description or None,
        "tags": None if tags is None else dict(tags),
    }


def report_options(
    n_bins: int | str, strategy: str | None, bootstrap: int | None, class_index: int | None
) -> dict[str, Any]:
    """A diagnostics report's options, as its JSON and its picture take them."""
    return {
        "n_bins": n_bins,
        "strategy": strategy,
        "bootstrap": bootstrap,
        "class_index": class_index,
    }


def _png(response: httpx.Response) -> bytes:
    if not response.content.startswith(_PNG):
        raise ValueError("the answer is not a PNG image")
    return response.content


class Operations(BaseClient):
    """The service's operations as calls; :class:`Client` and :class:`AsyncClient` send
    them."""

    def _fit_call(
        self,
        name: str,
        batch: Batch,
        options: Mapping[str, Any],
        idempotency_key: str | None,
        transport: BatchTransport,
        timeout: float | None,
    ) -> Call[Version]:
        deadline = self._deadline(timeout)
        key = _fit_key(idempotency_key)
        body = self._batch(batch, options, transport)
        return self._fit(name, body, key, deadline, None)

    def _fit_file_call(
        self,
        name: str,
        path: str | os.PathLike[str],
        options: Mapping[str, Any],
        idempotency_key: str | None,
        timeout: float | None,
        progress: Progress | None,
    ) -> Call[Version]:
        deadline = self._deadline(timeout)
        key = _fit_key(idempotency_key)
        return self._fit(name, file_body(Path(path), options), key, deadline, progress)

    def _fit(
        self, name: str, body: Body, key: str, deadline: float, progress: Progress | None
    ) -> Call[Version]:
        headers = {**body.headers, "Idempotency-Key": key}
        read = lambda r: Version.from_json(loads(r.content))  # noqa: E731
        path = _path(name, "fit")
        return Call("POST", path, read, deadline, body.params, body.content, headers, progress)

    def _predict_call(
        self,
        name: str,
        scores: ArrayLike,
        version: Selector | None,
        ids: Sequence[str] | None,
        intervals: bool,
        threshold: float | None,
        transport: PredictTransport,
        timeout: float | None,
        progress: Progress | None,
    ) -> Call[Prediction]:
        deadline = self._deadline(timeout)
        values = _arrays.as_scores(scores)
        plain = ids is None and not intervals and threshold is None
        if transport not in ("auto", "json", "binary") or (transport == "binary" and not plain):
            raise ValueError(
                f"transport {transport!r}: auto, json, or binary without ids/intervals/threshold"
            )
        if transport == "binary" or (
            transport == "auto" and plain and len(values) >= self.bulk_rows
        ):
            content, headers = _inference.infer_body(values)
            path = _inference.infer_path(name, version)
            read = lambda r: _inference.read_infer(name, r)  # noqa: E731
            return Call("POST", path, read, deadline, None, content, headers, progress)
        document: dict[str, Any] = {"scores": values}
        if version is not None:
            document["version"] = version
        if ids is not None:
            document["ids"] = _arrays.as_ids(ids, len(values))
        if intervals:
            document["intervals"] = True
        if threshold is not None:
            document["threshold"] = threshold
        read_json = lambda r: Prediction.from_json(loads(r.content))  # noqa: E731
        headers = {"Content-Type": "application/json"}
        content = dumps_fast(document)  # nothing depends on a predict's exact bytes
        path = _path(name, "predict")
        return Call("POST", path, read_json, deadline, None, content, headers, progress)

    def _outcomes_call(
        self,
        name: str,
        ids: Sequence[str],
        labels: ArrayLike,
        overwrite: bool,
        timeout: float | None,
    ) -> Call[OutcomeReceipt]:
        deadline = self._deadline(timeout)
        id_list = _arrays.as_ids(ids, len(ids))
        values = _arrays.as_labels(labels, len(id_list), of="ids")
        read = lambda r: OutcomeReceipt.from_json(loads(r.content))  # noqa: E731
        params = {"overwrite": "true"} if overwrite else None
        document = {"ids": id_list, "labels": values}
        return self._json_call("POST", _path(name, "outcomes"), document, read, deadline, params)

    def _version_call(self, name: str, selector: Selector, timeout: float | None) -> Call[Version]:
        read = lambda r: Version.from_json(loads(r.content))  # noqa: E731
        return Call("GET", _path(name, "versions", selector), read, self._deadline(timeout))

    def _versions_steps(
        self, name: str, timeout: float | None
    ) -> Generator[Call[VersionsPage], VersionsPage, list[Version]]:
        """Every version of ``name``, newest first, a page (one call) at a time."""
        found: list[Version] = []
        while True:
            page, total = yield self._versions_page_call(name, len(found), timeout)
            found += page
            if not page or len(found) >= total:
                return found

    def _versions_page_call(
        self, name: str, offset: int, timeout: float | None
    ) -> Call[VersionsPage]:
        """One page of ``name``'s versions, newest first, and how many it has in all."""

        def read(response: httpx.Response) -> VersionsPage:
            data = loads(response.content)
            return [Version.from_json(v) for v in data["versions"]], int(data["n_versions"])

        params = {"limit": "1000", "offset": str(offset)}
        return Call("GET", _path(name), read, self._deadline(timeout), params)

    def _alias_call(
        self, name: str, alias: str, version: int, timeout: float | None
    ) -> Call[Version]:
        read = lambda r: Version.from_json(loads(r.content))  # noqa: E731
        path = _path(name, "aliases", alias)
        document = {"version": int(version)}
        return self._json_call("PUT", path, document, read, self._deadline(timeout))

    def _diagnostics_call(
        self,
        name: str,
        selector: Selector,
        options: Mapping[str, Any],
        scores: ArrayLike | None,
        labels: ArrayLike | None,
        sample_weight: ArrayLike | None,
        transport: BatchTransport,
        timeout: float | None,
    ) -> Call[Diagnostics]:
        deadline = self._deadline(timeout)
        path = _path(name, "versions", selector, "diagnostics")
        read = lambda r: Diagnostics.from_json(loads(r.content))  # noqa: E731
        if scores is None and labels is None:  # the stored version's (out-of-fold) own
            if sample_weight is not None:
                raise ValueError("sample_weight goes with scores and labels")
            return Call("GET", path, read, deadline, _query(options))
        if scores is None or labels is None:
            raise ValueError("scores and labels go together: give both or neither")
        body = self._batch((scores, labels, sample_weight), options, transport)
        return Call("POST", path, read, deadline, body.params, body.content, body.headers)

    def _diagnostics_png_call(
        self, name: str, selector: Selector, options: Mapping[str, Any], timeout: float | None
    ) -> Call[bytes]:
        path = _path(name, "versions", selector) + "/diagnostics.png"
        return Call("GET", path, _png, self._deadline(timeout), _query(options))

    def _compare_call(
        self,
        name: str,
        batch: Batch,
        versions: Sequence[Selector] | None,
        by: str,
        bootstrap: int | None,
        transport: BatchTransport,
        timeout: float | None,
    ) -> Call[Comparison]:
        deadline = self._deadline(timeout)
        options = {"versions": None if versions is None else list(versions), "bootstrap": bootstrap}
        body = self._batch(batch, options, transport)
        read = lambda r: Comparison.from_json(loads(r.content))  # noqa: E731
        params = {**body.params, "by": by}
        path = _path(name, "compare")
        return Call("POST", path, read, deadline, params, body.content, body.headers)

    def _batch(self, batch: Batch, options: Mapping[str, Any], transport: BatchTransport) -> Body:
        scores, labels, sample_weight = batch
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
        deadline: float,
        params: Mapping[str, QueryValue] | None = None,
    ) -> Call[T]:
        headers = {"Content-Type": "application/json"}
        return Call(method, path, read, deadline, params, dumps(document), headers)


def _query(options: Mapping[str, Any]) -> dict[str, QueryValue]:
    return {key: str(value) for key, value in options.items() if value is not None}
