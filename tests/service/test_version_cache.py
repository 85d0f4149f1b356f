"""The freshness policy of app/service/version_cache.py, step by step: a fake clock, and
re-confirmations that run only when the test says so. No sleeping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from app.calibration import fit_calibrator
from app.errors import DatabaseUnavailable, NotFound
from app.service.version_cache import VersionCache
from app.store import Database, NewVersion, encode_artifact
from tests.store.conftest import MakeVersion

WINDOW = 1.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Manual:
    """Scheduled re-confirmations, run when the test calls :meth:`run`."""

    def __init__(self) -> None:
        self.tasks: list[Callable[[], None]] = []

    def __call__(self, task: Callable[[], None]) -> None:
        self.tasks.append(task)

    def run(self) -> int:
        tasks, self.tasks = self.tasks, []
        for task in tasks:
            task()
        return len(tasks)


@pytest.fixture
def make_version(make_version: MakeVersion) -> MakeVersion:
    """The store's factory, with a loadable artifact: a real Platt fit."""
    rng = np.random.default_rng(0)
    scores = rng.normal(size=200)
    labels = (rng.random(200) < 1 / (1 + np.exp(-scores))).astype(np.int64)
    fit = fit_calibrator("platt", {}, scores, labels, None, n_folds=2)
    artifact = encode_artifact("platt", dict(fit.params), fit.calibrator.state())

    def make(**overrides: Any) -> NewVersion:
        return make_version(params=dict(fit.params), artifact=artifact, **overrides)

    return make


@pytest.fixture
def setup(database: Database, make_version: MakeVersion) -> tuple[VersionCache, Clock, Manual]:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version())
        repo.create_version("churn", make_version())
        repo.set_alias("churn", "production", 1)
    clock, manual = Clock(), Manual()
    return VersionCache(database, WINDOW, clock=clock, schedule=manual), clock, manual


def _reads(database: Database, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the cache's transactions."""
    count: list[int] = []
    original = database.transaction

    def counted(**kwargs: bool):  # type: ignore[no-untyped-def]
        count.append(1)
        return original(**kwargs)

    monkeypatch.setattr(database, "transaction", counted)
    return count


def test_fresh_then_served_while_revalidating_then_expired(
    setup: tuple[VersionCache, Clock, Manual], database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, clock, manual = setup
    assert cache.cached("churn", "latest") is None  # nothing known yet
    assert cache.resolve("churn", "latest").version == 2
    reads = _reads(database, monkeypatch)

    clock.now += 0.4  # fresh: served, nothing scheduled
    assert cache.cached("churn", "latest") is not None
    assert manual.tasks == []

    clock.now += 0.2  # past half the window: served while one re-confirmation is queued
    assert cache.cached("churn", "latest") is not None
    assert cache.cached("churn", "latest") is not None
    assert len(manual.tasks) == 2  # one for the label, one for the entry; no duplicates
    assert reads == []
    assert manual.run() == 2
    assert len(reads) == 2

    clock.now += 0.6  # re-confirmed 0.6 s ago: stale-while-revalidate again, not expired
    assert cache.cached("churn", "latest") is not None
    manual.run()
    clock.now += 1.0  # a whole window since: expired, no longer served from memory
    assert cache.cached("churn", "latest") is None


def test_a_new_version_is_latest_after_the_label_is_reconfirmed(
    setup: tuple[VersionCache, Clock, Manual], database: Database, make_version: MakeVersion
) -> None:
    cache, clock, manual = setup
    assert cache.resolve("churn", "latest").version == 2
    with database.transaction(write=True) as repo:  # another replica fits v3
        repo.create_version("churn", make_version())
    clock.now += 0.5
    assert cache.cached("churn", "latest").version == 2  # type: ignore[union-attr]
    manual.run()
    assert cache.resolve("churn", "latest").version == 3


def test_a_deleted_version_is_dropped_by_its_reconfirmation(
    setup: tuple[VersionCache, Clock, Manual], database: Database
) -> None:
    cache, clock, manual = setup
    assert cache.resolve("churn", 2).version == 2
    with database.transaction(write=True) as repo:  # deleted through another replica
        repo.delete_version("churn", 2)
    clock.now += 0.5
    assert cache.cached("churn", 2) is not None  # within the window
    manual.run()
    assert cache.cached("churn", 2) is None
    with pytest.raises(NotFound):
        cache.resolve("churn", 2)


def test_a_moved_alias_is_followed_within_the_window(
    setup: tuple[VersionCache, Clock, Manual], database: Database
) -> None:
    cache, clock, manual = setup
    assert cache.resolve("churn", "production").version == 1
    with database.transaction(write=True) as repo:
        repo.set_alias("churn", "production", 2)
    clock.now += 0.5
    cache.cached("churn", "production")
    manual.run()
    assert cache.resolve("churn", "production").version == 2


def test_while_the_database_is_away_pinned_versions_are_served_and_labels_are_not(
    setup: tuple[VersionCache, Clock, Manual], database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, clock, _ = setup
    cache.resolve("churn", 1)
    cache.resolve("churn", "latest")

    def away(**kwargs: bool) -> None:
        database._failed()
        raise DatabaseUnavailable("away")

    monkeypatch.setattr(database, "transaction", away)
    clock.now += 5 * WINDOW
    assert cache.resolve("churn", 1).version == 1  # pinned: versions never change
    with pytest.raises(DatabaseUnavailable):
        cache.resolve("churn", "latest")  # may have moved meanwhile
    assert cache.cached("churn", 1) is not None  # and the hot path serves it too


def test_the_least_recently_used_entry_leaves_first(
    database: Database, make_version: MakeVersion
) -> None:
    with database.transaction(write=True) as repo:
        for _ in range(3):
            repo.create_version("churn", make_version())
    clock = Clock()
    cache = VersionCache(database, WINDOW, capacity=2, clock=clock, schedule=Manual())
    cache.resolve("churn", 1)
    cache.resolve("churn", 2)
    cache.cached("churn", 1)  # used: now the most recent
    cache.resolve("churn", 3)
    assert cache.cached("churn", 1) is not None
    assert cache.cached("churn", 2) is None


def test_a_read_that_started_before_a_delete_does_not_bring_it_back(
    setup: tuple[VersionCache, Clock, Manual], database: Database
) -> None:
    cache, _, _ = setup
    loaded = cache.resolve("churn", 2)
    before = cache.generation("churn")  # a request reads v2 ...
    with database.transaction(write=True) as repo:  # ... while a delete commits and forgets
        repo.delete_version("churn", 2)
    cache.forget("churn", 2)
    cache.put(loaded, before)  # ... then the first request would cache what it read
    cache.aliased("churn", "production", 2, before)
    assert cache.cached("churn", 2) is None
    assert cache.cached("churn", "production") is None
    with pytest.raises(NotFound):
        cache.resolve("churn", 2)


def test_fits_answering_out_of_order_never_move_latest_back(
    setup: tuple[VersionCache, Clock, Manual],
) -> None:
    cache, _, _ = setup
    one, two = cache.resolve("churn", 1), cache.resolve("churn", 2)
    generation = cache.generation("churn")
    cache.fitted(two, generation)
    cache.fitted(one, generation)  # the older fit answers last
    assert cache.cached("churn", "latest") is two
