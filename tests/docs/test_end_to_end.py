"""The README's path, for real: migrate a fresh SQLite file, serve with uvicorn, curl it; and
the README's own fit and predict, run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from demo.server import stop_process_group
from tests.api.helpers import as_csv, sigmoid_batch
from tests.ports import free_port


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("served")
    env = {**os.environ, "CALIBRATION_DATABASE_URL": f"sqlite:///{workdir / 'data' / 'c.db'}"}
    subprocess.run([sys.executable, "-m", "app.store.migrate"], env=env, check=True, timeout=120)
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "app.main:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        start_new_session=True,  # stop_process_group ends it with anything it started
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, proc)
        yield base
    finally:
        stop_process_group(proc)


READY_SECONDS = 90.0
"""How long a server may take to answer: a few seconds, several times that on a busy machine
(the bound costs time only when the start fails)."""


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


def test_curl_walk_through(server: str) -> None:
    batch = sigmoid_batch(2000, seed=1)
    fit = httpx.post(
        f"{server}/v1/calibrators/churn/fit?method=isotonic",
        files={"file": ("batch.csv", as_csv(batch), "text/csv")},
        timeout=60,
    )
    assert fit.status_code == 201, fit.text
    assert fit.json()["version"] == 1
    assert fit.headers["location"] == "/v1/calibrators/churn/versions/1"
    predict = httpx.post(
        f"{server}/v1/calibrators/churn/predict", json={"scores": [-1.5, 0.0, 2.5]}, timeout=10
    )
    assert predict.status_code == 200
    p = predict.json()["probabilities"]
    assert p == sorted(p)
    assert all(0.0 <= x <= 1.0 for x in p)
    diagnostics = httpx.get(
        f"{server}/v1/calibrators/churn/versions/latest/diagnostics", timeout=10
    ).json()
    assert len(diagnostics["calibrated"]["bins"]) == 10
    assert httpx.get(f"{server}/readyz").status_code == 200
    docs = httpx.get(f"{server}/docs")
    assert docs.status_code == 200
    assert "swagger" in docs.text.lower()


def test_the_readme_fit_and_predict_run_as_written(server: str) -> None:
    """Each ``sh`` block of the README's "Fit and predict" prints what its ``# `` line shows
    (up to a closing ``…``)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## Fit and predict") :].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    for block in blocks:
        shown = [line[2:] for line in block.splitlines() if line.startswith("# ")]
        run = subprocess.run(
            ["bash", "-c", block.replace("http://127.0.0.1:8000", server)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        assert len(shown) == 1, block
        assert run.stdout.startswith(shown[0].removesuffix("…")), (run.stdout, shown[0])
