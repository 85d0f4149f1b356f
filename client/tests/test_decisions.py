"""estimate, decision and adjust (issue 27) against the live service: each typed
result equals, field by field, the JSON the service answers to the same request sent by hand;
the service's refusals arrive as the error class of their status with the field named; what
the client refuses before sending; and AsyncClient answers what Client does."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import numpy as np
import pytest
from calibration_client import (
    AsyncClient,
    Client,
    NotFoundError,
    UnprocessableError,
    Version,
)
from calibration_client._traffic_types import PERFORMANCE_MEASURES
from client_checks import (
    binary,
    check_decision,
    check_estimate,
    check_window,
    client,
    fitted,
    fitted_k,
    raw,
    three_classes,
)

__all__ = ["client", "fitted", "fitted_k", "raw"]  # the shared fixtures, used here

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
