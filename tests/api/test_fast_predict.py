"""The predict hot path answers exactly what the regular route answers, and only when safe."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.settings import Settings
from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch, spy_on_regular_predict
from .test_multiclass import logits_batch

BASE = "/v1/calibrators/churn"


@pytest.fixture
def settings(database_url: str) -> Settings:
    """A long freshness window: what is cached stays usable by the hot path for the test."""
    return Settings(database_url=database_url, latest_refresh_seconds=60.0)


@pytest.fixture
def regular_calls(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Records every call of the regular route's ``service.serving.predict``."""
    return spy_on_regular_predict(client, monkeypatch)


def test_fast_and_regular_paths_answer_the_same(
    client: TestClient, regular_calls: list[Any]
) -> None:
    assert (
        client.post(f"{BASE}/fit", json={**sigmoid_batch(200), "method": "isotonic"}).status_code
        == 201
    )
    scores = {"scores": [-2.0, 0.1, 0.5, 3.0, 1e300]}
    fast = client.post(f"{BASE}/predict?version=1", json=scores)
    assert fast.status_code == 200
    assert regular_calls == []  # answered by the hot path
    assert "x-request-id" in fast.headers
    regular = client.post(f"{BASE}/predict?version=1&unrelated=1", json=scores)
    assert len(regular_calls) == 1  # an unexpected query parameter: the regular route
    assert regular.content == fast.content
    latest = client.post(f"{BASE}/predict", json=scores)
    assert latest.content == fast.content
    assert len(regular_calls) == 1


def test_doubtful_requests_take_the_regular_route(
    client: TestClient, regular_calls: list[Any]
) -> None:
    assert (
        client.post(f"{BASE}/fit", json={**sigmoid_batch(200), "method": "platt"}).status_code
        == 201
    )
    assert_problem(client.post(f"{BASE}/predict", json={"scores": [0.1, None]}), 422, "scores[1]")
    assert_problem(
        client.post(f"{BASE}/predict", json={"scores": [[0.1, 0.2, 0.7]]}), 422, "matrix"
    )
    assert_problem(
        client.post(f"{BASE}/predict?version=2", json={"scores": [1], "version": 1}), 422, "version"
    )
    assert_problem(client.post(f"{BASE}/predict", json={"scores": [1], "x": 1}), 422, "x")
    assert_problem(client.post("/v1/calibrators/none/predict", json={"scores": [1]}), 404, "none")
    r = client.post(
        f"{BASE}/predict", content=b"{broken", headers={"content-type": "application/json"}
    )
    assert_problem(r, 400, "JSON")
    big = np.linspace(-5, 5, 20_000).tolist()  # > 64 KiB: off the event loop
    r = client.post(f"{BASE}/predict", json={"scores": big})
    assert r.status_code == 200
    assert len(r.json()["probabilities"]) == 20_000
    assert len(regular_calls) >= 3


def test_multiclass_and_deleted_versions(client: TestClient, regular_calls: list[Any]) -> None:
    batch = logits_batch(200)
    assert (
        client.post("/v1/calibrators/m/fit", json={**batch, "method": "temperature"}).status_code
        == 201
    )
    r = client.post("/v1/calibrators/m/predict", json={"scores": batch["scores"][:3]})
    assert np.array(r.json()["probabilities"]).shape == (3, 3)
    assert regular_calls == []
    assert client.delete("/v1/calibrators/m/versions/1").status_code == 204
    assert_problem(
        client.post("/v1/calibrators/m/predict?version=1", json={"scores": batch["scores"][:3]}),
        404,
        "1",
    )


def test_a_miss_hands_the_parsed_body_on_and_nothing_is_parsed_twice(
    client: TestClient, regular_calls: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version not in memory: the hot path parses the small body, finds no cached version
    and hands the request on with what it parsed; the route answers from that (one parse of
    each body, predict's and infer's), and the answer is the one a fresh request gets."""
    from app.api import answers, fast_predict
    from app.api.bodies import tensors
    from app.api.routes import predictions

    fit = client.post(f"{BASE}/fit", json={**sigmoid_batch(200), "method": "platt"})
    assert fit.status_code == 201
    parsed: list[str] = []

    def counting(module: Any, name: str) -> None:
        original = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            parsed.append(name)
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    counting(fast_predict, "parse_predict")
    counting(predictions, "parse_predict")
    counting(answers, "parse_infer")
    service = client.app.state.service  # type: ignore[attr-defined]
    scores = [-1.0, 0.0, 2.5]
    service.version_cache.forget("churn")
    missed = client.post(f"{BASE}/predict", json={"scores": scores})
    assert missed.status_code == 200, missed.text
    assert parsed == ["parse_predict"]
    assert len(regular_calls) == 1  # the route answered
    again = client.post(f"{BASE}/predict", json={"scores": scores})  # now in memory
    assert again.json() == missed.json()
    assert len(regular_calls) == 1
    parsed.clear()
    service.version_cache.forget("churn")
    tensor = {"inputs": [{"name": tensors.INPUT, "shape": [3], "datatype": "FP64", "data": scores}]}
    infer = client.post("/v2/models/churn/infer", json=tensor)
    assert infer.status_code == 200, infer.text
    assert parsed == ["parse_infer"]
    assert infer.json()["outputs"][0]["data"] == pytest.approx(missed.json()["probabilities"])
