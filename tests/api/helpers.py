"""Batches for the API tests (scores whose true calibration map is known), and reference
computations of the monitoring's numbers."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from app.api.problem_types import PROBLEM_TYPES

FEW_RESAMPLES = 20
"""The ``bootstrap`` a test asks diagnostics, compare or the monitoring for when what it asserts
is not the intervals (media types, bins, where an option was read, errors, auth, ...). The
default, 1000 resamples, spends most of such a request in the smooth ECE's width search of each
resample; 20 still computes and serialises every interval, so two answers compared for
equality still compare their intervals. The tests of the intervals and of the default keep
the default or ask for their own count."""


def sigmoid_batch(n: int = 400, seed: int = 0, a: float = 1.5, b: float = -0.3) -> dict[str, Any]:
    """Margins f ~ N(0, 2) and labels drawn with P(y=1 | f) = 1 / (1 + exp(-(a f + b)))."""
    rng = np.random.default_rng(seed)
    f = rng.normal(0.0, 2.0, n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(a * f + b)))).astype(int)
    return {"scores": f.round(6).tolist(), "labels": y.tolist()}


def three_class_batch(n: int, seed: int) -> dict[str, Any]:
    """n rows of three-class logits (``scores``, lists of 3) and labels drawn from a sharper
    softmax of them."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=1.5, size=(n, 3))
    truth = np.exp(1.4 * logits)
    truth /= truth.sum(axis=1, keepdims=True)
    labels = (rng.random(n)[:, None] > np.cumsum(truth, axis=1)).sum(axis=1)
    return {"scores": logits.round(6).tolist(), "labels": labels.tolist()}


def as_csv(batch: dict[str, Any], weights: list[float] | None = None) -> str:
    header = "score,label" + (",weight" if weights is not None else "")
    rows = [header]
    for i, (s, y) in enumerate(zip(batch["scores"], batch["labels"], strict=True)):
        rows.append(f"{s},{y}" + (f",{weights[i]}" if weights is not None else ""))
    return "\n".join(rows) + "\n"


def assert_problem(response: Any, status: int, *fragments: str) -> dict[str, Any]:
    """The response is problem+json with this status and a detail mentioning each fragment,
    of a problem type the service has a page for (``/problems/{slug}``)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert {"type", "title", "status", "detail"} <= body.keys()
    assert body["type"].removeprefix("/problems/") in PROBLEM_TYPES, body["type"]
    for fragment in fragments:
        assert fragment in body["detail"], (fragment, body["detail"])
    return body


def spy_on_regular_predict(client: Any, monkeypatch: Any) -> list[Any]:
    """Record every call of ``service.serving.predict`` by the regular predict route (the hot
    path in ``app/api/fast_predict.py`` calls it ``cached_only``), so a test can tell which path
    answered."""
    service = client.app.state.service
    calls: list[Any] = []
    original = service.serving.predict

    def spy(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("cached_only"):
            calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(service.serving, "predict", spy)
    return calls


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Binned ECE over uniform bins, by its definition: sum of |mean p - mean y| * share."""
    which = np.minimum((p * bins).astype(int), bins - 1)
    return float(
        sum(
            abs(p[which == b].mean() - y[which == b].mean()) * np.mean(which == b)
            for b in range(bins)
            if np.any(which == b)
        )
    )


def psi(reference: np.ndarray, actual: np.ndarray) -> float:
    """PSI over the reference's deciles, shares floored at 1e-4, via np.histogram."""
    deciles = np.quantile(reference, np.arange(1, 10) / 10)
    edges = np.concatenate([[-np.inf], deciles, [np.inf]])
    e = np.maximum(np.histogram(reference, edges)[0] / reference.size, 1e-4)
    a = np.maximum(np.histogram(actual, edges)[0] / actual.size, 1e-4)
    return float(np.sum((a - e) * np.log(a / e)))


def binned_ks(reference: np.ndarray, actual: np.ndarray) -> float:
    """KS read at the reference's percentiles only, by brute force: max over each edge e of
    |share of the reference below e - share of the traffic below e|."""
    edges = np.unique(np.quantile(reference, np.arange(1, 100) / 100))
    below = [abs(np.mean(reference < e) - np.mean(actual < e)) for e in edges]
    return float(max(below, default=0.0))


def ks_binning_slack(reference: np.ndarray, actual: np.ndarray) -> float:
    """The most reading KS at the percentiles can take off the rows' statistic: the largest
    share of the reference plus the traffic's within one bin between the edges (a bin holds
    its lower edge), or at an edge."""
    edges = np.concatenate(
        [[-np.inf], np.unique(np.quantile(reference, np.arange(1, 100) / 100)), [np.inf]]
    )
    shares = [
        np.mean((reference >= a) & (reference < b)) + np.mean((actual >= a) & (actual < b))
        for a, b in itertools.pairwise(edges)
    ]
    return float(max(shares))
