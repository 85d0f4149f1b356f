"""The checks every test that writes traffic can make: the stored hours sum the rows, and
each folded day sums its hours."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from app.calibration import BinaryRollup, ClassRollup
from app.store import Database
from app.store.traffic.deltas import Rollup
from app.store.traffic.rollups import add_to

EVER = (datetime(1970, 1, 1, tzinfo=UTC), datetime(9000, 1, 1, tzinfo=UTC))


def assert_rollups_sum_the_rows(database: Database, name: str) -> None:
    """Each version's stored hours, added up, hold exactly the counts of its logged rows and
    their labels (the cells' and the labelled ones'); a k-class version's also its hours'
    samples."""
    with database.transaction() as repo:
        stored: dict[int, Rollup] = {}
        for _, version, rollup in repo.rollups(name, *EVER):
            if rollup is not None:
                stored[version] = add_to(stored.get(version), rollup)
        chunks = list(repo.traffic_chunks(name, *EVER))
        class_rows = list(repo.class_row_chunks(name, *EVER))
    rows = np.concatenate([np.empty((0, 5)), *chunks])
    rows = rows[np.isfinite(rows[:, 3])]
    for version in np.unique(rows[:, 1]).astype(int):
        _, _, _, p, y = rows[rows[:, 1] == version].T
        expected = BinaryRollup()
        expected.add_predictions(p)
        expected.add_labels(p[y >= 0], y[y >= 0])
        found = stored.pop(version)
        assert isinstance(found, BinaryRollup)
        assert (found.n, found.n_labelled) == (expected.n, expected.n_labelled), version
        for field in ("counts", "positives", "negatives"):
            assert np.array_equal(getattr(found, field), getattr(expected, field)), field
    summed: dict[int, ClassRollup] = {}
    for version, chunk in class_rows:
        hours = (chunk.seconds // 3600).astype(np.int64)
        for hour in np.unique(hours).tolist():
            mine = np.flatnonzero(hours == hour)
            ids = [chunk.ids[i] for i in mine.tolist()]
            delta = ClassRollup.of_hour(chunk.probabilities[mine], chunk.labels[mine], ids, hour)
            summed.setdefault(version, ClassRollup(delta.k)).add(delta)
    for version, expected_classes in summed.items():
        assert_same_rollup(stored.pop(version), expected_classes)
    assert not stored, f"stored hours of versions without rows: {sorted(stored)}"
    assert_days_sum_their_hours(database, name)


def assert_days_sum_their_hours(database: Database, name: str) -> int:
    """Each folded day of ``name`` holds every version with stored hours that day, each the
    sum of its hours (counts exactly, sums to the float32 the hours keep); how many days."""
    with database.transaction() as repo:
        days = {(day, v): rollup for day, v, rollup in repo.day_rollups(name, *EVER)}
        hours: dict[tuple[datetime, int], Rollup | None] = {}
        for hour, v, rollup in repo.rollups(name, *EVER):
            key = (hour.replace(hour=0), v)
            if rollup is None or (key in hours and hours[key] is None):
                hours[key] = None  # a k-class hour marked before its rollups marks the day
            else:
                hours[key] = add_to(hours.get(key), rollup)
    folded = {day for day, _ in days}
    for day, v in hours:
        if day in folded:
            assert (day, v) in days, f"{day:%Y-%m-%d} is folded without v{v}'s hours"
    for (day, v), rollup in days.items():
        assert (day, v) in hours, f"a stored day without hours: {day:%Y-%m-%d} v{v}"
        assert_same_rollup(rollup, hours[day, v])
    return len(folded)


def assert_same_rollup(found: Rollup | None, wanted: Rollup | None) -> None:
    """Two rollups of the same rows, each stored (its float32 sums rounded) once or more."""
    if isinstance(found, ClassRollup) and isinstance(wanted, ClassRollup):
        assert (found.n, found.n_labelled) == (wanted.n, wanted.n_labelled)
        assert_same_rollup(found.top, wanted.top)
        for field in ("n", "top", "var_top", "loss", "var_loss", "brier", "var_brier"):
            ours, theirs = getattr(found.expected, field), getattr(wanted.expected, field)
            assert ours == pytest.approx(theirs, rel=1e-12), field
        assert found.strata == wanted.strata
        mine, theirs_order = np.argsort(found.keys), np.argsort(wanted.keys)
        assert np.array_equal(found.keys[mine], wanted.keys[theirs_order])
        assert np.array_equal(found.hours[mine], wanted.hours[theirs_order])
        assert np.array_equal(found.rows[mine], wanted.rows[theirs_order])
        return
    if found is None or wanted is None:
        assert found is wanted
        return
    assert isinstance(found, BinaryRollup)
    assert isinstance(wanted, BinaryRollup)
    assert (found.n, found.n_labelled) == (wanted.n, wanted.n_labelled)
    for field in ("counts", "positives", "negatives", "scores"):
        assert np.array_equal(getattr(found, field), getattr(wanted, field)), field
    for field in ("sums", "spreads", "moments"):  # float32, rounded again at every write:
        ours, theirs = getattr(found, field), getattr(wanted, field)  # to the largest's scale
        scale = max(1.0, float(np.abs(theirs).max(initial=0.0)))
        assert np.allclose(ours, theirs, rtol=1e-5, atol=1e-6 * scale), field
    for field in ("fine_sums", "entropy", "var_loss", "var_brier", "spread", "loss", "brier"):
        assert getattr(found, field) == pytest.approx(getattr(wanted, field), rel=1e-12), field
