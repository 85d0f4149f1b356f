"""The README's path, for real: migrate a fresh SQLite file, serve it as ``make run`` does, curl it
(:func:`~tests.docs.conftest.make_run`, the server this package shares); and the README's own
fit and predict, run as written."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import httpx

from tests.api.helpers import as_csv, sigmoid_batch


def test_curl_walk_through(make_run: str) -> None:
    batch = sigmoid_batch(2000, seed=1)
    fit = httpx.post(
        f"{make_run}/v1/calibrators/churn/fit?method=isotonic",
        files={"file": ("batch.csv", as_csv(batch), "text/csv")},
        timeout=60,
    )
    assert fit.status_code == 201, fit.text
    assert fit.json()["version"] == 1
    assert fit.headers["location"] == "/v1/calibrators/churn/versions/1"
    predict = httpx.post(
        f"{make_run}/v1/calibrators/churn/predict", json={"scores": [-1.5, 0.0, 2.5]}, timeout=10
    )
    assert predict.status_code == 200
    p = predict.json()["probabilities"]
    assert p == sorted(p)
    assert all(0.0 <= x <= 1.0 for x in p)
    diagnostics = httpx.get(
        f"{make_run}/v1/calibrators/churn/versions/latest/diagnostics", timeout=10
    ).json()
    assert len(diagnostics["calibrated"]["bins"]) == 10
    assert httpx.get(f"{make_run}/readyz").status_code == 200
    docs = httpx.get(f"{make_run}/docs")
    assert docs.status_code == 200
    assert "swagger" in docs.text.lower()


def test_the_readme_fit_and_predict_run_as_written(make_run: str) -> None:
    """Each ``sh`` block of the README's "Fit and predict" prints what its ``# `` line shows,
    an ``…`` standing for what it leaves out (the digits of a probability past the 14th, which
    move by an ulp between numpy and scipy releases; the rest of a long line)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## Fit and predict") :].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    for block in blocks:
        shown = [line[2:] for line in block.splitlines() if line.startswith("# ")]
        run = subprocess.run(
            ["bash", "-c", block.replace("http://127.0.0.1:8000", make_run)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        assert len(shown) == 1, block
        pattern = ".*?".join(re.escape(part) for part in shown[0].split("…"))
        assert re.fullmatch(pattern, run.stdout.strip()), (run.stdout, shown[0])
