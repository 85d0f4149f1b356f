"""Monitoring a k-class version from its hourly rollups (:class:`~app.calibration.ClassRollup`).

``python -m bench.class_rollups [N]`` prints the rows alone. In process, on SQLite in a
temporary folder: a 3-class version (temperature scaling, fitted as the fit route fits it)
whose N predictions (3 x 10^6, half labelled) are spread evenly over 30 days, summed into their
hours by the store's own :meth:`~app.store.traffic.rollups.RollupOperations.roll_up` a day
of rows at a time, as a flush sums its rows, then folded into days as the servers' upkeep
folds them; against a calibrator of N/10 in the same database.

1. **Flat in rows**: the service's monitoring of 30 daily windows (``bootstrap=1000``), the
   best of 5 after one, at N over N / 3: at most 1.2 (the binary rows' target,
   :mod:`bench.rollups`), marked at the default N only: below full samples the time grows.
2. **Bytes**: a stored hour's data at N (its EM sample is most of it), against a folded
   day's over 24.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from sqlalchemy import func, select

from app.calibration import DEFAULT_THRESHOLD, RESAMPLES
from app.service.batches import validate_batch
from app.service.traffic.log import TrafficLog
from app.service.use_cases import CalibrationService
from app.settings import Settings
from app.store import Database, LoggedPrediction
from app.store.migrate import upgrade
from app.store.traffic.tables import TrafficRollup, TrafficRollupDay
from bench.table import Row, Target, best_seconds, markdown, progress, size_label

N = 3 * 10**6
DAYS, K, REPEAT = 30, 3, 5
SMALLER = 3
"""The reference calibrator holds N / SMALLER predictions: past 1,024 an hour, so that both
hours' samples are full (below that a sample grows with the traffic, to its cap)."""
FLAT = Target(1.2)
DAY = timedelta(days=1)


def class_rollup_rows(n: int = N) -> list[Row]:
    """The rows above, for ``n`` predictions."""
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        settings = Settings(database_url=url)
        until = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        since = until - DAYS * DAY
        upgrade(url)
        service = CalibrationService(Database(url, settings), settings, worker=True)
        _fit(service, ("big", "small"))
        database = service.database
        try:
            for name, count in (("big", n), ("small", max(n // SMALLER, 1))):
                progress(f"class rollups: {count} predictions of {name!r} rolled up")
                _fill(database, name, count, since)
            TrafficLog(database, capacity=1, flush_rows=1, flush_seconds=1, writer=False).fold_days(
                datetime.now(UTC)
            )
            with database.transaction() as repo:
                hour = repo._session.scalar(
                    select(func.avg(func.length(TrafficRollup.data))).where(
                        TrafficRollup.name == "big"
                    )
                )
                day = repo._session.scalar(
                    select(func.avg(func.length(TrafficRollupDay.data))).where(
                        TrafficRollupDay.name == "big"
                    )
                )
            ours, reference = (_seconds(service, name, since, until) for name in ("big", "small"))
        finally:
            service.close()
            database.dispose()
    size = size_label(n)
    return [
        Row("class rollups", f"k-class monitoring 30x1d, {size} / {size_label(n // SMALLER)}", size,
            ours, reference, "s", FLAT if n == N else None),
        Row("class rollups", "k-class stored hour bytes / a folded day's over 24", size,
            float(hour), float(day) / 24, "B"),
    ]  # fmt: skip


def _fit(service: CalibrationService, names: tuple[str, ...]) -> None:
    """A temperature fit of 3 classes for each name, as the fit route makes it."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, K, 2_000)
    logits = rng.normal(size=(2_000, K)) + 2.0 * np.eye(K)[y]
    batch = validate_batch(logits, y, None, max_rows=10**6)
    for name in names:
        service.versions.fit(name, batch, method="temperature", params={})


def _fill(database: Database, name: str, n: int, since: datetime) -> None:
    """``n`` predictions of ``name`` evenly over the days from ``since``, half labelled,
    each day's summed into its hours by the store."""
    rng = np.random.default_rng(len(name))
    per_day = np.diff(np.linspace(0, n, DAYS + 1).astype(int))
    first = 0
    for day, count in enumerate(per_day.tolist()):
        p = rng.dirichlet(np.ones(K), size=count)
        at = since + day * DAY
        offsets = np.arange(count) * (86_400e6 / max(count, 1))
        rows = [LoggedPrediction(name, f"{name}-{first + i}", 1,
                                 at + timedelta(microseconds=int(offsets[i])), None, None,
                                 row.tobytes(), row.tobytes())
                for i, row in enumerate(p)]  # fmt: skip
        labels = [int(rng.choice(K, p=row)) if i % 2 else None for i, row in enumerate(p)]
        with database.transaction(write=True) as repo:
            repo.roll_up(rows, labels)
        first += count


def _seconds(service: CalibrationService, name: str, since: datetime, until: datetime) -> float:
    """The best of :data:`REPEAT` monitorings of ``name`` after one unmeasured."""
    return best_seconds(
        lambda: service.traffic.monitoring(
            name, "1d", since, until, n_bins=10, resamples=RESAMPLES, threshold=DEFAULT_THRESHOLD
        ),
        REPEAT,
    )


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else N
    print(markdown(class_rollup_rows(n)))


if __name__ == "__main__":
    main()
