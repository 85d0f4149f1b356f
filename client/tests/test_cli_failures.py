"""The ``calibration`` command when things go wrong, never with a traceback: values it cannot
send and files it cannot write are 2, an interrupt is 130, and a fit retried after a 503
(a fake server behind the command's Client) sends one Idempotency-Key. And predict's
progress bar."""

from __future__ import annotations

import csv
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from calibration_client import Client, cli
from client_fakes import VERSION, busy

Captured = pytest.CaptureFixture[str]


@pytest.fixture
def name(service_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A calibrator fitted on the live service, which the commands talk to."""
    monkeypatch.setenv("CALIBRATION_URL", service_url)
    monkeypatch.delenv("CALIBRATION_KEY", raising=False)
    name = f"cli-fail-{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(0)
    scores = rng.normal(size=300)
    with Client(service_url) as client:
        client.fit(name, scores, (scores + rng.normal(size=300) > 0).astype(int), method="platt")
    return name


def _scores_file(path: Path, scores: list[str]) -> Path:
    with path.open("w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["id", "score"])
        writer.writerows([[f"r{i}", s] for i, s in enumerate(scores)])
    return path


def _fake_service(
    monkeypatch: pytest.MonkeyPatch, handler: Callable[[httpx.Request], httpx.Response]
) -> list[httpx.Request]:
    """The command's Client sends to ``handler`` (each request recorded), without sleeping."""
    seen: list[httpx.Request] = []

    def recording(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    def made(url: str, api_key: str | None = None, **options: Any) -> Client:
        http = httpx.Client(transport=httpx.MockTransport(recording))
        client = Client(url, api_key=api_key, http_client=http, **options)
        client._sleep = lambda seconds: None
        return client

    monkeypatch.setattr(cli, "Client", made)
    return seen


def test_a_nan_score_is_2(tmp_path: Path, capsys: Captured) -> None:
    path = _scores_file(tmp_path / "p.csv", ["0.5", "nan", "0.1"])
    assert cli.main(["--url", "http://127.0.0.1:9", "predict", "x", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.err == "error: scores[1] is NaN\n"
    assert captured.out == ""


def test_an_output_in_a_missing_directory_is_2(tmp_path: Path, name: str, capsys: Captured) -> None:
    path = _scores_file(tmp_path / "p.csv", ["0.5", "0.1"])
    out = tmp_path / "missing" / "out.csv"
    assert cli.main(["predict", name, str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {out}: No such file or directory\n"


def test_a_png_into_a_directory_is_2(tmp_path: Path, name: str, capsys: Captured) -> None:
    assert cli.main(["diagnostics", name, "--png", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path}: Is a directory\n"


def test_an_interrupt_is_130_quietly(monkeypatch: pytest.MonkeyPatch, capsys: Captured) -> None:
    def interrupted(request: httpx.Request) -> httpx.Response:
        raise KeyboardInterrupt

    _fake_service(monkeypatch, interrupted)
    assert cli.main(["versions", "x"]) == 130
    assert capsys.readouterr() == ("", "")


def test_a_fit_retried_after_a_503_sends_one_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Captured
) -> None:
    answers = iter([busy({"Retry-After": "0"}), busy(), httpx.Response(201, json=VERSION)])
    seen = _fake_service(monkeypatch, lambda request: next(answers))
    path = tmp_path / "b.csv"
    path.write_text("score,label\n0.1,0\n0.9,1\n")
    assert cli.main(["--url", "http://calibration.test", "fit", "churn", str(path)]) == 0
    assert len(seen) == 3
    keys = {request.headers["Idempotency-Key"] for request in seen}
    assert len(keys) == 1
    assert [request.content for request in seen] == [path.read_bytes()] * 3
    assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["1", "platt"]


def test_predict_shows_its_upload_progress(tmp_path: Path, name: str, capsys: Captured) -> None:
    scores = np.random.default_rng(1).normal(size=20_000)  # binary tensors, 160 kB
    path = _scores_file(tmp_path / "p.csv", scores.astype(str).tolist())
    out = tmp_path / "out.csv"
    assert cli.main(["predict", name, str(path), "-o", str(out), "--progress"]) == 0
    err = capsys.readouterr().err
    assert "100%" in err
    assert "[" + "#" * 30 + "]" in err
    assert err.endswith("\n")
    assert len(out.read_text().splitlines()) == 20_001
    assert cli.main(["predict", name, str(path), "-o", str(out)]) == 0
    assert capsys.readouterr().err == ""  # stderr is no terminal here


def test_a_url_that_is_not_one_is_2_without_a_traceback(capsys: Captured) -> None:
    assert cli.main(["--url", "http://[::1", "versions", "churn"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: base_url")
    assert "Traceback" not in err
