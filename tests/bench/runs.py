"""Running a benchmark module as a user does, for the smoke tests of its printed tables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from demo.server import stop_process_group

ROOT = Path(__file__).resolve().parents[2]


def run_bench(*args: str) -> str:
    """``python -m <args>`` from the project root (120 s at most); its stdout, once it exits 0.

    With one OpenBLAS thread: the run shares two cores with the other xdist worker, and
    OpenBLAS's second thread spins waiting for a core (``bench.export --quick``'s logistic
    regression on digits, 898 x 64, took 19 s with two threads on a loaded machine and 0.3 s
    with one). The tables' shape, all these tests check, does not depend on it. It runs in a
    process group of its own, stopped whole afterwards: the servers a benchmark starts do not
    outlive it when it fails or runs out of time.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=120)
    finally:
        stop_process_group(process)
    assert process.returncode == 0, stderr
    return stdout
