"""The check every test that writes traffic can make: the stored hours sum the rows."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from app.calibration import BinaryRollup
from app.store import Database

EVER = (datetime(1970, 1, 1, tzinfo=UTC), datetime(9000, 1, 1, tzinfo=UTC))


def assert_rollups_sum_the_rows(database: Database, name: str) -> None:
    """Each binary version's stored hours, added up, hold exactly the counts of its logged
    rows and their labels (the cells' and the labelled ones')."""
    with database.transaction() as repo:
        stored: dict[int, BinaryRollup] = {}
        for _, version, rollup in repo.rollups(name, *EVER):
            if rollup is not None:
                stored.setdefault(version, BinaryRollup()).add(rollup)
        chunks = list(repo.traffic_chunks(name, *EVER))
    rows = np.concatenate([np.empty((0, 5)), *chunks])
    rows = rows[np.isfinite(rows[:, 3])]
    for version in np.unique(rows[:, 1]).astype(int):
        _, _, _, p, y = rows[rows[:, 1] == version].T
        expected = BinaryRollup()
        expected.add_predictions(p)
        expected.add_labels(p[y >= 0], y[y >= 0])
        found = stored.pop(version)
        assert (found.n, found.n_labelled) == (expected.n, expected.n_labelled), version
        for field in ("counts", "positives", "negatives"):
            assert np.array_equal(getattr(found, field), getattr(expected, field)), field
    assert not stored, f"stored hours of versions without rows: {sorted(stored)}"
