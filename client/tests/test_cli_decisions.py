"""``calibration estimate``, ``decision`` and ``adjust`` against the live service: ``--json``
prints what the client's method answers, the tables say the same numbers, and the exit
statuses are the other commands' (0, 1 for the service's refusals, 2 for bad usage)."""

from __future__ import annotations

import csv
import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from calibration_client import Client, cli
from numpy.typing import NDArray

Captured = pytest.CaptureFixture[str]


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, service_url: str) -> None:
    monkeypatch.setenv("CALIBRATION_URL", service_url)
    monkeypatch.delenv("CALIBRATION_KEY", raising=False)


@pytest.fixture
def client(service_url: str) -> Iterator[Client]:
    with Client(service_url, timeout=120.0) as c:
        yield c


@pytest.fixture
def name(client: Client) -> str:
    """A binary calibrator of this test's own, with one platt version."""
    name = f"cli-decide-{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(0)
    scores = rng.normal(size=800)
    labels = (rng.random(800) < 1 / (1 + np.exp(-2 * scores))).astype(int)
    client.fit(name, scores, labels, method="platt")
    return name


def _scores_file(path: Path, scores: NDArray[np.float64]) -> Path:
    """An id column and the scores (``score``, or ``score_0..`` for a matrix)."""
    matrix = scores.reshape(len(scores), -1)
    header = ["score"] if scores.ndim == 1 else [f"score_{j}" for j in range(matrix.shape[1])]
    with path.open("w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["id", *header])
        writer.writerows([[f"r{i}", *map(repr, row)] for i, row in enumerate(matrix.tolist())])
    return path


def _json(capsys: Captured) -> Any:
    return json.loads(capsys.readouterr().out)


def test_estimate_json_and_table(
    tmp_path: Path, name: str, client: Client, capsys: Captured
) -> None:
    scores = np.random.default_rng(1).normal(size=300)
    path = _scores_file(tmp_path / "today.csv", scores)
    assert cli.main(["estimate", name, str(path), "--threshold", "0.3", "--json"]) == 0
    assert _json(capsys) == client.estimate(name, scores, threshold=0.3).document
    assert cli.main(["estimate", name, str(path), "--version", "1"]) == 0
    text = capsys.readouterr().out
    found = client.estimate(name, scores, version=1)
    assert text.startswith(f"{name} version 1: 300 predictions, threshold 0.5\n")
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line}
    assert rows["accuracy"][0] == f"{found.estimated.accuracy:.4f}"
    low, high = found.estimated.intervals["roc_auc"]
    assert rows["roc_auc"] == [f"{found.estimated.roc_auc:.4f}", f"{low:.4f}", f"{high:.4f}"]
    assert isinstance(found.prior.training, float)
    assert rows["1"][0] == f"{found.prior.training:.4f}"  # the prior's row: class 1


