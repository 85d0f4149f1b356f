"""Diagnostics with bootstrap intervals: a stored version's whole report against its targets.

``python -m bench.diagnostics`` prints the rows alone. What a ``GET .../diagnostics`` of a
stored version computes, in process (:func:`app.service.reporting.labelled_reports`): the calibrated
and raw reports of the version's out-of-fold predictions (bins, every measure, smooth ECE and
its curve, ICI) with 1000 shared bootstrap resamples behind every interval and the smooth
curve's band. Two references:

- the same reports without resamples (``bootstrap=0``): what the intervals add;
- the smooth ECE's bootstrap as one would glue it from the authors' package: ``relplot.smECE``
  once per resample, on the calibrated probabilities only (timed on a few resamples and
  scaled to 1000; scikit-learn has no smooth ECE and no intervals).
"""

from __future__ import annotations

import numpy as np

from app.calibration import fit_calibrator
from app.service.reporting import ReportOptions, labelled_reports
from bench.fits import batch
from bench.table import Row, Target, markdown, median_seconds, progress, size_label

RESAMPLES = 1000
ONE_SECOND = Target(1.0)
"""The issue's target: all diagnostics of a 10^5-row stored version, 1000 resamples."""
TARGET_SIZE = 10**5
GLUED_RESAMPLES = 5
"""relplot calls timed for the glued reference (each costs about as much as the point)."""


def diagnostics_rows(sizes: list[int], repeat: int | None = None) -> list[Row]:
    """The reports of a Platt version's out-of-fold predictions on n pairs, with and without
    resamples, and against the glued relplot bootstrap; ours are medians of ``repeat`` runs
    (by default 3 up to 10^5 pairs, 1 above)."""
    rows = []
    for n in sizes:
        progress(f"diagnostics n={n}")
        ours, bare, glued = _seconds(n, repeat or (3 if n <= 10**5 else 1))
        size = size_label(n)
        target = ONE_SECOND if n == TARGET_SIZE else None
        name = f"both reports, {RESAMPLES} resamples"
        rows += [
            Row("diagnostics", f"{name} / bootstrap=0", size, ours, bare, "s", target, True),
            Row("diagnostics", f"{name} / relplot smECE x {RESAMPLES}", size, ours, glued, "s"),
        ]
    return rows


def _seconds(n: int, repeat: int) -> tuple[float, float, float]:
    """Ours with resamples, ours without (medians of ``repeat``), and the glued relplot
    bootstrap, in seconds."""
    import relplot  # test-only reference, imported here so the module loads without it

    f, y, _ = batch(n, tied=False)
    fitted = fit_calibrator("platt", {}, f, y, None)
    labels = y.astype(np.int64)

    def report(resamples: int) -> object:
        query = ReportOptions(bootstrap=resamples)
        return labelled_reports(fitted.out_of_fold, f, labels, None, query)

    ours = median_seconds(lambda: report(RESAMPLES), repeat)
    bare = median_seconds(lambda: report(0), repeat)
    rng = np.random.default_rng(0)

    def glued() -> None:
        for _ in range(GLUED_RESAMPLES):
            drawn = rng.integers(0, n, n)
            relplot.smECE(fitted.out_of_fold[drawn], y[drawn])

    return ours, bare, median_seconds(glued, 1) * RESAMPLES / GLUED_RESAMPLES


def main() -> None:
    print(markdown(diagnostics_rows([10**4, 10**5, 10**6])))


if __name__ == "__main__":
    main()
