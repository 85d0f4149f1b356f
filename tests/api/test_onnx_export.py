"""GET .../artifact?format=onnx: every method's model, run in onnxruntime, answers what
/v1 predict answers over HTTP (within 1e-12; FLOAT graphs within 2^-25), with its parity
figure, ETag and 304 as for the JSON artifact."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import app.export.exporter
from app.calibration import METHODS
from app.export import FLOAT32_BOUND, ExportError
from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch
from .test_every_method import batches_for

PARITY = 1e-12


def knots(fitted: dict[str, Any]) -> list[float]:
    """Every number of a fitted state that a map may step or bend at."""
    states = fitted.get("one_vs_rest", [fitted])
    found: list[float] = []
    for state in states:
        for key in ("thresholds", "edges"):
            found += state.get(key, [])
        found += [state[key] for key in ("min", "max") if key in state]
    return found


def probe_grid(version: dict[str, Any], batch: dict[str, Any]) -> np.ndarray:
    """The batch's own scores (and ties), each knot with its neighbouring floats and
    midpoints, and far values, in the shape the version takes."""
    scores = np.array(batch["scores"], dtype=np.float64)
    k = version["n_classes"]
    x = np.array(sorted(knots(version["fitted"])))
    points = np.concatenate(
        [x, np.nextafter(x, -np.inf), np.nextafter(x, np.inf), x[:-1] / 2 + x[1:] / 2]
    )
    if k == 2:
        far = [] if version["method"] == "beta" else [-1e6, -50.0, 50.0, 1e6]
        return np.concatenate([scores, scores[:20], points, far])
    if version["method"] in ("bostrom",) or version["fitted"].get("input") == "probabilities":
        return np.vstack([scores, scores[:20], np.eye(k), np.full((1, k), 1.0 / k)])
    columns = np.resize(points, (points.size // k + 1) * k).reshape(-1, k) if points.size else []
    return np.vstack([scores, scores[:20], *([columns] if len(columns) else [])])


def run(model: bytes, scores: np.ndarray) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {"scores": scores}), strict=True))


def served(client: TestClient, name: str, scores: np.ndarray, intervals: bool) -> dict[str, Any]:
    body = {"scores": scores.tolist(), "intervals": intervals}
    r = client.post(f"/v1/calibrators/{name}/predict", json=body)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("method", METHODS)
def test_every_method_exports_what_predict_serves(method: str, client: TestClient) -> None:
    for i, batch in enumerate(batches_for(method)):
        name = f"onnx-{method}-{i}"
        r = client.post(f"/v1/calibrators/{name}/fit", json={**batch, "method": method})
        assert r.status_code == 201, r.text
        version = r.json()
        r = client.get(f"/v1/calibrators/{name}/versions/latest/artifact?format=onnx")
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/onnx"
        assert r.headers["etag"] == f'"{hashlib.sha256(r.content).hexdigest()}"'
        assert float(r.headers["x-parity-max-abs-diff"]) <= PARITY
        assert int(r.headers["x-parity-probes"]) > 100
        grid = probe_grid(version, batch)
        venn = version["method"] == "venn_abers"
        want = served(client, name, grid, intervals=venn)
        got = run(r.content, grid)
        p = np.array(want["probabilities"])
        assert np.max(np.abs(got["probabilities"] - p)) <= PARITY
        if venn:
            pairs = np.array(want["intervals"])
            assert np.max(np.abs(got["p0"] - pairs[..., 0])) <= PARITY
            assert np.max(np.abs(got["p1"] - pairs[..., 1])) <= PARITY
        else:
            assert set(got) == {"probabilities"}


def test_float32_graph_etag_304_and_metadata(client: TestClient) -> None:
    batch = sigmoid_batch(400, seed=2)
    client.post("/v1/calibrators/churn/fit", json={**batch, "method": "isotonic"})
    client.put("/v1/calibrators/churn/aliases/production", json={"version": 1})
    url = "/v1/calibrators/churn/versions/production/artifact"
    double = client.get(url, params={"format": "onnx"})
    single = client.get(url, params={"format": "onnx", "dtype": "float32"})
    assert double.status_code == single.status_code == 200
    assert double.headers["etag"] != single.headers["etag"]
    assert "churn-v1-float32.onnx" in single.headers["content-disposition"]
    model = onnx.load_from_string(single.content)
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    props = {p.key: p.value for p in model.metadata_props}
    assert props["calibrator"] == "churn"
    assert props["version"] == "1"
    assert props["method"] == "isotonic"
    assert float(props["parity_max_abs_diff"]) == float(single.headers["x-parity-max-abs-diff"])
    scores = np.linspace(-4, 4, 801).astype(np.float32)
    got = run(single.content, scores)["probabilities"]
    assert got.dtype == np.float32
    p = np.array(served(client, "churn", scores.astype(np.float64), False)["probabilities"])
    assert np.max(np.abs(got.astype(np.float64) - p)) <= FLOAT32_BOUND
    # the same bytes again, and 304 for the tag
    assert client.get(url, params={"format": "onnx"}).content == double.content
    again = client.get(
        url, params={"format": "onnx"}, headers={"if-none-match": double.headers["etag"]}
    )
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == double.headers["etag"]


def test_bad_export_queries(client: TestClient) -> None:
    batch = sigmoid_batch(200, seed=3)
    client.post("/v1/calibrators/churn/fit", json={**batch, "method": "platt"})
    url = "/v1/calibrators/churn/versions/1/artifact"
    assert_problem(client.get(url, params={"format": "xml"}), 422, "format")
    assert_problem(client.get(url, params={"format": "onnx", "dtype": "int8"}), 422, "dtype")
    assert_problem(client.get(url, params={"dtype": "float32"}), 422, "dtype", "format=onnx")
    assert_problem(client.get(url.replace("/1/", "/7/"), params={"format": "onnx"}), 404, "7")
    assert_problem(client.get("/v1/calibrators/none/versions/1/artifact?format=onnx"), 404)


@pytest.mark.in_threads  # it patches code the job runs
def test_a_graph_that_would_not_match_predict_is_not_served(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    client.post("/v1/calibrators/churn/fit", json={**sigmoid_batch(200, seed=5), "method": "platt"})

    def mismatched(*args: Any, **kwargs: Any) -> Any:
        raise ExportError("its ONNX graph differs from predict by 1e-09 on 900 probes")

    monkeypatch.setattr(app.export.exporter, "export_onnx", mismatched)
    r = client.get("/v1/calibrators/churn/versions/1/artifact?format=onnx")
    assert_problem(r, 501, "'churn' v1 (platt) is not exported", "differs from predict")
    # the JSON artifact is still there
    assert client.get("/v1/calibrators/churn/versions/1/artifact").status_code == 200
