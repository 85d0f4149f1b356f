"""Running a benchmark module as a user does, for the smoke tests of its printed tables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_bench(*args: str) -> str:
    """``python -m <args>`` from the project root (120 s at most); its stdout, once it exits 0.

    With one OpenBLAS thread: the run shares two cores with the other xdist worker, and
    OpenBLAS's second thread spins waiting for a core (``bench.export --quick``'s logistic
    regression on digits, 898 x 64, took 19 s with two threads on a loaded machine and 0.3 s
    with one). The tables' shape, all these tests check, does not depend on it.
    """
    result = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
