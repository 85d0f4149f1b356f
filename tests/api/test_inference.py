"""The Open Inference Protocol under /v2: metadata, health, infer in JSON and binary tensors,
against /v1 predict on the same scores (bit for bit), and its errors."""

from __future__ import annotations

import gzip
from typing import Any

import numpy as np
import orjson
import pytest

import app
from app.calibration import METHODS
from tests.client import TestClient

from .helpers import sigmoid_batch, spy_on_regular_predict
from .test_every_method import batches_for
from .test_multiclass import logits_batch

SCORES = [-3.2, -0.5, 0.0, 0.25, 1.75, 40.0]


def infer_json(
    scores: Any, shape: list[int], datatype: str = "FP64", **more: Any
) -> dict[str, Any]:
    tensor = {"name": "scores", "datatype": datatype, "shape": shape, "data": scores}
    return {"inputs": [tensor], **more}


def binary_request(
    scores: np.ndarray, datatype: str = "FP64", **more: Any
) -> tuple[bytes, dict[str, str]]:
    """An infer body with the scores as raw little-endian bytes after the JSON header."""
    raw = scores.astype("<f8" if datatype == "FP64" else "<f4").tobytes()
    tensor = {
        "name": "scores",
        "datatype": datatype,
        "shape": list(scores.shape),
        "parameters": {"binary_data_size": len(raw)},
    }
    header = orjson.dumps({"inputs": [tensor], **more})
    return header + raw, {"Inference-Header-Content-Length": str(len(header))}


def outputs_of(response: Any) -> dict[str, np.ndarray]:
    """Each output of an infer answer as an array of its shape, read from JSON or from the
    binary data after the header, by the protocol's rules."""
    length = response.headers.get("inference-header-content-length")
    body = response.content
    header = orjson.loads(body if length is None else body[: int(length)])
    offset = 0 if length is None else int(length)
    arrays = {}
    for output in header["outputs"]:
        assert output["datatype"] == "FP64"
        size = output.get("parameters", {}).get("binary_data_size")
        if size is None:
            values = np.array(output["data"], dtype=np.float64)
        else:
            values = np.frombuffer(body[offset : offset + size], dtype="<f8")
            offset += size
        arrays[output["name"]] = values.reshape(output["shape"])
    assert offset == len(body) or length is None
    return arrays


