"""Peak memory of a large isotonic fit, measured on a child process.

``python -m bench.memory fit|batch N`` runs the work in a fresh child and prints that child's
peak resident set (``ru_maxrss`` of ``RUSAGE_CHILDREN``, in kB on Linux); going through this
middle process keeps the benchmark's own earlier children (servers, other runs) out of the max.
"""

from __future__ import annotations

import resource
import subprocess
import sys

from bench.table import Row, Target, progress, size_label

PEAK_GB = Target(2.0)  # the absolute peak of a 10^7-pair fit

_WORK = {
    "batch": "f, y, w = batch(n, tied=False)",
    "fit": "f, y, w = batch(n, tied=False)\nmake_calibrator('isotonic', {}).fit(f, y, w)",
}


def _peak_gb(work: str, n: int) -> float:
    result = subprocess.run(
        [sys.executable, "-m", "bench.memory", work, str(n)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return int(result.stdout.split()[-1]) / 1024**2


def memory_rows(n: int) -> list[Row]:
    """Peak RSS of ``make_calibrator("isotonic", {}).fit`` on n distinct pairs, next to a
    process that only builds the same batch (the difference is what the fit adds); the target
    bounds the absolute peak."""
    progress(f"peak memory n={n}")
    peak, baseline = _peak_gb("fit", n), _peak_gb("batch", n)
    target = PEAK_GB if n >= 10**7 else None
    name = "isotonic fit peak RSS / batch alone"
    return [Row("memory", name, size_label(n), peak, baseline, "GB", target, absolute=True)]


def main() -> None:
    """Run one piece of work in a child and print the child's peak RSS in kB."""
    work, n = sys.argv[1], int(sys.argv[2])
    code = (
        "from app.calibration import make_calibrator\nfrom bench.fits import batch\n"
        f"n = {n}\n{_WORK[work]}\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=600)
    print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


if __name__ == "__main__":
    main()
