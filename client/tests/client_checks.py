"""What the tests of issue 27's calls share: names no other test uses, batches, the fixtures
of a live client and of the service by hand, and checks of each typed result against the JSON
the service answers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import numpy as np
import pytest
from calibration_client import Client, Decision, Estimate, Performance, Prior, Window
from calibration_client._traffic_types import PERFORMANCE_MEASURES
from numpy.typing import NDArray

WINDOW_NUMBERS = (
    "mean_predicted", "observed_rate", "log_loss", "brier", "ece", "psi", "ks",
)  # fmt: skip
WINDOW_KEYS = {
    "start", "end", "version", "n_predictions", "n_labelled", *WINDOW_NUMBERS, "intervals",
    "estimated", "realized", "prior",
}  # fmt: skip


def unique(prefix: str) -> str:
    """A calibrator name no other test uses (the service is shared by the session)."""
    return f"decide-{prefix}-{uuid.uuid4().hex[:8]}"


def binary(n: int, seed: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=n) * 1.5
    return scores, (rng.random(n) < 1 / (1 + np.exp(-1.4 * scores))).astype(np.int64)


def three_classes(n: int, seed: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    scores = rng.normal(size=(n, 3))
    scores[np.arange(n), labels] += 1.5
    return scores, labels


@pytest.fixture(scope="module")
def client(service_url: str) -> Iterator[Client]:
    with Client(service_url, timeout=120.0) as c:
        yield c


@pytest.fixture(scope="module")
def raw(service_url: str) -> Iterator[httpx.Client]:
    """The service by hand: what the client's results are checked against."""
    with httpx.Client(base_url=service_url, timeout=120.0) as http:
        yield http


@pytest.fixture(scope="module")
def fitted(client: Client) -> str:
    """A binary calibrator with one platt version."""
    name = unique("binary")
    scores, labels = binary(1500, seed=1)
    client.fit(name, scores, labels, method="platt")
    return name


@pytest.fixture(scope="module")
def fitted_k(client: Client) -> str:
    """A 3-class calibrator with one temperature version."""
    name = unique("classes")
    scores, labels = three_classes(900, seed=2)
    client.fit(name, scores, labels, method="temperature")
    return name


def check_performance(found: Performance | None, data: dict[str, Any] | None) -> None:
    if data is None:
        assert found is None
        return
    assert isinstance(found, Performance)
    assert set(data) <= {*PERFORMANCE_MEASURES, "intervals"}  # every member is read
    for key in PERFORMANCE_MEASURES:
        assert getattr(found, key) == data.get(key), key
    assert found.intervals == {k: tuple(v) for k, v in (data.get("intervals") or {}).items()}
    assert all(type(pair) is tuple for pair in found.intervals.values())


def check_prior(found: Prior | None, data: dict[str, Any] | None) -> None:
    if data is None:
        assert found is None
        return
    assert isinstance(found, Prior)
    assert set(data) == {"training", "estimated", "interval"}
    if not isinstance(data["training"], list):  # binary: floats and a tuple
        assert isinstance(found.training, float)
        assert found.training == data["training"]
        assert found.estimated == data["estimated"]
        assert found.interval == (None if data["interval"] is None else tuple(data["interval"]))
        return
    k = len(data["training"])
    for value, expected, shape in (
        (found.training, data["training"], (k,)),
        (found.estimated, data["estimated"], (k,)),
        (found.interval, data["interval"], (k, 2)),
    ):
        assert isinstance(value, np.ndarray)
        assert value.shape == shape
        np.testing.assert_array_equal(value, expected)


def check_estimate(found: Estimate, data: dict[str, Any]) -> None:
    assert isinstance(found, Estimate)
    assert set(data) == {"name", "version", "n_predictions", "threshold", "estimated", "prior"}
    assert (found.name, found.version, found.n_predictions, found.threshold) == (
        data["name"], data["version"], data["n_predictions"], data["threshold"],
    )  # fmt: skip
    check_performance(found.estimated, data["estimated"])
    check_prior(found.prior, data["prior"])
    assert found.document == data


def check_decision(found: Decision, data: dict[str, Any]) -> None:
    assert isinstance(found, Decision)
    assert set(data) == {"name", "version", "threshold", "expected_cost", "intervals", "at_half"}
    assert (found.name, found.version) == (data["name"], data["version"])
    assert found.threshold == data["threshold"]
    assert found.expected_cost == data["expected_cost"]
    assert found.interval == tuple(data["intervals"]["expected_cost"])
    half = data["at_half"]
    assert found.at_half.threshold == half["threshold"] == 0.5
    assert found.at_half.expected_cost == half["expected_cost"]
    assert found.at_half.interval == tuple(half["intervals"]["expected_cost"])
    assert found.document == data


def check_window(found: Window, data: dict[str, Any]) -> None:
    assert isinstance(found, Window)
    assert set(data) <= WINDOW_KEYS
    assert found.start == datetime.fromisoformat(data["start"])
    assert found.end == datetime.fromisoformat(data["end"])
    assert found.start.tzinfo is not None
    assert (found.version, found.n_predictions, found.n_labelled) == (
        data["version"], data["n_predictions"], data["n_labelled"],
    )  # fmt: skip
    for key in WINDOW_NUMBERS:
        assert getattr(found, key) == data[key], key
    assert found.intervals == {k: tuple(v) for k, v in (data.get("intervals") or {}).items()}
    check_performance(found.estimated, data.get("estimated"))
    check_performance(found.realized, data.get("realized"))
    check_prior(found.prior, data.get("prior"))
    assert found.document == data