def predicted(client: TestClient, name: str, scores: Any, **query: Any) -> dict[str, Any]:
    r = client.post(f"/v1/calibrators/{name}/predict", json={"scores": scores}, params=query)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def assert_error(response: Any, status: int, *fragments: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert response.json() == {"error": error}
    for fragment in fragments:
        assert fragment in error


def test_server_metadata_and_health(client: TestClient) -> None:
    meta = client.get("/v2").json()
    assert meta["extensions"] == ["binary_tensor_data"]
    assert (meta["name"], meta["version"]) == ("calibration-service", app.__version__)
    assert client.get("/v2/health/live").json() == {"live": True}
    assert client.get("/v2/health/ready").json() == {"ready": True}


def test_model_metadata_of_binary_multiclass_and_venn_abers_versions(client: TestClient) -> None:
    assert client.post("/v1/calibrators/m/fit", json=sigmoid_batch()).status_code == 201
    va = {**sigmoid_batch(), "method": "venn_abers"}
    assert client.post("/v1/calibrators/m/fit", json=va).status_code == 201
    k3 = {**logits_batch(300), "method": "temperature"}
    assert client.post("/v1/calibrators/m/fit", json=k3).status_code == 201
    assert client.put("/v1/calibrators/m/aliases/production", json={"version": 2}).is_success
    latest = client.get("/v2/models/m").json()
    assert (latest["name"], latest["versions"], latest["version"]) == ("m", ["1", "2", "3"], "3")
    assert latest["inputs"] == [{"name": "scores", "datatype": "FP64", "shape": [-1, 3]}]
    assert [o["name"] for o in latest["outputs"]] == ["probabilities"]
    production = client.get("/v2/models/m/versions/production").json()
    assert production["version"] == "2"
    assert [o["name"] for o in production["outputs"]] == ["probabilities", "p0", "p1"]
    assert production["inputs"][0]["shape"] == [-1]
    assert client.get("/v2/models/m/ready").json() == {"name": "m", "version": "3", "ready": True}
    assert client.get("/v2/models/m/versions/1/ready").json()["version"] == "1"
    assert_error(client.get("/v2/models/m/versions/9"), 404, "9")
    assert_error(client.get("/v2/models/nobody/ready"), 404, "nobody")


@pytest.mark.parametrize("shape", [[6], [6, 1]])
def test_json_infer_equals_v1_predict_bit_for_bit(fitted: TestClient, shape: list[int]) -> None:
    nested = SCORES if len(shape) == 1 else [[s] for s in SCORES]
    r = fitted.post("/v2/models/churn/infer", json=infer_json(nested, shape, id="req-7"))
    assert r.status_code == 200, r.text
    header = r.json()
    assert (header["model_name"], header["model_version"], header["id"]) == ("churn", "1", "req-7")
    got = outputs_of(r)["probabilities"]
    assert got.shape == tuple(shape)
    v1 = predicted(fitted, "churn", SCORES)["probabilities"]
    assert got.reshape(-1).tolist() == v1  # the same floats, not merely close


def test_binary_infer_both_ways_equals_v1_predict(fitted: TestClient) -> None:
    scores = np.random.default_rng(4).normal(scale=3.0, size=1000)
    body, headers = binary_request(scores, parameters={"binary_data_output": True})
    r = fitted.post("/v2/models/churn/versions/1/infer", content=body, headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/octet-stream"
    got = outputs_of(r)["probabilities"]
    v1 = np.array(predicted(fitted, "churn", scores.tolist())["probabilities"])
    assert np.array_equal(got, v1)
    json_out = {"outputs": [{"name": "probabilities", "parameters": {"binary_data": False}}]}
    body, headers = binary_request(scores, parameters={"binary_data_output": True}, **json_out)
    r = fitted.post("/v2/models/churn/infer", content=body, headers=headers)
    assert "inference-header-content-length" not in r.headers  # the output said JSON
    assert np.array_equal(outputs_of(r)["probabilities"], v1)


@pytest.mark.parametrize("binary", [False, True])
def test_fp32_scores_are_the_float32_values(fitted: TestClient, binary: bool) -> None:
    scores = np.array(SCORES, dtype=np.float32)
    if binary:
        body, headers = binary_request(scores, "FP32")
        r = fitted.post("/v2/models/churn/infer", content=body, headers=headers)
    else:
        r = fitted.post("/v2/models/churn/infer", json=infer_json(SCORES, [6], "FP32"))
    assert r.status_code == 200, r.text
    v1 = predicted(fitted, "churn", scores.astype(np.float64).tolist())["probabilities"]
    assert outputs_of(r)["probabilities"].tolist() == v1


def test_multiclass_infer_by_alias(client: TestClient) -> None:
    batch = {**logits_batch(300), "method": "temperature"}
    assert client.post("/v1/calibrators/k3/fit", json=batch).status_code == 201
    assert client.put("/v1/calibrators/k3/aliases/live", json={"version": 1}).is_success
    rows = np.array(batch["scores"][:20])
    body, headers = binary_request(rows, parameters={"binary_data_output": True})
    r = client.post("/v2/models/k3/versions/live/infer", content=body, headers=headers)
    assert r.status_code == 200, r.text
    got = outputs_of(r)["probabilities"]
    assert got.shape == (20, 3)
    assert np.array_equal(got, np.array(predicted(client, "k3", rows.tolist())["probabilities"]))


def test_venn_abers_outputs_p0_and_p1_equal_the_v1_intervals(client: TestClient) -> None:
    batch = {**sigmoid_batch(), "method": "venn_abers"}
    assert client.post("/v1/calibrators/va/fit", json=batch).status_code == 201
    v1 = predicted(client, "va", SCORES, intervals="true")
    every = outputs_of(client.post("/v2/models/va/infer", json=infer_json(SCORES, [6])))
    assert sorted(every) == ["p0", "p1", "probabilities"]  # no outputs named: all of them
    asked = {"outputs": [{"name": "p1"}, {"name": "probabilities"}]}
    r = client.post("/v2/models/va/infer", json=infer_json(SCORES, [6], **asked))
    assert [o["name"] for o in r.json()["outputs"]] == ["p1", "probabilities"]
    assert every["probabilities"].tolist() == v1["probabilities"]
    assert every["p0"].tolist() == [low for low, _ in v1["intervals"]]
    assert every["p1"].tolist() == [high for _, high in v1["intervals"]]


def test_ids_in_parameters_are_logged_as_v1_ids(fitted: TestClient) -> None:
    request = infer_json(SCORES[:3], [3], parameters={"ids": ["a", "b", "c"]})
    r = fitted.post("/v2/models/churn/infer", json=request)
    assert r.json()["parameters"] == {"logged": 3}
    fitted.app.state.service.prediction_log.flush()  # type: ignore[attr-defined]
    outcomes = {"ids": ["a", "b", "c"], "labels": [1, 0, 1]}
    assert fitted.post("/v1/calibrators/churn/outcomes", json=outcomes).json()["matched"] == 3


@pytest.mark.parametrize(
    ("request_body", "status", "fragment"),
    [
        ({"inputs": []}, 400, "inputs"),
        (infer_json(SCORES, [6]) | {"inputs": [{"name": "x"}]}, 400, "'scores'"),
        (infer_json(SCORES, [6], "INT8"), 400, "datatype"),
        (infer_json(SCORES, [5]), 400, "6 values"),
        (infer_json(SCORES, [2, 3]), 400, "v1"),  # a 3-column matrix to a binary version
        (infer_json(SCORES, [0]), 400, "at least 1"),
        (infer_json(SCORES, ["6"]), 400, "shape"),
        (infer_json(["a"] * 6, [6]), 400, "numbers"),
        (infer_json(SCORES, [6], outputs=[{"name": "p0"}]), 400, "p0"),
        (infer_json(SCORES, [6], outputs=[{"name": "logits"}]), 400, "logits"),
        (infer_json(SCORES, [6], parameters={"ids": ["a"] * 6}), 400, "repeats"),
        (infer_json(SCORES, [6], parameters={"ids": ["a"]}), 400, "1 ids"),
        (infer_json(SCORES, [10**9]), 413, "limit"),
        (infer_json(SCORES, [6], id=7), 400, "id"),
    ],
)
def test_bad_requests_get_the_protocols_errors(
    fitted: TestClient, request_body: dict[str, Any], status: int, fragment: str
) -> None:
    r = fitted.post("/v2/models/churn/infer", content=orjson.dumps(request_body))
    assert_error(r, status, fragment)


def test_bad_binary_data_and_unknown_models(fitted: TestClient) -> None:
    body, headers = binary_request(np.array([0.1, np.nan, 0.3]))
    nan = fitted.post("/v2/models/churn/infer", content=body, headers=headers)
    assert_error(nan, 400, "inputs[0] row 1: is NaN")
    body, headers = binary_request(np.array([0.1, 0.2]))
    short = fitted.post("/v2/models/churn/infer", content=body[:-4], headers=headers)
    assert_error(short, 400, "binary_data_size")
    too_long = {"Inference-Header-Content-Length": str(len(body) + 1)}
    assert_error(fitted.post("/v2/models/churn/infer", content=body, headers=too_long), 400)
    assert_error(fitted.post("/v2/models/churn/infer", content=b"{"), 400, "JSON")
    missing = fitted.post("/v2/models/nobody/infer", json=infer_json(SCORES, [6]))
    assert_error(missing, 404, "nobody")
    assert_error(fitted.get("/v2/models/churn/nothing"), 404)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_infers_binary_tensors_as_v1_predicts(client: TestClient, method: str) -> None:
    """The binary tensor is read straight from the body, as read-only float64: every
    method's kernel takes it and answers what /v1 answers (binary and k-class batches)."""
    for i, batch in enumerate(batches_for(method)):
        name = f"{method}-{i}"
        fit = client.post(f"/v1/calibrators/{name}/fit", json={**batch, "method": method})
        assert fit.status_code == 201, fit.text
        scores = np.array(batch["scores"][:40])
        body, headers = binary_request(scores, parameters={"binary_data_output": True})
        r = client.post(f"/v2/models/{name}/infer", content=body, headers=headers)
        assert r.status_code == 200, r.text
        v1 = predicted(client, name, scores.tolist())["probabilities"]
        assert outputs_of(r)["probabilities"].tolist() == v1


def test_compressed_bodies_are_inflated_within_the_limit(fitted: TestClient) -> None:
    body = orjson.dumps(infer_json(SCORES, [6]))
    gzipped = fitted.post(
        "/v2/models/churn/infer",
        content=gzip.compress(body),
        headers={"content-encoding": "gzip"},
    )
    assert (
        outputs_of(gzipped)["probabilities"].tolist()
        == predicted(fitted, "churn", SCORES)["probabilities"]
    )
    limit = fitted.app.state.settings.max_body_bytes  # type: ignore[attr-defined]
    bomb = gzip.compress(b" " * (limit + 1) + body)  # whitespace first: valid JSON if inflated
    r = fitted.post("/v2/models/churn/infer", content=bomb, headers={"content-encoding": "gzip"})
    assert_error(r, 413, "inflates")
    r = fitted.post("/v2/models/churn/infer", content=body, headers={"content-encoding": "br"})
    assert_error(r, 415, "br")
    r = fitted.post("/v2/models/churn/infer", content=body, headers={"content-encoding": "gzip"})
    assert_error(r, 400, "gzip")


def test_small_cached_infers_take_the_hot_path_and_the_rest_the_route(
    fitted: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    regular = spy_on_regular_predict(fitted, monkeypatch)
    fitted.app.state.service.version_cache.forget("churn", 1)  # type: ignore[attr-defined]
    json_request = infer_json(SCORES, [6])
    first = fitted.post("/v2/models/churn/versions/1/infer", json=json_request)
    assert len(regular) == 1  # v1 not in memory: the route loads it
    body, headers = binary_request(np.array(SCORES), parameters={"binary_data_output": True})
    again = fitted.post("/v2/models/churn/versions/1/infer", content=body, headers=headers)
    assert len(regular) == 1  # served from memory, JSON in and binary out alike
    assert (
        outputs_of(first)["probabilities"].tolist() == outputs_of(again)["probabilities"].tolist()
    )
    assert again.headers["content-type"] == "application/octet-stream"
    bad = fitted.post("/v2/models/churn/versions/1/infer", json=infer_json(SCORES, [5]))
    assert_error(bad, 400, "6 values")  # the route reports what the hot path doubts
    assert len(regular) == 1  # it failed before predicting


def test_compressed_infers_are_inflated_by_the_route_not_the_hot_path(
    fitted: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 64 KB gzip body may inflate to the body limit: work for the pool, not the loop."""
    regular = spy_on_regular_predict(fitted, monkeypatch)
    body = gzip.compress(orjson.dumps(infer_json(SCORES, [6])))
    r = fitted.post("/v2/models/churn/infer", content=body, headers={"content-encoding": "gzip"})
    assert r.status_code == 200, r.text
    assert len(regular) == 1


def test_a_small_compressed_infer_is_a_job_of_the_bounded_pool(
    fitted: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its inflating may reach the body limit: the pool's budget, not the threadpool's."""
    work = fitted.app.state.service.work  # type: ignore[attr-defined]
    jobs: list[Any] = []
    supervise = work.supervise

    async def counting(*args: Any, **kwargs: Any) -> Any:
        jobs.append(args)
        return await supervise(*args, **kwargs)

    monkeypatch.setattr(work, "supervise", counting)
    fitted.app.state.service.version_cache.forget("churn", 1)  # type: ignore[attr-defined]
    plain = orjson.dumps(infer_json(SCORES, [6]))
    assert fitted.post("/v2/models/churn/versions/1/infer", content=plain).status_code == 200
    assert jobs == []  # a small plain body: the threadpool
    gzipped = gzip.compress(plain)
    headers = {"content-encoding": "gzip"}
    r = fitted.post("/v2/models/churn/versions/1/infer", content=gzipped, headers=headers)
    assert r.status_code == 200, r.text
    assert len(jobs) == 1
