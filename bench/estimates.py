"""What the windows' `estimated`, `realized` and `prior` cost monitoring.

``python -m bench.estimates [N]`` prints the rows alone. The issue's target: monitoring with
them over 10^6 logged predictions in 30 daily windows takes at most 1.5 times the monitoring
without them. Timed in process on the arrays (:class:`app.service.traffic.monitoring.Monitor`
fed the rows in chunks of 10^5, as the store reads them when no stored hour covers them),
with and without the windows' expectations
(:func:`~app.service.traffic.expectations.binary_expectations` replaced by one that says
nothing): the strictest form of the ratio, since over HTTP the same added time sits beside
the reading of the rows from the database (``bench.traffic``'s monitoring row), and from
stored hours the expectations read no more than the rest. Half the rows are labelled.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import numpy as np

from app.calibration import ScoreReference
from app.service.traffic import monitoring
from app.service.traffic.monitoring import Monitor
from bench.table import Row, Target, markdown, progress, size_label

TARGET = Target(1.5)
CHUNK = 100_000
SINCE = datetime(2026, 10, 1, tzinfo=UTC)
DAYS = 30


def _nothing(*args: Any) -> None:
    """A window's expectations that say nothing: monitoring as it was before them."""


def estimates_rows(n: int = 10**6, repeat: int = 5) -> list[Row]:
    """Monitoring 30 daily windows of n predictions with the expectations, against without."""
    progress(f"estimates: monitoring {DAYS} daily windows of {n} predictions, with and without")
    rng = np.random.default_rng(0)
    until = SINCE + timedelta(days=DAYS)
    seconds = np.sort(rng.uniform(SINCE.timestamp(), until.timestamp(), n))
    scores = rng.normal(0.3, 1.6, n)
    p = 1.0 / (1.0 + np.exp(-scores))
    labels = np.where(rng.random(n) < 0.5, (rng.random(n) < p).astype(float), -1.0)
    columns = np.column_stack([seconds, np.ones(n), scores, p, labels])
    fitted_on = rng.normal(0.0, 1.5, 2000)
    reference = {1: ScoreReference.of_batch(fitted_on, np.zeros(2000, dtype=np.int64))}
    priors = {1: np.array([0.5, 0.5])}

    def run() -> None:
        monitor = Monitor(SINCE, until, "1d", reference, priors=priors)
        for start in range(0, n, CHUNK):
            monitor.add_traffic(columns[start : start + CHUNK])
        monitor.rows()

    with_them = _best(run, repeat)
    with mock.patch.object(monitoring, "binary_expectations", _nothing):
        without = _best(run, repeat)
    name = f"monitoring {DAYS}x1d with estimated, prior / without"
    return [Row("estimates", name, size_label(n), with_them, without, "s", TARGET)]


def _best(run: Callable[[], None], repeat: int) -> float:
    """The least of ``repeat`` timings: the run the machine disturbed least."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


if __name__ == "__main__":
    print(markdown(estimates_rows(int(sys.argv[1]) if len(sys.argv) > 1 else 10**6)))
