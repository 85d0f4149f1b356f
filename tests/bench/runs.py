"""Running a benchmark module as a user does, for the smoke tests of its printed tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from demo.server import stop_process_group

ROOT = Path(__file__).resolve().parents[2]


def run_bench(*args: str) -> str:
    """``python -m <args>`` from the project root (120 s at most); its stdout, once it exits 0.

    It runs in a process group of its own, stopped whole afterwards: the servers a benchmark
    starts do not outlive it when it fails or runs out of time."""
    process = subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=ROOT,
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
