"""The calls of the traffic loop and of decisions (issue 27), as
:class:`~calibration_client._base.Call` s beside :mod:`~calibration_client._calls`' own:
``estimate`` (unlabelled scores: expected performance and label shift), ``decision`` (the
threshold costs call for), ``adjust`` (a version corrected to new class priors) and
``monitoring`` (the logged traffic window by window)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from numpy.typing import ArrayLike

from calibration_client import _arrays
from calibration_client._base import Call
from calibration_client._batches import QueryValue, dumps, dumps_fast, loads
from calibration_client._calls import Operations, Selector, _path, _query
from calibration_client._traffic_types import Decision, Estimate, Window, windows_from_json
from calibration_client._types import Version

Moment = datetime | str
"""A time: a ``datetime`` (naive ones are read as UTC by the service) or ISO 8601 text."""
MonitoringWindow = Literal["1h", "1d", "7d"]
_JSON = {"Content-Type": "application/json"}


def _moment(value: Moment | None) -> str | None:
    """A time as the service reads it: ISO 8601 (text as given)."""
    return value.isoformat() if isinstance(value, datetime) else value


def _finite(value: float, name: str) -> float:
    """``value`` as a float; ValueError when it is NaN or infinite (JSON cannot carry it, and
    orjson would send null, which the service would read as absent)."""
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} is {number!r}; it must be a finite number")
    return number


def adjust_document(
    prior: float | Literal["traffic"] | None,
    priors: ArrayLike | None,
    since: Moment | None,
    until: Moment | None,
    description: str | None,
    tags: Mapping[str, str] | None,
) -> dict[str, Any]:
    """An adjust body. Refused here only what cannot be sent or is plainly a mistake: both
    ``prior`` and ``priors``, neither, and numbers that are not finite (JSON has none); the
    service judges the rest (422 naming the field: a prior outside (0, 1), priors that do not
    sum to 1, ``since`` without ``"traffic"``, …)."""
    document: dict[str, Any] = {}
    if priors is not None:
        if prior is not None:
            raise ValueError("give prior or priors, not both")
        document["priors"] = _arrays.as_priors(priors)
    elif prior is None:
        raise ValueError('give prior (a binary version\'s P(y = 1), or "traffic") or priors')
    elif isinstance(prior, str | bool):
        document["prior"] = prior  # "traffic"; anything else is the service's to refuse
    else:
        document["prior"] = _finite(prior, "prior")
    optional = {
        "since": _moment(since),
        "until": _moment(until),
        "description": description,
        "tags": None if tags is None else dict(tags),
    }
    return document | {key: value for key, value in optional.items() if value is not None}


class TrafficOperations(Operations):
    """:class:`~calibration_client._calls.Operations` and the calls of issue 27;
    :class:`Client` and :class:`AsyncClient` send them."""

    def _estimate_call(
        self,
        name: str,
        scores: ArrayLike,
        version: Selector,
        threshold: float | None,
        timeout: float | None,
    ) -> Call[Estimate]:
        deadline = self._deadline(timeout)
        document: dict[str, Any] = {"scores": _arrays.as_scores(scores)}
        if threshold is not None:
            document["threshold"] = _finite(threshold, "threshold")
        read = lambda r: Estimate.from_json(loads(r.content))  # noqa: E731
        path = _path(name, "versions", version, "estimate")
        # stores nothing: as safe to send again as a predict
        return Call("POST", path, read, deadline, None, dumps_fast(document), _JSON)

    def _decision_call(
        self,
        name: str,
        version: Selector,
        cost_fp: float,
        cost_fn: float,
        benefit_tp: float,
        benefit_tn: float,
        timeout: float | None,
    ) -> Call[Decision]:
        read = lambda r: Decision.from_json(loads(r.content))  # noqa: E731
        path = _path(name, "versions", version, "decision")
        costs = {
            "cost_fp": cost_fp,
            "cost_fn": cost_fn,
            "benefit_tp": benefit_tp,
            "benefit_tn": benefit_tn,
        }  # the service refuses what is negative, not finite, or all 0
        params = {key: repr(float(value)) for key, value in costs.items()}
        return Call("GET", path, read, self._deadline(timeout), params)

    def _adjust_call(
        self, name: str, version: Selector, document: Mapping[str, Any], timeout: float | None
    ) -> Call[Version]:
        read = lambda r: Version.from_json(loads(r.content))  # noqa: E731
        path = _path(name, "versions", version, "adjust")
        deadline = self._deadline(timeout)
        # the service stores a version per request and reads no Idempotency-Key here
        return Call("POST", path, read, deadline, None, dumps(document), _JSON, idempotent=False)

    def _monitoring_call(
        self,
        name: str,
        window: str,
        since: Moment | None,
        until: Moment | None,
        version: Selector | None,
        threshold: float | None,
        n_bins: int | None,
        bootstrap: int | None,
        timeout: float | None,
    ) -> Call[list[Window]]:
        options = {
            "window": window,
            "since": _moment(since),
            "until": _moment(until),
            "version": version,
            "threshold": None if threshold is None else repr(float(threshold)),
            "n_bins": n_bins,
            "bootstrap": bootstrap,
        }
        params: dict[str, QueryValue] = _query(options)
        read = lambda r: windows_from_json(loads(r.content))  # noqa: E731
        return Call("GET", _path(name, "monitoring"), read, self._deadline(timeout), params)
