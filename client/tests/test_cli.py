"""The ``calibration`` command against the live service of ``service_url``: every command,
its tables and ``--json``, exit statuses 0/1/2, the environment, the upload's progress bar,
and one run of the installed console script."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from calibration_client import Client, cli
from calibration_client._cli_progress import PROGRESS_BYTES
from numpy.typing import NDArray

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing answers there
Captured = pytest.CaptureFixture[str]


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, service_url: str) -> None:
    monkeypatch.setenv("CALIBRATION_URL", service_url)
    monkeypatch.delenv("CALIBRATION_KEY", raising=False)


@pytest.fixture
def name() -> str:
    return f"cli-{uuid.uuid4().hex[:12]}"


def _batch(n: int, seed: int = 0) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=n)
    labels = (rng.uniform(size=n) < 1 / (1 + np.exp(-2 * scores))).astype(np.int64)
    return scores, labels


def _write_csv(path: Path, header: list[str], columns: list[Any]) -> Path:
    rows = np.column_stack([np.asarray(c).astype(str) for c in columns])
    with path.open("w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows.tolist())
    return path


def _fitted(tmp_path: Path, name: str, capsys: Captured, *options: str) -> dict[str, Any]:
    scores, labels = _batch(1000)
    batch = _write_csv(tmp_path / "batch.csv", ["score", "label"], [scores, labels])
    assert cli.main(["fit", name, str(batch), "--json", *options]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def _read_output(text: str) -> tuple[list[str], list[list[str]]]:
    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], rows[1:]


def test_fit_prints_a_table_and_json(tmp_path: Path, name: str, capsys: Captured) -> None:
    scores, labels = _batch(1000)
    batch = _write_csv(tmp_path / "b.csv", ["score", "label"], [scores, labels])
    options = ["--method", "platt", "--params", '{"max_iter": 50}', "--tag", "team=risk"]
    assert cli.main(["fit", name, str(batch), *options, "--tag", "run=a=b"]) == 0
    header, first = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["version", "method", "n_samples"]
    assert first.split()[:3] == ["1", "platt", "1000"]
    document = _fitted(tmp_path, name, capsys, "--method", "isotonic", "--description", "d")
    assert document["version"] == 2
    assert document["method"] == "isotonic"
    assert document["n_samples"] == 1000
    assert document["description"] == "d"
    with Client(os.environ["CALIBRATION_URL"]) as client:
        first_version = client.version(name, 1)
    assert first_version.tags == {"team": "risk", "run": "a=b"}
    assert first_version.params["max_iter"] == 50


def test_fit_parquet(tmp_path: Path, name: str, capsys: Captured) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    scores, labels = _batch(500)
    path = tmp_path / "batch.data"  # the content says Parquet, not the name
    pq.write_table(pa.table({"score": scores, "label": labels}), path)
    assert cli.main(["fit", name, str(path), "--method", "platt", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_samples"] == 500


def test_an_invalid_batch_is_1_with_the_services_detail(
    tmp_path: Path, name: str, capsys: Captured
) -> None:
    path = _write_csv(tmp_path / "b.csv", ["score", "label"], [[0.1, 0.2, 0.3], [0, 1, 2]])
    assert cli.main(["fit", name, str(path), "--method", "platt"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ")
    assert "label" in captured.err


@pytest.mark.parametrize(
    "argv",
    [
        ["bogus"],
        [],
        ["fit", "x"],
        ["fit", "x", "b.csv", "--tag", "novalue"],
        ["fit", "x", "b.csv", "--params", "[1]"],
        ["fit", "x", "b.csv", "--params", "{not json"],
        ["alias", "x", "production", "three"],
        ["diagnostics", "x", "--n-bins", "ten"],
    ],
)
def test_bad_usage_is_2(argv: list[str], capsys: Captured) -> None:
    assert cli.main(argv) == 2
    assert "usage: calibration" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["fit", "predict"])
def test_a_missing_file_is_2(tmp_path: Path, command: str, capsys: Captured) -> None:
    assert cli.main([command, "x", str(tmp_path / "nope.csv")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nope.csv'}: no such file\n"


def test_a_file_without_scores_is_2(tmp_path: Path, capsys: Captured) -> None:
    path = _write_csv(tmp_path / "p.csv", ["id", "value"], [["a"], [1.0]])
    assert cli.main(["predict", "x", str(path)]) == 2
    assert "no score column" in capsys.readouterr().err


def test_an_unreachable_service_is_1(capsys: Captured) -> None:
    assert cli.main(["--url", UNREACHABLE, "versions", "x"]) == 1
    assert capsys.readouterr().err.startswith("error: the service could not be reached")


def test_an_unknown_calibrator_is_1(name: str, capsys: Captured) -> None:
    assert cli.main(["versions", name]) == 1
    assert capsys.readouterr().err == f"error: calibrator '{name}' not found\n"


def test_url_and_key_from_options_then_environment(
    monkeypatch: pytest.MonkeyPatch, service_url: str, name: str, capsys: Captured
) -> None:
    made: list[tuple[str, str | None]] = []

    def recording(url: str, api_key: str | None = None, **options: Any) -> Client:
        made.append((url, api_key))
        return Client(url, api_key=api_key, **options)

    monkeypatch.setattr(cli, "Client", recording)
    monkeypatch.setenv("CALIBRATION_KEY", "from-env")
    cli.main(["versions", name])
    monkeypatch.setenv("CALIBRATION_URL", UNREACHABLE)
    cli.main(["--url", service_url, "--key", "from-option", "versions", name])
    monkeypatch.delenv("CALIBRATION_URL")
    monkeypatch.delenv("CALIBRATION_KEY")
    cli.main(["versions", name])
    assert made == [
        (service_url, "from-env"),
        (service_url, "from-option"),
        ("http://127.0.0.1:8000", None),
    ]
    capsys.readouterr()


def test_a_big_upload_shows_progress(tmp_path: Path, name: str, capsys: Captured) -> None:
    scores, labels = _batch(200_000)
    path = _write_csv(tmp_path / "big.csv", ["score", "label"], [scores, labels])
    assert path.stat().st_size > PROGRESS_BYTES
    assert cli.main(["fit", name, str(path), "--method", "platt", "--progress"]) == 0
    err = capsys.readouterr().err
    assert "100%" in err
    assert "[" + "#" * 30 + "]" in err
    assert err.endswith("\n")
    assert cli.main(["fit", name, str(path), "--method", "platt"]) == 0
    assert capsys.readouterr().err == ""  # stderr is no terminal here


def test_predict_writes_ids_scores_and_the_clients_probabilities(
    tmp_path: Path, name: str, capsys: Captured
) -> None:
    _fitted(tmp_path, name, capsys, "--method", "platt")
    _fitted(tmp_path, name, capsys, "--method", "isotonic")
    scores, _ = _batch(50, seed=1)
    ids = [f"row-{i}" for i in range(50)]
    path = _write_csv(tmp_path / "p.csv", ["id", "score"], [ids, scores])
    assert cli.main(["predict", name, str(path), "--version", "1"]) == 0
    header, rows = _read_output(capsys.readouterr().out)
    assert header == ["id", "score", "probability"]
    assert [row[0] for row in rows] == ids
    with Client(os.environ["CALIBRATION_URL"]) as client:
        expected = client.predict(name, scores, version=1).probabilities
        latest = client.predict(name, scores).probabilities
    np.testing.assert_array_equal([float(row[1]) for row in rows], scores)
    np.testing.assert_array_equal([float(row[2]) for row in rows], expected)
    out = tmp_path / "out.csv"
    assert cli.main(["predict", name, str(path), "-o", str(out)]) == 0
    assert capsys.readouterr().out == ""
    _, rows = _read_output(out.read_text())
    np.testing.assert_array_equal([float(row[2]) for row in rows], latest)


def test_predict_multiclass_parquet(tmp_path: Path, name: str, capsys: Captured) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rng = np.random.default_rng(2)
    scores = rng.normal(size=(300, 3))
    labels = np.argmax(scores + rng.normal(size=(300, 3)), axis=1)
    with Client(os.environ["CALIBRATION_URL"]) as client:
        client.fit(name, scores, labels, method="platt")
        expected = client.predict(name, scores[:20]).probabilities
    table: dict[str, Any] = {"id": [f"r{i}" for i in range(20)]}
    table |= {f"score_{j}": scores[:20, j] for j in range(3)}
    pq.write_table(pa.table(table), tmp_path / "p.parquet")
    assert cli.main(["predict", name, str(tmp_path / "p.parquet")]) == 0
    header, rows = _read_output(capsys.readouterr().out)
    assert header == ["id", "score_0", "score_1", "score_2"] + [
        f"probability_{j}" for j in range(3)
    ]
    assert rows[3][0] == "r3"
    np.testing.assert_array_equal(np.array(rows)[:, 1:4].astype(float), scores[:20])
    np.testing.assert_array_equal(np.array(rows)[:, 4:].astype(float), expected)


def test_versions_and_alias(tmp_path: Path, name: str, capsys: Captured) -> None:
    _fitted(tmp_path, name, capsys, "--method", "platt")
    _fitted(tmp_path, name, capsys, "--method", "isotonic")
    assert cli.main(["alias", name, "production", "1"]) == 0
    assert capsys.readouterr().out == f"{name}: production -> version 1\n"
    assert cli.main(["versions", name]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split("  ")[0] == "version"
    assert "log loss cv" in header
    assert [row.split()[:2] for row in rows] == [["2", "isotonic"], ["1", "platt"]]
    assert "production" in rows[1]
    assert cli.main(["versions", name, "--json"]) == 0
    documents = json.loads(capsys.readouterr().out)
    assert [d["version"] for d in documents] == [2, 1]
    assert documents[1]["aliases"] == ["production"]
    assert cli.main(["alias", name, "production", "9"]) == 1
    assert capsys.readouterr().err.startswith("error: ")


def test_diagnostics(tmp_path: Path, name: str, capsys: Captured) -> None:
    _fitted(tmp_path, name, capsys, "--method", "platt")
    png = tmp_path / "d.png"
    assert cli.main(["diagnostics", name, "--n-bins", "5", "--png", str(png)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"{name} version 1: 5 uniform bins")
    assert "calibrated" in text
    assert "raw scores" in text
    assert "log_loss" in text
    assert png.read_bytes().startswith(b"\x89PNG")
    assert cli.main(["diagnostics", name, "--version", "1", "--n-bins", "4", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["n_bins"] == 4
    assert len(document["calibrated"]["bins"]) == 4
    assert cli.main(["diagnostics", name, "--n-bins", "1"]) == 1
    assert "n_bins" in capsys.readouterr().err


def test_the_installed_command(tmp_path: Path, name: str, service_url: str) -> None:
    scores, labels = _batch(300)
    batch = _write_csv(tmp_path / "b.csv", ["score", "label"], [scores, labels])
    command = Path(sys.executable).with_name("calibration")
    env = {**os.environ, "CALIBRATION_URL": service_url}
    done = subprocess.run(
        [str(command), "fit", name, str(batch), "--method", "platt", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["version"] == 1
    done = subprocess.run(
        [sys.executable, "-m", "calibration_client", "nope"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 2
    assert "invalid choice" in done.stderr
