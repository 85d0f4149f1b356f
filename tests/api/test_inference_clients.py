"""The Open Inference Protocol through its real client: tritonclient[http] against the service
served by uvicorn with API keys, answers compared with /v1 predict bit for bit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from app.keys import new_key
from demo.server import stop_process_group
from tests.api.helpers import sigmoid_batch
from tests.api.test_multiclass import logits_batch
from tests.ports import free_port

READ_KEY, READ_ENTRY = new_key("model-server", "read")
WRITE_KEY, WRITE_ENTRY = new_key("admin", "write")
WRITE = {"Authorization": f"Bearer {WRITE_KEY}"}
ROOT = Path(__file__).resolve().parents[2]
READY_SECONDS = 90.0
"""How long the server may take to answer: a few seconds, several times that on a busy machine
(the bound costs time only when the start fails)."""


def read() -> dict[str, str]:
    """The read key's header, a new dict each call: tritonclient adds its own headers to the
    dict it is given (Inference-Header-Content-Length), which must not leak into the next."""
    return {"Authorization": f"Bearer {READ_KEY}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[str]:
    """The service with a read and a write key, a binary (Platt), a venn_abers and a k-class
    calibrator; an alias ``production`` on the binary one's v1."""
    workdir = tmp_path_factory.mktemp("v2")
    shutil.copyfile(sqlite_template, workdir / "c.db")  # migrated to head, empty
    env = {
        **os.environ,
        "CALIBRATION_DATABASE_URL": f"sqlite:///{workdir / 'c.db'}",
        "CALIBRATION_API_KEYS": f"{READ_ENTRY.entry()},{WRITE_ENTRY.entry()}",
        "CALIBRATION_LOG_LEVEL": "warning",
    }
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "app.main:app", "--port", str(port)]
    proc = subprocess.Popen(command, env=env, cwd=ROOT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc)
        fits = {
            "churn": {**sigmoid_batch(), "method": "platt"},
            "va": {**sigmoid_batch(), "method": "venn_abers"},
            "digits": {**logits_batch(300), "method": "temperature"},
        }
        for name, body in fits.items():
            fit = httpx.post(
                f"{base}/v1/calibrators/{name}/fit", json=body, headers=WRITE, timeout=60
            )
            assert fit.status_code == 201, fit.text
        alias = {"version": 1}
        url = f"{base}/v1/calibrators/churn/aliases/production"
        assert httpx.put(url, json=alias, headers=WRITE, timeout=10).is_success
        yield f"127.0.0.1:{port}"
    finally:
        stop_process_group(proc)


