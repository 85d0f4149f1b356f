"""GET .../artifact: the stored document byte for byte, its sha256 as ETag, 304 on a match."""

from __future__ import annotations

import hashlib

import numpy as np
import orjson

from app.calibration import load_calibrator
from app.store import decode_artifact
from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch


def test_export_etag_and_offline_load(client: TestClient) -> None:
    batch = sigmoid_batch(300, seed=1)
    v = client.post("/v1/calibrators/churn/fit", json={**batch, "method": "isotonic"}).json()
    r = client.get("/v1/calibrators/churn/versions/latest/artifact")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    sha = v["artifact"]["sha256"]
    assert hashlib.sha256(r.content).hexdigest() == sha
    assert r.headers["etag"] == f'"{sha}"'
    assert len(r.content) == v["artifact"]["bytes"]
    document = orjson.loads(r.content)
    assert document["format"] == "calibration-service.artifact"
    assert document["format_version"] == 1
    # offline: decode with its checksum, rebuild, predict as the service does
    artifact = decode_artifact(r.content, sha)
    calibrator = load_calibrator(artifact.method, artifact.params, artifact.state)
    probe = [-3.0, 0.0, 0.4, 5.0]
    served = client.post("/v1/calibrators/churn/predict", json={"scores": probe}).json()
    assert calibrator.predict(np.array(probe)).tolist() == served["probabilities"]
    again = client.get(
        "/v1/calibrators/churn/versions/1/artifact", headers={"if-none-match": f'"{sha}"'}
    )
    assert again.status_code == 304
    assert again.content == b""
    other = client.get(
        "/v1/calibrators/churn/versions/1/artifact", headers={"if-none-match": '"abc"'}
    )
    assert other.status_code == 200
    assert_problem(client.get("/v1/calibrators/churn/versions/2/artifact"), 404, "2")
