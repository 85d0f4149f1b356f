"""The whole traffic loop of docs/traffic.md, run as written: its shell blocks, against a served
app on SQLite and on PostgreSQL (log, outcomes, monitoring, refit from traffic, compare,
promote), after docs/api.md's batch; and docs/api.md's Parquet upload."""

from __future__ import annotations

import ast
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from demo.server import LocalService
from tests.api.helpers import sigmoid_batch
from tests.conftest import migrated_database

ROOT = Path(__file__).resolve().parents[2]


def shell_block(page: str, after: str) -> str:
    """The first ``sh`` block of ``page`` (a path from the repository's root, e.g.
    ``docs/api.md``) after the first occurrence of ``after``."""
    text = (ROOT / page).read_text()
    start = text.index(after)
    match = re.search(r"```sh\n(.*?)```", text[start:], re.S)
    assert match is not None, after
    return match.group(1)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """``python -m app.serve`` on a free loopback port over a migrated database of each backend,
    one worker, as ``make run`` serves; one process for this module's tests (each fits
    calibrators of its own names). On SQLite that is the package's
    :func:`~tests.docs.conftest.make_run`."""
    if request.param == "sqlite":
        yield request.getfixturevalue("make_run")
        return
    folder = tmp_path_factory.mktemp(f"readme-{request.param}")
    with migrated_database(request.param, request, folder) as database_url:
        service = LocalService(database_url, folder / "serve.log", workers=1)
        try:
            service.wait_until_ready()
            yield service.base_url
        finally:
            service.stop()


def test_the_readme_loop_runs_as_written(served: str, tmp_path: Path) -> None:
    batch = shell_block("docs/api.md", "## Fitting")
    loop = shell_block("docs/traffic.md", "## The whole loop")
    script = (batch + loop).replace("http://127.0.0.1:8000", served)
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    outcomes, window, refit, ranking, promoted = run.stdout.strip().splitlines()
    assert outcomes == '{"matched":2000,"pending":0,"duplicates":0,"overwritten":0}'
    drift = ast.literal_eval(window)
    assert drift["version"] == 1
    assert drift["n_labelled"] == 2000
    assert drift["psi"] > 0.25  # docs/traffic.md says so
    assert drift["mean_predicted"] > drift["observed_rate"] + 0.1
    number, source = refit.split(" ", 1)
    assert number == "2"
    lineage = ast.literal_eval(source)
    assert lineage["traffic"]["version"] == 1
    assert (lineage["n_samples"], lineage["parent_version"]) == (2000, 1)
    order = ast.literal_eval(ranking)
    assert [version for version, *_ in order] == [2, 1]  # the refit wins on held-out pairs
    assert [significant for *_, significant in order] == [False, True]  # and clearly so
    assert promoted == "200"
    alias = httpx.get(f"{served}/v1/calibrators/fraud/versions/production", timeout=10)
    assert alias.json()["version"] == 2


def test_the_label_shift_walk_runs_as_written(served: str, tmp_path: Path) -> None:
    """docs/traffic.md's label-shift walk: the prior found before any outcome, the version
    adjusted to it, the realized positive rate outside version 1's band and inside the
    prior's interval, the adjusted version better on held-out pairs, and promoted."""
    walk = shell_block("docs/traffic.md", "## Before the labels: see the prior move")
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", walk.replace("http://127.0.0.1:8000", served)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    prior_line, adjusted, window, ranking, promoted = run.stdout.strip().splitlines()
    prior = ast.literal_eval(prior_line)
    fitted = json.loads((tmp_path / "fit.json").read_text())
    assert prior["training"] == round(sum(fitted["labels"]) / len(fitted["labels"]), 3)
    truth = json.loads((tmp_path / "outcomes.json").read_text())["labels"]
    rate = sum(truth) / len(truth)
    low, high = prior["interval"]
    assert low <= rate <= high  # the EM's interval holds the rate the labels later show
    assert low > prior["training"] + 0.1  # clear of the training prior: label shift
    assert prior["realized"] is None  # no outcome yet
    number, parent, prior_from, prior_to = adjusted.split()
    assert (number, parent) == ("2", "1")
    assert float(prior_from) == prior["training"]
    assert float(prior_to) == prior["estimated"]
    found = ast.literal_eval(window)
    expected, band, realized = found["positive_rate"]
    assert realized == round(rate, 3)
    assert realized > band[1]  # version 1's probabilities expected fewer positives
    assert expected == pytest.approx(sum(band) / 2, abs=0.002)
    assert set(found) == {"positive_rate", "accuracy", "roc_auc"}
    order = ast.literal_eval(ranking)
    assert [version for version, *_ in order] == [2, 1]
    assert [significant for *_, significant in order] == [False, True]
    assert promoted == "200"


def test_the_readme_parquet_upload(served: str, tmp_path: Path) -> None:
    """docs/api.md's curls of a Parquet file, as written, from the directory holding it: a fit
    uploading it, then diagnostics with it as the body, which answer what its rows in JSON
    answer."""
    batch = sigmoid_batch(500, seed=5)
    table = pa.table({"score": batch["scores"], "label": pa.array(batch["labels"], pa.int8())})
    pq.write_table(table, tmp_path / "batch.parquet")
    block = shell_block("docs/api.md", "### Parquet and Arrow batches")
    script = block.replace("http://127.0.0.1:8000", served).replace("/churn/", "/parquet/")
    run = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    decoder = json.JSONDecoder()
    answer, end = decoder.raw_decode(run.stdout)
    diagnostics, end = decoder.raw_decode(run.stdout, end)
    assert run.stdout[end:].strip() == ""
    assert (answer["name"], answer["method"], answer["n_samples"]) == ("parquet", "platt", 500)
    as_json = httpx.post(
        f"{served}/v1/calibrators/parquet/versions/latest/diagnostics",
        json={**batch, "n_bins": 5, "strategy": "quantile"},
        timeout=30,
    )
    assert diagnostics == as_json.json()
    assert (diagnostics["n_bins"], diagnostics["strategy"]) == (5, "quantile")
