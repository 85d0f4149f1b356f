"""The blocking client: :class:`~calibration_client._calls.Operations`' calls sent with an
``httpx.Client``, retried with ``time.sleep`` between attempts."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx
from numpy.typing import ArrayLike

from calibration_client._base import DEFAULT_BASE_URL, Call, Progress
from calibration_client._batches import BatchTransport
from calibration_client._calls import PredictTransport, Selector, fit_options, report_options
from calibration_client._errors import undecodable_answer
from calibration_client._sync_traffic import SyncTraffic
from calibration_client._types import Comparison, Diagnostics, OutcomeReceipt, Prediction, Version

T = TypeVar("T")
S = TypeVar("S")

WHOLE_BYTES = 64 * 1024
"""Answers up to this long are read whole: a one-score predict's costs a third less CPU so."""


def _length(response: httpx.Response) -> int:
    """The answer's declared length; unknown or unreadable counts as long."""
    declared = response.headers.get("content-length", "")
    return int(declared) if declared.isdigit() else WHOLE_BYTES + 1


class Client(SyncTraffic):
    """A client of the calibration service.

    ``timeout`` bounds each whole call, its retries and waits included; ``retries`` is how
    many times a connection failure or a 429/503 answer is tried again (read when a call
    fails, so setting it later takes effect). A retried fit resends the same bytes under the
    same ``Idempotency-Key``; an adjust, which the service reads no key for, is retried only
    when its request cannot have reached the service. httpx bounds each connect, write and
    read of an attempt rather than the attempt, so this client also checks the deadline
    between the chunks it sends and, for answers over 64 KiB, receives: a call can overrun
    its ``timeout`` by at most one network wait when a large body trickles, but a server
    dripping its headers or a short answer a byte at a time can hold it longer;
    :class:`AsyncClient` bounds each attempt exactly.
    ``http_client`` is used as given (and left open by :meth:`close`). Nothing is sent before
    the first call."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        *,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(base_url, api_key, timeout, retries)
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.Client()
        self._sleep: Callable[[float], None] = time.sleep

    def close(self) -> None:
        """Close the connections, unless the httpx client was passed in."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, call: Call[T]) -> T:
        """Send ``call`` until it succeeds, fails for good, or its deadline comes."""
        attempt = 0
        while True:
            left = self._time_left(call.deadline)
            request = self._request(self._http, call, self._body(call), left)
            try:
                response = self._received(request, call.deadline)
            except httpx.DecodingError as exc:
                raise undecodable_answer(exc) from exc
            except httpx.TransportError as exc:
                error = self._failed(exc)
            else:
                if response.is_success:
                    return self._read(call, response)
                error = self._answer_error(response)
            wait = self._wait(error, attempt, call)
            if wait is None:
                raise error
            self._sleep(wait)
            attempt += 1

    def _received(self, request: httpx.Request, deadline: float) -> httpx.Response:
        """The attempt's answer. A body of :data:`WHOLE_BYTES` or less, which one read or a
        few bring, is read whole (as httpx reads it); a longer one, or one of unknown length,
        a chunk at a time with the deadline checked between chunks, so that a server
        trickling it cannot stretch the call (APITimeoutError once the deadline has passed)."""
        streamed = self._http.send(request, stream=True)
        try:
            if _length(streamed) <= WHOLE_BYTES:
                streamed.read()
                return streamed
            chunks: list[bytes] = []
            for chunk in streamed.iter_bytes():
                chunks.append(chunk)
                self._time_left(deadline)
        finally:
            streamed.close()
        headers = [  # the chunks are decoded already
            (k, v) for k, v in streamed.headers.multi_items() if k.lower() != "content-encoding"
        ]
        return httpx.Response(
            streamed.status_code,
            headers=headers,
            content=b"".join(chunks),
            request=request,
            extensions=streamed.extensions,
        )

    def _drive(self, steps: Generator[Call[S], S, T]) -> T:
        """Run an operation of several calls: each call's result goes back to ``steps``."""
        call = next(steps)
        while True:
            try:
                call = steps.send(self._run(call))
            except StopIteration as done:
                result: T = done.value
                return result

    def fit(
        self,
        name: str,
        scores: ArrayLike,
        labels: ArrayLike,
        method: str = "auto",
        params: Mapping[str, Any] | None = None,
        sample_weight: ArrayLike | None = None,
        description: str = "",
        tags: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        *,
        transport: BatchTransport = "auto",
        timeout: float | None = None,
    ) -> Version:
        """Fit ``method`` on a labelled batch as the next version of ``name``.

        Retried under ``idempotency_key`` (a fresh one when None), so a retry never makes a
        second version. From 10,000 rows the batch goes as Arrow (CSV without pyarrow);
        ``transport`` forces one of ``"json"``, ``"arrow"``, ``"csv"``."""
        options = fit_options(method, params, description, tags)
        batch = (scores, labels, sample_weight)
        return self._run(self._fit_call(name, batch, options, idempotency_key, transport, timeout))

    def fit_file(
        self,
        name: str,
        path: str | os.PathLike[str],
        *,
        method: str | None = None,
        params: Mapping[str, Any] | None = None,
        description: str | None = None,
        tags: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        progress: Progress | None = None,
        timeout: float | None = None,
    ) -> Version:
        """Fit on a CSV or Parquet file (columns ``score`` or ``score_0..``, ``label``, and
        ``weight``), uploaded as it is, streamed from disk; an extension of CLIENT.md's API.

        ``method`` None is the service's default (auto). ``progress(sent, total)`` is called
        as the bytes go. Retried as :meth:`fit` is; OSError when the file cannot be read."""
        options = fit_options(method, params, description, tags)
        return self._run(
            self._fit_file_call(name, path, options, idempotency_key, timeout, progress)
        )

    def predict(
        self,
        name: str,
        scores: ArrayLike,
        version: Selector | None = None,
        ids: Sequence[str] | None = None,
        *,
        intervals: bool = False,
        threshold: float | None = None,
        transport: PredictTransport = "auto",
        timeout: float | None = None,
        progress: Progress | None = None,
    ) -> Prediction:
        """Calibrated probabilities of ``scores`` from ``version`` (default: the latest).

        ``ids`` log the predictions; ``threshold`` adds ``decisions`` (1 where p exceeds it).
        Without either, 10,000 scores or more go to ``/v2`` infer as binary tensors
        (``transport`` forces a way), to the same bits; ``progress(sent, total)`` is called
        as the request's bytes go."""
        return self._run(
            self._predict_call(
                name, scores, version, ids, intervals, threshold, transport, timeout, progress
            )
        )

    def outcomes(
        self,
        name: str,
        ids: Sequence[str],
        labels: ArrayLike,
        *,
        overwrite: bool = False,
        timeout: float | None = None,
    ) -> OutcomeReceipt:
        """Record the outcomes (labels) of predictions logged under ``ids``."""
        return self._run(self._outcomes_call(name, ids, labels, overwrite, timeout))

    def version(
        self, name: str, selector: Selector = "latest", *, timeout: float | None = None
    ) -> Version:
        """One version of ``name``: a number, ``"latest"`` or an alias."""
        return self._run(self._version_call(name, selector, timeout))

    def versions(self, name: str, *, timeout: float | None = None) -> list[Version]:
        """Every version of ``name``, newest first (``timeout`` bounds each page)."""
        return self._drive(self._versions_steps(name, timeout))

    def set_alias(
        self, name: str, alias: str, version: int, *, timeout: float | None = None
    ) -> Version:
        """Point ``alias`` at ``version`` (creating or moving it); the version it names."""
        return self._run(self._alias_call(name, alias, version, timeout))

    def diagnostics(
        self,
        name: str,
        selector: Selector = "latest",
        n_bins: int | str = 10,
        *,
        strategy: str | None = None,
        bootstrap: int | None = None,
        class_index: int | None = None,
        scores: ArrayLike | None = None,
        labels: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
        transport: BatchTransport = "auto",
        timeout: float | None = None,
    ) -> Diagnostics:
        """Reliability bins and metrics of a version: out-of-fold on its fitting batch, or
        on ``scores`` and ``labels`` when given (nothing is stored)."""
        options = report_options(n_bins, strategy, bootstrap, class_index)
        return self._run(
            self._diagnostics_call(
                name, selector, options, scores, labels, sample_weight, transport, timeout
            )
        )

    def diagnostics_png(
        self,
        name: str,
        selector: Selector = "latest",
        n_bins: int | str = 10,
        *,
        strategy: str | None = None,
        class_index: int | None = None,
        timeout: float | None = None,
    ) -> bytes:
        """The reliability diagram of a version's stored diagnostics as PNG bytes (an
        extension of CLIENT.md's API)."""
        options = report_options(n_bins, strategy, None, class_index)
        return self._run(self._diagnostics_png_call(name, selector, options, timeout))

    def compare(
        self,
        name: str,
        scores: ArrayLike,
        labels: ArrayLike,
        versions: Sequence[Selector] | None = None,
        *,
        by: str = "log_loss",
        sample_weight: ArrayLike | None = None,
        bootstrap: int | None = None,
        transport: BatchTransport = "auto",
        timeout: float | None = None,
    ) -> Comparison:
        """Rank ``versions`` (default: all, at most 50) on a labelled batch, best first."""
        batch = (scores, labels, sample_weight)
        return self._run(
            self._compare_call(name, batch, versions, by, bootstrap, transport, timeout)
        )