def wait_healthy(base: str, proc: subprocess.Popen[bytes]) -> None:
    """Return once ``base`` answers /healthz; fail when ``proc`` exits first or after
    :data:`READY_SECONDS`, having stopped it and every process of its group (it must have
    been started with ``start_new_session=True``)."""
    deadline = time.monotonic() + READY_SECONDS
    with httpx.Client(timeout=1) as client:  # one for every poll (LocalService says why)
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if client.get(f"{base}/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
    exited = proc.poll()
    stop_process_group(proc)
    if exited is not None:
        pytest.fail(f"the server exited {exited} before it answered")
    pytest.fail(f"the server did not start within {READY_SECONDS:g} s")


@pytest.fixture
def client(server: str) -> Iterator[triton.InferenceServerClient]:
    with triton.InferenceServerClient(server) as c:
        yield c


def v1_predict(server: str, name: str, scores: np.ndarray, **query: Any) -> dict[str, Any]:
    r = httpx.post(
        f"http://{server}/v1/calibrators/{name}/predict",
        json={"scores": scores.tolist()},
        params=query,
        headers=read(),
        timeout=10,
    )
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def scores_input(scores: np.ndarray, datatype: str, binary: bool) -> triton.InferInput:
    tensor = triton.InferInput("scores", list(scores.shape), datatype)
    tensor.set_data_from_numpy(
        scores.astype(np.float32 if datatype == "FP32" else np.float64), binary
    )
    return tensor


def test_server_and_model_metadata_and_readiness(client: triton.InferenceServerClient) -> None:
    assert client.is_server_live()
    assert client.is_server_ready()  # the probes are open: no key
    meta = client.get_server_metadata(headers=read())
    assert "binary_tensor_data" in meta["extensions"]
    model = client.get_model_metadata("digits", headers=read())
    assert model["inputs"] == [{"name": "scores", "datatype": "FP64", "shape": [-1, 3]}]
    assert client.is_model_ready("churn", "production", headers=read())
    assert [o["name"] for o in client.get_model_metadata("va", "1", headers=read())["outputs"]] == [
        "probabilities",
        "p0",
        "p1",
    ]


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("datatype", ["FP64", "FP32"])
@pytest.mark.parametrize("version", ["", "1", "production"])
def test_binary_calibrator_infer_equals_v1_predict(
    server: str, client: triton.InferenceServerClient, binary: bool, datatype: str, version: str
) -> None:
    scores = np.random.default_rng(5).normal(scale=2.0, size=257)
    outputs = [triton.InferRequestedOutput("probabilities", binary_data=binary)]
    result = client.infer(
        "churn",
        [scores_input(scores, datatype, binary)],
        model_version=version,
        outputs=outputs,
        headers=read(),
    )
    got = result.as_numpy("probabilities")
    sent = scores.astype(np.float32).astype(np.float64) if datatype == "FP32" else scores
    assert got.dtype == np.float64
    assert got.tolist() == v1_predict(server, "churn", sent)["probabilities"]
    assert result.get_response()["model_version"] == "1"


@pytest.mark.parametrize("binary", [False, True])
def test_multiclass_infer_equals_v1_predict(
    server: str, client: triton.InferenceServerClient, binary: bool
) -> None:
    rows = np.array(logits_batch(50, seed=3)["scores"])
    outputs = [triton.InferRequestedOutput("probabilities", binary_data=binary)]
    result = client.infer(
        "digits", [scores_input(rows, "FP64", binary)], outputs=outputs, headers=read()
    )
    got = result.as_numpy("probabilities")
    assert got.shape == (50, 3)
    assert got.tolist() == v1_predict(server, "digits", rows)["probabilities"]


def test_venn_abers_p0_and_p1(server: str, client: triton.InferenceServerClient) -> None:
    scores = np.linspace(-4, 4, 33)
    outputs = [triton.InferRequestedOutput(name) for name in ("probabilities", "p0", "p1")]
    result = client.infer(
        "va", [scores_input(scores, "FP64", True)], outputs=outputs, headers=read()
    )
    v1 = v1_predict(server, "va", scores, intervals="true")
    assert result.as_numpy("probabilities").tolist() == v1["probabilities"]
    assert result.as_numpy("p0").tolist() == [low for low, _ in v1["intervals"]]
    assert result.as_numpy("p1").tolist() == [high for _, high in v1["intervals"]]


def test_errors_reach_the_client_with_their_status(client: triton.InferenceServerClient) -> None:
    scores = scores_input(np.array([0.1, 0.2]), "FP64", True)
    with pytest.raises(InferenceServerException) as no_key:
        client.infer("churn", [scores])
    assert no_key.value.status() == "401"
    assert "API key" in no_key.value.message()
    with pytest.raises(InferenceServerException) as unknown:
        client.infer("nobody", [scores], headers=read())
    assert (unknown.value.status(), "nobody" in unknown.value.message()) == ("404", True)
    with pytest.raises(InferenceServerException) as wrong_shape:
        client.infer("digits", [scores], headers=read())  # a vector to a 3-class calibrator
    assert wrong_shape.value.status() == "400"
    with pytest.raises(InferenceServerException) as no_interval:
        client.infer("churn", [scores], outputs=[triton.InferRequestedOutput("p0")], headers=read())
    assert "p0" in no_interval.value.message()


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_requests(
    server: str, client: triton.InferenceServerClient, algorithm: str
) -> None:
    scores = np.linspace(-3, 3, 101)
    result = client.infer(
        "churn",
        [scores_input(scores, "FP64", True)],
        headers=read(),
        request_compression_algorithm=algorithm,
    )
    assert (
        result.as_numpy("probabilities").tolist()
        == v1_predict(server, "churn", scores)["probabilities"]
    )
