"""The small smoke run of bench/: ``python -m bench --quick`` prints the expected table.

Only the table's shape is checked (its rows and that every ratio is a number); the values are
timings of this machine and are read by people, never asserted (see bench/__init__.py).
"""

from __future__ import annotations

import math

import pytest

from tests.bench.runs import run_bench
from tests.postgres import PostgresServer

EXPECTED = {
    ("fit", "isotonic, distinct / sklearn", "1e3"),
    ("fit", "isotonic, distinct / sklearn", "1e4"),
    ("fit", "isotonic, tied / sklearn", "1e4"),
    ("fit", "platt, distinct / sklearn", "1e4"),
    ("fit", "platt, tied / sklearn", "1e4"),
    ("fit", "platt trim=cv / platt", "1e3"),
    ("fit", "platt trim=trainset / platt", "1e3"),
    ("fit", "isotonic trim=cv / isotonic", "1e3"),
    ("fit", "isotonic trim=trainset / isotonic", "1e3"),
    ("fit", "auto / isotonic", "1e3"),
    ("predict", "isotonic predict / np.interp", "1e5"),
    ("predict", "platt predict / expit", "1e5"),
    ("predict", "isotonic predict / np.interp", "1"),
    ("predict", "platt predict / expit", "1"),
    ("predict", "venn_abers (inductive) predict / isotonic predict", "1e5"),
    ("predict", "venn_abers (cross) predict / isotonic predict", "1e5"),
    ("memory", "isotonic fit peak RSS / batch alone", "1e4"),
    ("columnar", "isotonic fit wall time, Parquet / JSON", "1e3"),
    ("columnar", "server peak RSS, Parquet / JSON", "1e3"),
    ("columnar", "server + children peak RSS, Parquet / JSON", "1e3"),
    ("diagnostics", "both reports, 1000 resamples / bootstrap=0", "1e3"),
    ("diagnostics", "both reports, 1000 resamples / relplot smECE x 1000", "1e3"),
    ("adjust", "adjust / fit (platt)", "1e4"),
    ("adjust", "adjust / predict of n scores", "1e4"),
    ("estimates", "monitoring 30x1d with estimated, prior / without", "1e5"),
}


def test_quick_bench_prints_a_table_of_numeric_ratios() -> None:
    stdout = run_bench("bench", "--quick")
    lines = [line for line in stdout.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == ["group", "benchmark", "n", "ours", "reference", "ratio", "target", "met"]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    assert {(r[0], r[1], r[2]) for r in rows} >= EXPECTED
    for row in rows:
        ratio = float(row[5])
        assert math.isfinite(ratio), row
        assert ratio > 0, row
        assert row[7] in ("", "pass", "FAIL"), row
    assert not any(r[0] == "http" for r in rows)  # the smoke run needs no wrk (columnar: httpx)


@pytest.mark.postgres
def test_the_traffic_bench_runs_the_loop_on_postgresql(postgres_server: PostgresServer) -> None:
    """``python -m bench.traffic 2000 URL``: the five rows, on an empty database."""
    name = postgres_server.create()
    try:
        stdout = run_bench("bench.traffic", "2000", postgres_server.url(name))
    finally:
        postgres_server.drop(name)
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in stdout.splitlines()[2:]
        if line.startswith("|")
    ]
    assert [r[1] for r in rows] == [
        "2000 predictions logged (HTTP) / COPY",
        "2000 outcomes posted (HTTP) / UPDATE FROM unnest",
        "monitoring 1d of 2000 (HTTP) / in memory",
        "2000-pair fit from traffic / posted batch",
        "bytes per labelled row, 2000 rows / one table",
    ]
    assert all(math.isfinite(float(r[5])) and float(r[5]) > 0 for r in rows), rows


def test_the_export_bench_runs_every_method_within_its_bounds() -> None:
    """``python -m bench.export --quick``: real classifiers' scores, every binary method and
    every k-class one, their ONNX graphs in ONNX Runtime within 1e-12 (FLOAT: 2^-25)."""
    stdout = run_bench("bench.export", "--quick")
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in stdout.splitlines()
        if line.startswith("| ") and not line.startswith("| method")
    ]
    methods = {row[0].split(" ")[0] for row in rows}
    assert methods >= {"platt", "isotonic", "venn_abers", "temperature", "bostrom", "minmax"}
    for row in rows:
        assert int(row[1]) >= 1, row
        assert float(row[2]) <= 1e-12, row
        assert row[4] == "yes", row  # compared unrounded, in the bench
