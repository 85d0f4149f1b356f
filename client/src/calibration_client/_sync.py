"""The blocking client: :class:`~calibration_client._base.BaseClient`'s calls sent with an
``httpx.Client``, retried with ``time.sleep`` between attempts."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from calibration_client._base import DEFAULT_BASE_URL, BaseClient, Call, PredictTransport, Selector
from calibration_client._batches import BatchTransport
from calibration_client._types import Comparison, Diagnostics, OutcomeReceipt, Prediction, Version

T = TypeVar("T")


class Client(BaseClient):
    """A client of the calibration service.

    ``timeout`` bounds each whole call, its retries included; ``retries`` is how many times a
    connection failure or a 429/503 answer is tried again. ``http_client`` is used as given
    (and left open by :meth:`close`). Nothing is sent before the first call."""

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
        deadline = self._deadline(call)
        attempt = 0
        while True:
            request = self._request(self._http, call, deadline)
            try:
                response = self._http.send(request)
            except httpx.TransportError as exc:
                error = self._failed(exc)
            else:
                if response.is_success:
                    return call.read(response)
                error = self._answer_error(response)
            wait = self._wait(error, attempt, deadline)
            if wait is None:
                raise error
            self._sleep(wait)
            attempt += 1

    def fit(
        self,
        name: str,
        scores: Any,
        labels: Any,
        method: str = "auto",
        params: Mapping[str, Any] | None = None,
        sample_weight: Any = None,
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
        return self._run(
            self._fit_call(
                name,
                scores,
                labels,
                method,
                params,
                sample_weight,
                description,
                tags,
                idempotency_key,
                transport,
                timeout,
            )
        )

    def predict(
        self,
        name: str,
        scores: Any,
        version: Selector | None = None,
        ids: Sequence[str] | None = None,
        *,
        intervals: bool = False,
        transport: PredictTransport = "auto",
        timeout: float | None = None,
    ) -> Prediction:
        """Calibrated probabilities of ``scores`` from ``version`` (default: the latest).

        ``ids`` log the predictions for outcomes. From 10,000 scores without ids the
        scores go to ``/v2`` infer as binary tensors (``transport="json"`` or ``"binary"``
        forces one way); the probabilities are the same to the bit."""
        return self._run(
            self._predict_call(name, scores, version, ids, intervals, transport, timeout)
        )

    def outcomes(
        self,
        name: str,
        ids: Sequence[str] | Any,
        labels: Any,
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
        """Every version of ``name``, newest first."""
        found: list[Version] = []
        while True:
            page, total = self._run(self._versions_page_call(name, len(found), timeout))
            found += page
            if not page or len(found) >= total:
                return found

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
        scores: Any = None,
        labels: Any = None,
        sample_weight: Any = None,
        transport: BatchTransport = "auto",
        timeout: float | None = None,
    ) -> Diagnostics:
        """Reliability bins and metrics of a version: out-of-fold on its fitting batch, or
        on ``scores`` and ``labels`` when given (nothing is stored)."""
        options = {
            "n_bins": n_bins,
            "strategy": strategy,
            "bootstrap": bootstrap,
            "class_index": class_index,
        }
        batch = self._given_batch(scores, labels, sample_weight)
        return self._run(self._diagnostics_call(name, selector, options, batch, transport, timeout))

    def compare(
        self,
        name: str,
        scores: Any,
        labels: Any,
        versions: Sequence[Selector] | None = None,
        *,
        by: str = "log_loss",
        sample_weight: Any = None,
        bootstrap: int | None = None,
        transport: BatchTransport = "auto",
        timeout: float | None = None,
    ) -> Comparison:
        """Rank ``versions`` (default: all, at most 50) on a labelled batch, best first."""
        batch = (scores, labels, sample_weight)
        return self._run(
            self._compare_call(name, batch, versions, by, bootstrap, transport, timeout)
        )
