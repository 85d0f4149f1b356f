"""The quality benchmark: ``python -m bench.quality --quick`` prints its tables, and its
measures and splits are the ones its docstring states.

Only the tables' shape is checked (a row per family, every mean a number); the values are
findings read by people, never asserted here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss
from sklearn.metrics import log_loss as sklearn_log_loss

from bench.protocol import EPS, brier, log_loss, split
from tests.bench.runs import run_bench

QUICK_FAMILIES = {"linear_svm", "naive_bayes"}
QUICK_DATASETS = {"breast_cancer", "email"}


def table_after(stdout: str, heading: str) -> list[list[str]]:
    """The cells of the first markdown table after the line ``heading``, header row first."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    return [rows[0], *rows[2:]]  # without the |---| line


def mean_of(cell: str) -> float:
    """``0.1234``, ``**0.1234**`` or ``0.1234 (3/4)`` as a float."""
    return float(cell.split(" ")[0].strip("*"))


def test_quick_run_prints_a_mean_per_family_and_method(tmp_path: Path) -> None:
    out = tmp_path / "cases.json"
    stdout = run_bench("bench.quality", "--quick", "--json", str(out))
    for heading, groups in [
        ("## Mean test log loss", QUICK_FAMILIES),
        ("## Mean test Brier score", QUICK_FAMILIES),
        ("## Mean test log loss per data set", QUICK_DATASETS),
    ]:
        header, *rows = table_after(stdout, heading)
        assert header[:2] == ["", "cases"]
        assert {"raw", "platt", "isotonic", "auto", "sklearn_cv"} <= set(header)
        assert {row[0] for row in rows} == {*groups, "all"}
        for row in rows:
            assert len(row) == len(header), row
            means = [mean_of(cell) for cell in row[2:] if cell]
            assert means, row
            assert all(math.isfinite(m) and m >= 0 for m in means), row

    header, *rows = table_after(stdout, "## Test log loss against always-Platt")
    assert {"auto", "sklearn_cv", "raw"} <= {row[0] for row in rows}
    for row in rows:
        assert int(row[1]) == 4
        assert math.isfinite(float(row[2]))

    cases = json.loads(out.read_text())["cases"]
    assert {(c["dataset"], c["family"], c["seed"]) for c in cases} == {
        (d, f, 0) for d in QUICK_DATASETS for f in QUICK_FAMILIES
    }
    for case in cases:
        assert {"raw", "platt", "sklearn_cv"} <= set(case["log_loss"]) == set(case["brier"])
        assert case["chosen"]["sklearn_cv"] in ("sigmoid", "isotonic")


def test_log_loss_and_brier_match_scikit_learn() -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(0.001, 0.999, size=1000)
    y = (rng.random(1000) < p).astype(np.float64)
    assert log_loss(y, p) == pytest.approx(sklearn_log_loss(y, p), rel=1e-12)
    assert brier(y, p) == pytest.approx(brier_score_loss(y, p), rel=1e-12)


def test_log_loss_clips_certainty_to_eps() -> None:
    # a wrong claim of certainty costs about -ln(1e-15), 34.5 nats, not infinity (1 - (1 - EPS)
    # is EPS only to within rounding)
    wrong = log_loss(np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    assert wrong == pytest.approx(-math.log(EPS), rel=1e-4)


@pytest.mark.parametrize(
    ("n", "sizes"),
    [(569, (284, 142, 143)), (5000, (2500, 1000, 1500)), (10000, (4000, 1000, 5000))],
)
def test_split_is_the_papers_or_proportional(n: int, sizes: tuple[int, int, int]) -> None:
    parts = split(n, seed=3)
    assert tuple(part.size for part in parts) == sizes
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(n))
