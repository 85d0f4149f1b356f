"""Adjusting a stored version to new priors, against fitting it and against predicting.

``python -m bench.adjust [N]`` prints the rows alone. The issue's target: ``adjust`` answers in
at most 1 s for a version fitted on 10^6 rows. Timed in process through the service, as the
route's job runs it (:meth:`app.service.adjustments.Adjustments.adjust`: the parent's batch
read and decoded, its out-of-fold predictions adjusted and reweighted, the metrics with their
1000 resamples, the new version encoded and written), on a SQLite file; beside the service's
fit of the parent (platt, 5-fold cross-validation, stored the same way) and one predict of N
scores by the adjusted version. Each adjust makes a new version (a version is never
rewritten), so the medians adjust the same parent again and again.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from app.service.adjustments import GivenPriors
from app.service.batches import validate_batch
from app.service.use_cases import CalibrationService
from app.settings import Settings
from app.store import Database
from app.store.migrate import upgrade
from bench.fits import batch
from bench.table import Row, Target, markdown, median_seconds, progress, size_label

ONE_SECOND = Target(1.0)
"""The issue's target, on adjust's own time at 10^6 rows."""
TARGET_SIZE = 10**6


def adjust_rows(sizes: list[int], repeat: int = 3) -> list[Row]:
    """For each n: adjust against the parent's fit (the target bounds adjust's seconds at
    10^6 rows), and against one predict of n scores by the adjusted version."""
    rows = []
    for n in sizes:
        progress(f"adjust n={n}")
        adjusting, fitting, predicting = _seconds(n, repeat)
        size = size_label(n)
        target = ONE_SECOND if n == TARGET_SIZE else None
        rows += [
            Row("adjust", "adjust / fit (platt)", size, adjusting, fitting, "s", target, True),
            Row("adjust", "adjust / predict of n scores", size, adjusting, predicting, "s"),
        ]
    return rows


def _seconds(n: int, repeat: int) -> tuple[float, float, float]:
    """Median seconds of adjust, of the fit, and of a predict of n scores, on a fresh
    SQLite file."""
    f, y, _ = batch(n, tied=False)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        upgrade(url)
        settings = Settings(database_url=url, max_batch_rows=max(n, 10**6))
        service = CalibrationService(Database(url, settings), settings, worker=True)
        try:
            fitted = validate_batch(f, y, None, max_rows=settings.max_batch_rows)

            def fit() -> None:
                service.versions.fit("bench", fitted, method="platt", params={})

            fitting = median_seconds(fit, 1, warmup=0)  # version 1, the parent

            def adjust() -> None:
                service.adjustments.adjust("bench", 1, GivenPriors((0.08,), "prior"))

            adjusting = median_seconds(adjust, repeat)
            scores = np.ascontiguousarray(f)
            predicting = median_seconds(lambda: service.serving.predict("bench", 2, scores), repeat)
        finally:
            service.close()
            service.database.dispose()
    return adjusting, fitting, predicting


def main() -> None:
    sizes = [int(arg) for arg in sys.argv[1:]] or [10**5, TARGET_SIZE]
    print(markdown(adjust_rows(sizes)))


if __name__ == "__main__":
    main()
