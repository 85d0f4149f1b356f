"""estimate, decision, adjust and monitoring (issue 27) against the live service: each typed
result equals, field by field, the JSON the service answers to the same request sent by hand;
the service's refusals arrive as the error class of their status with the field named; what
the client refuses before sending; and AsyncClient answers what Client does."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest
from calibration_client import (
    AsyncClient,
    Client,
    Decision,
    Estimate,
    NotFoundError,
    Performance,
    Prior,
    UnprocessableError,
    Version,
    Window,
)
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


# estimate


@pytest.mark.parametrize("threshold", [None, 0.3])
def test_estimate_equals_the_services_answer(
    client: Client, raw: httpx.Client, fitted: str, threshold: float | None
) -> None:
    scores, _ = binary(800, seed=3)
    found = client.estimate(fitted, scores, threshold=threshold)
    body: dict[str, Any] = {"scores": scores.tolist()}
    if threshold is not None:
        body["threshold"] = threshold
    answer = raw.post(f"/v1/calibrators/{fitted}/versions/latest/estimate", json=body)
    assert answer.status_code == 200
    check_estimate(found, answer.json())
    assert found.threshold == (0.5 if threshold is None else threshold)
    assert found.estimated.roc_auc is not None
    assert set(found.estimated.intervals) == set(PERFORMANCE_MEASURES)


def test_estimate_of_k_classes_has_vectors_of_priors(
    client: Client, raw: httpx.Client, fitted_k: str
) -> None:
    scores, _ = three_classes(300, seed=4)
    found = client.estimate(fitted_k, scores, version=1)
    answer = raw.post(
        f"/v1/calibrators/{fitted_k}/versions/1/estimate", json={"scores": scores.tolist()}
    )
    check_estimate(found, answer.json())
    assert found.threshold is None
    assert found.estimated.precision is None  # k classes: accuracy, log loss, Brier
    assert found.estimated.accuracy is not None
    assert isinstance(found.prior.training, np.ndarray)
    assert found.prior.training.sum() == pytest.approx(1.0)


def test_estimate_takes_what_predict_takes(client: Client, fitted: str) -> None:
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")
    scores, _ = binary(50, seed=5)
    expected = client.estimate(fitted, scores).document
    assert client.estimate(fitted, scores.tolist()).document == expected
    assert client.estimate(fitted, pd.Series(scores)).document == expected
    assert client.estimate(fitted, pd.DataFrame({"s": scores})["s"]).document == expected
    assert client.estimate(fitted, pl.Series(scores)).document == expected


def test_an_empty_batch_estimates_nothing(client: Client, fitted: str) -> None:
    found = client.estimate(fitted, [])
    assert found.n_predictions == 0
    assert found.estimated.accuracy is None
    assert found.estimated.intervals == {}
    assert found.prior.estimated is None
    assert found.prior.interval is None


def test_estimate_refusals_name_their_field(client: Client, fitted: str, fitted_k: str) -> None:
    scores, _ = three_classes(10, seed=6)
    with pytest.raises(UnprocessableError) as caught:
        client.estimate(fitted_k, scores, threshold=0.3)
    assert caught.value.status == 422
    assert caught.value.errors[0]["loc"] == ["body", "threshold"]
    with pytest.raises(UnprocessableError) as caught:
        client.estimate(fitted, [0.1, 0.2], threshold=1.5)
    assert caught.value.errors[0]["loc"][:2] == ["body", "threshold"]
    with pytest.raises(UnprocessableError) as caught:
        client.estimate(fitted_k, [0.1, 0.2])
    assert caught.value.errors[0]["loc"] == ["body", "scores"]
    with pytest.raises(NotFoundError) as missing:
        client.estimate(fitted, [0.1], version=99)
    assert missing.value.status == 404
    for bad in ({"threshold": float("nan")}, {"threshold": float("inf")}):
        with pytest.raises(ValueError, match="threshold"):
            client.estimate(fitted, [0.1], **bad)
    with pytest.raises(ValueError, match=r"scores\[1\] is NaN"):
        client.estimate(fitted, [0.1, float("nan")])


# decision


@pytest.mark.parametrize(
    "costs",
    [{}, {"cost_fp": 1.0, "cost_fn": 5.0}, {"cost_fp": 2, "cost_fn": 1, "benefit_tp": 0.5,
                                            "benefit_tn": 0.25}],
)  # fmt: skip
def test_decision_equals_the_services_answer(
    client: Client, raw: httpx.Client, fitted: str, costs: dict[str, float]
) -> None:
    found = client.decision(fitted, **costs)
    answer = raw.get(f"/v1/calibrators/{fitted}/versions/latest/decision", params=costs)
    assert answer.status_code == 200
    check_decision(found, answer.json())
    full = {"cost_fp": 1.0, "cost_fn": 1.0, "benefit_tp": 0.0, "benefit_tn": 0.0} | costs
    elkan = (full["cost_fp"] + full["benefit_tn"]) / sum(full.values())
    assert found.threshold == pytest.approx(elkan)


def test_decision_refusals_name_their_field(client: Client, fitted: str, fitted_k: str) -> None:
    with pytest.raises(UnprocessableError) as caught:
        client.decision(fitted, cost_fp=0, cost_fn=0)
    assert caught.value.errors[0]["loc"][0] == "query"
    assert caught.value.detail is not None
    assert "all 0" in caught.value.detail
    with pytest.raises(UnprocessableError) as caught:
        client.decision(fitted, cost_fn=-1)
    assert caught.value.errors[0]["loc"] == ["query", "cost_fn"]
    with pytest.raises(UnprocessableError) as caught:
        client.decision(fitted_k)
    assert caught.value.errors[0]["loc"] == ["path", "selector"]
    with pytest.raises(NotFoundError):
        client.decision(fitted, version="no-such-alias")


# adjust


def test_adjust_stores_a_version_as_the_service_answers_it(
    client: Client, raw: httpx.Client, fitted: str
) -> None:
    made = client.adjust(fitted, 1, prior=np.float64(0.2), description="spring", tags={"k": "v"})
    assert isinstance(made, Version)
    stored = raw.get(f"/v1/calibrators/{fitted}/versions/{made.version}").json()
    assert made.document == stored
    assert made.source == stored["source"]
    adjusted = made.source is not None and made.source["adjusted"]
    assert adjusted["parent_version"] == 1
    assert adjusted["prior_to"] == 0.2
    assert adjusted["estimated_from"] is None
    assert (made.description, made.tags) == ("spring", {"k": "v"})
    # by hand, the same request answers the same version, one number on
    by_hand = raw.post(
        f"/v1/calibrators/{fitted}/versions/1/adjust",
        json={"prior": 0.2, "description": "spring", "tags": {"k": "v"}},
    )
    assert by_hand.status_code == 201
    again = by_hand.json()
    assert again["version"] == made.version + 1
    drop = ("version", "created_at")
    assert {k: v for k, v in again.items() if k not in drop} == {
        k: v for k, v in made.document.items() if k not in drop
    }
    assert client.version(fitted).version == again["version"]  # the new one is latest


def test_adjust_with_priors_of_k_classes(client: Client, fitted_k: str) -> None:
    made = client.adjust(fitted_k, 1, priors=np.array([0.2, 0.3, 0.5]))
    assert made.source is not None
    assert made.source["adjusted"]["prior_to"] == [0.2, 0.3, 0.5]
    estimate = client.estimate(fitted_k, three_classes(30, seed=7)[0], version=made.version)
    assert isinstance(estimate.prior.training, np.ndarray)
    np.testing.assert_allclose(estimate.prior.training, [0.2, 0.3, 0.5])


def test_adjust_refusals_name_their_field(client: Client, fitted: str) -> None:
    before = [v.version for v in client.versions(fitted)]
    refused: list[tuple[dict[str, Any], list[str]]] = [
        ({"prior": 1.5}, ["body", "prior"]),
        ({"prior": 0.0}, ["body", "prior"]),
        ({"priors": [0.5, 0.6]}, ["body", "priors"]),
        ({"prior": 0.2, "since": "2026-01-01T00:00:00Z"}, ["body", "since"]),
        ({"prior": "traffic", "until": "2020-01-02T00:00:00Z"}, ["body", "prior"]),
        ({"prior": "soon"}, ["body", "prior"]),
    ]
    for arguments, loc in refused:
        with pytest.raises(UnprocessableError) as caught:
            client.adjust(fitted, 1, **arguments)
        assert caught.value.status == 422
        assert caught.value.errors[0]["loc"] == loc, arguments
    with pytest.raises(NotFoundError):
        client.adjust(fitted, 99, prior=0.2)
    for arguments in ({"prior": 0.2, "priors": [0.8, 0.2]}, {}, {"prior": float("nan")}):
        with pytest.raises(ValueError, match="prior"):
            client.adjust(fitted, 1, **arguments)
    assert [v.version for v in client.versions(fitted)] == before  # nothing stored


# monitoring


def test_monitoring_equals_the_services_answer(client: Client, raw: httpx.Client) -> None:
    name = unique("traffic")
    scores, labels = binary(1200, seed=8)
    client.fit(name, scores, labels, method="platt")
    live, outcome = binary(400, seed=9)
    ids = [f"case-{i}" for i in range(400)]
    client.predict(name, live, ids=ids)
    client.outcomes(name, ids[:200], outcome[:200])
    found = _when_logged(client, name, 400, 200)
    assert len(found) == 30  # the default: 30 windows of a day
    answer = raw.get(f"/v1/calibrators/{name}/monitoring")
    assert answer.status_code == 200
    rows = answer.json()["windows"]
    assert len(rows) == len(found)
    for window, row in zip(found, rows, strict=True):
        check_window(window, row)
    busy = [w for w in found if w.version is not None]
    assert busy[-1].estimated is not None
    assert busy[-1].realized is not None
    assert isinstance(busy[-1].prior, Prior)
    assert set(busy[-1].intervals) == {"log_loss", "brier", "ece"}
    empty = next(w for w in found if w.version is None)
    assert (empty.n_predictions, empty.estimated, empty.prior) == (0, None, None)

    now = datetime.now(UTC)
    options: dict[str, Any] = {
        "window": "1h",
        "since": (now - timedelta(hours=3)).replace(tzinfo=None),  # naive: UTC
        "until": (now + timedelta(hours=1)).isoformat(),
        "version": 1,
        "threshold": 0.3,
        "n_bins": 5,
        "bootstrap": 0,
    }
    hourly = client.monitoring(name, **options)
    query = {**options, "since": options["since"].isoformat()}
    rows = raw.get(f"/v1/calibrators/{name}/monitoring", params=query).json()["windows"]
    assert [w.document for w in hourly] == rows
    for window, row in zip(hourly, rows, strict=True):
        check_window(window, row)
    assert all(w.intervals == {} for w in hourly)  # bootstrap=0
    assert sum(w.n_predictions for w in hourly) == 400


def _when_logged(client: Client, name: str, predictions: int, labelled: int) -> list[Window]:
    """The monitoring windows once the log holds every prediction and outcome (it is written
    within a second)."""
    deadline = time.monotonic() + 30
    while True:
        windows = client.monitoring(name)
        counts = (sum(w.n_predictions for w in windows), sum(w.n_labelled for w in windows))
        if counts == (predictions, labelled) or time.monotonic() > deadline:
            assert counts == (predictions, labelled)
            return windows
        time.sleep(0.2)


def test_monitoring_refusals_name_their_field(client: Client, fitted: str) -> None:
    with pytest.raises(UnprocessableError) as caught:
        client.monitoring(fitted, window="2d")
    assert caught.value.errors[0]["loc"] == ["query", "window"]
    with pytest.raises(UnprocessableError) as caught:
        client.monitoring(fitted, threshold=1.5)
    assert caught.value.errors[0]["loc"] == ["query", "threshold"]
    with pytest.raises(NotFoundError):
        client.monitoring(unique("never-fitted"))


# async


def test_async_answers_what_sync_does(
    service_url: str, client: Client, fitted: str, fitted_k: str
) -> None:
    scores, _ = binary(300, seed=10)
    k_scores, _ = three_classes(40, seed=11)

    async def calls() -> tuple[Any, ...]:
        async with AsyncClient(service_url, timeout=120.0) as a:
            return await asyncio.gather(
                a.estimate(fitted, scores, version=1, threshold=0.4),
                a.estimate(fitted_k, k_scores, version=1),
                a.decision(fitted, version=1, cost_fp=1.0, cost_fn=3.0),
                a.monitoring(fitted, window="7d"),
                a.adjust(fitted, 1, prior=0.35),
            )

    estimate, k_estimate, decision, windows, adjusted = asyncio.run(calls())
    check_estimate(estimate, client.estimate(fitted, scores, version=1, threshold=0.4).document)
    check_estimate(k_estimate, client.estimate(fitted_k, k_scores, version=1).document)
    sync_decision = client.decision(fitted, version=1, cost_fp=1.0, cost_fn=3.0)
    assert decision == sync_decision
    check_decision(decision, sync_decision.document)
    sync_windows = client.monitoring(fitted, window="7d")
    assert len(windows) == len(sync_windows)
    for window, same in zip(windows, sync_windows, strict=True):
        check_window(window, same.document)
    made = client.adjust(fitted, 1, prior=0.35)
    assert made.version == adjusted.version + 1
    assert made.source == adjusted.source
    assert made.metrics == adjusted.metrics
    assert client.version(fitted, adjusted.version).document == adjusted.document
