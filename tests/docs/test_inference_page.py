"""docs/inference.md's snippets, run as written against ``make run``'s server (this package's
:func:`~tests.docs.conftest.make_run`): tritonclient, curl on /v2, and the ONNX export
downloaded and run in onnxruntime. (The Open Inference Protocol against a server with keys is
tests/api/test_inference_clients.py.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.api.helpers import sigmoid_batch
from tests.docs.test_readme_loop import shell_block

ROOT = Path(__file__).resolve().parents[2]
INFERENCE = "docs/inference.md"
"""The page whose snippets (tritonclient, curl on /v2, the ONNX export) run here as written."""

NAME = "inference-page"
"""The page's calibrator, the walk's ``churn``, under a name of this test's own on the server
the package shares (the walk's test fits ``churn`` there, and its version 1 must be that)."""


def python_block(page: str, after: str) -> str:
    """The first ``python`` block of ``page`` (a path from the repository's root) after the
    first occurrence of ``after``."""
    text = (ROOT / page).read_text()
    match = re.search(r"```python\n(.*?)```", text[text.index(after) :], re.S)
    assert match is not None, after
    return match.group(1)


def as_written(block: str, base: str) -> str:
    """``block`` with the page's address and calibrator replaced by this test's."""
    return (
        block.replace("http://127.0.0.1:8000", base)
        .replace("127.0.0.1:8000", base.removeprefix("http://"))
        .replace("churn", NAME)
    )


def test_the_inference_page_snippets_run_as_written(make_run: str, tmp_path: Path) -> None:
    """Against ``make run``'s server (no keys, one worker) and the page's calibrator at v1."""
    base = make_run
    fit = httpx.post(f"{base}/v1/calibrators/{NAME}/fit", json=sigmoid_batch(), timeout=60)
    assert fit.status_code == 201, fit.text
    assert fit.json()["version"] == 1
    snippet = as_written(python_block(INFERENCE, "## The Open Inference Protocol"), base)
    run = subprocess.run(
        [sys.executable, "-c", snippet], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    printed = [float(p) for p in run.stdout.strip().strip("[]").split()]
    v1 = httpx.post(
        f"{base}/v1/calibrators/{NAME}/predict?version=1",
        json={"scores": [-1.5, 0.0, 2.5]},
        timeout=10,
    ).json()["probabilities"]
    assert printed == pytest.approx(v1, rel=1e-7)  # numpy prints 8 significant digits
    curl = as_written(shell_block(INFERENCE, "## The Open Inference Protocol"), base)
    answer = subprocess.run(
        ["bash", "-c", curl], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(answer.stdout)["outputs"][0]["data"] == v1
    # the ONNX export: downloaded with curl, run by onnxruntime, in the snippet's folder
    after = "## ONNX export"
    curl = as_written(shell_block(INFERENCE, after), base)
    headers = subprocess.run(
        ["bash", "-c", curl], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert headers.returncode == 0, headers.stderr
    assert float(headers.stdout.split(":")[1]) <= 1e-12
    run = subprocess.run(
        [sys.executable, "-c", as_written(python_block(INFERENCE, after), base)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    printed = [float(p) for p in run.stdout.strip().strip("[]").split()]
    assert printed == pytest.approx(v1, rel=1e-7)
