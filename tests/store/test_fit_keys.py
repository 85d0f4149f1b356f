"""The store's idempotency keys (app/store/fit_keys.py) on SQLite and PostgreSQL: claims that
race, take-overs of lapsed leases, renewals, the day a key lives, and the purge of expired
keys. Times are given, not slept."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from app.store import KEY_LIFETIME, Database, KeyState, Lease
from app.store.models import FitKey

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def claim(database: Database, owner: str, now: datetime = NOW, key: str = "k") -> KeyState:
    with database.transaction(write=True) as repo:
        return repo.claim_fit_key("n", key, "f", Lease(owner, now, now + 10 * SECOND))


def rows(database: Database) -> list[tuple[str, str | None, int | None]]:
    with database.transaction() as repo:
        found = repo._session.query(FitKey.key, FitKey.owner, FitKey.version).order_by(FitKey.key)
        return [tuple(row) for row in found]


def race(*calls: Callable[[], Any]) -> list[Any]:
    """The calls at once, from threads that start together; their results in order."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        results[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_of_claims_racing_for_a_new_key_one_holds_it(database: Database) -> None:
    states = race(*(lambda o=o: claim(database, o) for o in ("a", "b", "c", "d")))
    holders = [s.owner for s in states if s.claimed]
    assert len(holders) == 1
    assert all(s.owner == holders[0] for s in states)
    assert rows(database) == [("k", holders[0], None)]


def test_a_lapsed_lease_is_taken_over_once(database: Database) -> None:
    assert claim(database, "dead").claimed
    later = NOW + 11 * SECOND
    states = race(*(lambda o=o: claim(database, o, later) for o in ("a", "b", "c")))
    takers = [s.owner for s in states if s.claimed]
    assert len(takers) == 1
    assert rows(database) == [("k", takers[0], None)]


def test_a_renewed_lease_is_not_taken_over(database: Database) -> None:
    assert claim(database, "alive").claimed
    with database.transaction(write=True) as repo:
        assert repo.renew_fit_key("n", "k", "alive", NOW + 30 * SECOND)
    state = claim(database, "other", NOW + 11 * SECOND)
    assert not state.claimed
    assert state.owner == "alive"
    with database.transaction(write=True) as repo:
        assert not repo.renew_fit_key("n", "k", "other", NOW + 60 * SECOND)


def test_a_completed_key_answers_its_version_for_a_day(database: Database) -> None:
    assert claim(database, "a").claimed
    with database.transaction(write=True) as repo:
        assert not repo.complete_fit_key("n", "k", "b", 3, "c" * 64)  # not b's claim
        assert repo.complete_fit_key("n", "k", "a", 3, "c" * 64)
        repo.release_fit_key("n", "k", "a")  # a no-op once done
        assert repo.renew_fit_key("n", "k", "a", NOW + 20 * SECOND)  # still a's: no loss
        assert not repo.renew_fit_key("n", "k", "b", NOW + 20 * SECOND)
    last = NOW + KEY_LIFETIME - SECOND
    state = claim(database, "b", last)
    assert (state.claimed, state.version, state.content) == (False, 3, "c" * 64)
    with database.transaction() as repo:
        assert repo.read_fit_key("n", "k", last) == state
        assert repo.read_fit_key("n", "k", NOW + KEY_LIFETIME + SECOND) is None
    fresh = claim(database, "c", NOW + KEY_LIFETIME + SECOND)
    assert fresh.claimed
    assert fresh.version is None


def test_a_released_key_is_claimed_again(database: Database) -> None:
    assert claim(database, "a").claimed
    with database.transaction(write=True) as repo:
        repo.release_fit_key("n", "k", "a")
    assert rows(database) == []
    assert claim(database, "b").claimed


def test_a_new_key_purges_expired_ones_and_a_poll_does_not(database: Database) -> None:
    for i in range(5):
        claim(database, "old", NOW, key=f"old-{i}")
    later = NOW + KEY_LIFETIME + SECOND
    with database.transaction() as repo:
        assert repo.read_fit_key("n", "old-0", later) is None
    assert len(rows(database)) == 5  # a read deletes nothing
    assert claim(database, "new", later, key="new").claimed
    assert rows(database) == [("new", "new", None)]