def test_estimate_of_k_classes_prints_a_prior_per_class(
    tmp_path: Path, client: Client, capsys: Captured
) -> None:
    name = f"cli-decide-k-{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(2)
    scores = rng.normal(size=(600, 3))
    client.fit(name, scores, np.argmax(scores + rng.normal(size=(600, 3)), axis=1))
    path = _scores_file(tmp_path / "k.csv", scores[:50])
    assert cli.main(["estimate", name, str(path), "--json"]) == 0
    assert _json(capsys) == client.estimate(name, scores[:50]).document
    assert cli.main(["estimate", name, str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{name} version 1: 50 predictions"
    assert [line.split()[0] for line in lines[-3:]] == ["0", "1", "2"]
    assert cli.main(["estimate", name, str(path), "--threshold", "0.4"]) == 1
    assert "threshold" in capsys.readouterr().err


def test_decision_json_and_table(name: str, client: Client, capsys: Captured) -> None:
    options = ["--cost-fp", "1", "--cost-fn", "4", "--benefit-tp", "0.5"]
    assert cli.main(["decision", name, *options, "--json"]) == 0
    found = client.decision(name, cost_fp=1, cost_fn=4, benefit_tp=0.5)
    assert _json(capsys) == found.document
    assert cli.main(["decision", name, "--version", "1", *options]) == 0
    header, columns, best, half = capsys.readouterr().out.splitlines()
    assert header == f"{name} version 1: decide 1 above {found.threshold:.4f}"
    assert columns.split()[:3] == ["decide", "threshold", "expected"]
    assert best.split() == [
        "optimal",
        *(f"{x:.4f}" for x in (found.threshold, found.expected_cost, *found.interval)),
    ]
    assert half.split()[:4] == ["at", "0.5", "0.5000", f"{found.at_half.expected_cost:.4f}"]
    assert cli.main(["decision", name, "--cost-fp", "0", "--cost-fn", "0"]) == 1
    assert "all 0" in capsys.readouterr().err


def test_adjust_json_and_table(name: str, client: Client, capsys: Captured) -> None:
    assert cli.main(["adjust", name, "1", "--prior", "0.2", "--tag", "why=spring", "--json"]) == 0
    printed = _json(capsys)
    assert printed == client.version(name, printed["version"]).document
    made = client.adjust(name, 1, prior=0.2, tags={"why": "spring"})  # the method's answer
    drop = ("version", "created_at")
    assert {k: v for k, v in printed.items() if k not in drop} == {
        k: v for k, v in made.document.items() if k not in drop
    }
    assert cli.main(["adjust", name, "latest", "--priors", "0.7,0.3"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[1].split()[:2] == ["4", "platt"]
    assert table[-1] == "version 3 corrected from prior 0.2000 to 0.3000"
    source = client.version(name, 4).source
    assert source is not None
    assert source["adjusted"]["parent_version"] == 3


def test_adjust_to_the_traffic_prior(name: str, client: Client, capsys: Captured) -> None:
    scores = np.random.default_rng(3).normal(size=200) + 1.0
    client.predict(name, scores, ids=[f"t{i}" for i in range(200)])
    since = (datetime.now(UTC) - timedelta(days=2)).strftime("%Y-%m-%dT00:00:00Z")
    argv = ["adjust", name, "1", "--traffic", "--since", since, "--json"]
    for _ in range(50):  # the log is written within a second
        status = cli.main(argv)
        if status == 0:
            break
        capsys.readouterr()
    assert status == 0
    estimated = _json(capsys)["source"]["adjusted"]["estimated_from"]
    assert estimated["n_predictions"] == 200
    assert estimated["since"].startswith(since[:19])


def test_adjust_refused_by_the_service_is_1(name: str, capsys: Captured) -> None:
    assert cli.main(["adjust", name, "1", "--prior", "1.5"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: prior must be a number strictly between 0 and 1")
    assert cli.main(["adjust", name, "1", "--priors", "0.5,0.6"]) == 1
    assert "sum" in capsys.readouterr().err
    with Client(os.environ["CALIBRATION_URL"]) as client:
        assert [v.version for v in client.versions(name)] == [1]


@pytest.mark.parametrize(
    "argv",
    [
        ["estimate", "x"],
        ["estimate", "x", "f.csv", "--threshold", "half"],
        ["decision", "x"],
        ["decision", "x", "--cost-fp", "1"],
        ["decision", "x", "--cost-fp", "one", "--cost-fn", "1"],
        ["adjust", "x", "1"],
        ["adjust", "x"],
        ["adjust", "x", "1", "--prior", "0.1", "--traffic"],
        ["adjust", "x", "1", "--prior", "traffic"],
        ["adjust", "x", "1", "--priors", "0.5;0.5"],
    ],
)
def test_bad_usage_is_2(argv: list[str], capsys: Captured) -> None:
    assert cli.main(argv) == 2
    assert "usage: calibration" in capsys.readouterr().err


def test_a_range_without_traffic_is_2_before_any_request(capsys: Captured) -> None:
    assert cli.main(["--url", "http://127.0.0.1:9", "adjust", "x", "1", "--prior", "0.1",
                     "--since", "2026-01-01"]) == 2  # fmt: skip
    assert capsys.readouterr().err == "error: --since and --until go with --traffic\n"


def test_a_missing_file_is_2(tmp_path: Path, capsys: Captured) -> None:
    assert cli.main(["estimate", "x", str(tmp_path / "nope.csv")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nope.csv'}: no such file\n"


def test_an_adjust_whose_answer_was_lost_says_so_and_is_sent_once(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured
) -> None:
    seen: list[httpx.Request] = []

    def dropped(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        raise httpx.RemoteProtocolError("Server disconnected", request=request)

    def made(url: str, api_key: str | None = None, **options: Any) -> Client:
        http = httpx.Client(transport=httpx.MockTransport(dropped))
        client = Client(url, api_key=api_key, http_client=http, **options)
        client._sleep = lambda seconds: None
        return client

    monkeypatch.setattr(cli, "Client", made)
    assert cli.main(["adjust", "loans", "3", "--prior", "0.1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the service could not be reached")
    assert "POST /v1/calibrators/loans/versions/3/adjust was not retried" in err
    assert len(seen) == 1
    assert cli.main(["decision", "loans", "--cost-fp", "1", "--cost-fn", "2"]) == 1
    assert "not retried" not in capsys.readouterr().err
    assert len(seen) == 5  # a GET: tried again, three times
