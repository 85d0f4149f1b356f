"""Two writers racing in the store's tests: the first holds its write transaction open until
the second waits on it (:func:`race`), so that every test meets the interleaving it names."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import text

from app.store import Database, Repository

WAIT_SECONDS = 10.0


def _waiting_on_a_lock(database: Database) -> bool:
    with database.engine.connect() as connection:
        count = connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        ).scalar_one()
    return int(count) > 0


def _until_blocked(database: Database, second: threading.Thread) -> None:
    """Return once the second writer waits for the first (or has finished: then it did not
    wait, which the test's assertions will show)."""
    deadline = time.monotonic() + WAIT_SECONDS
    if database.engine.dialect.name != "postgresql":
        second.join(0.3)  # SQLite's BEGIN IMMEDIATE waits in its busy handler: nothing to see
        return
    while time.monotonic() < deadline and second.is_alive():
        if _waiting_on_a_lock(database):
            return
        time.sleep(0.01)


@contextmanager
def _first_holds(database: Database, work: Callable[[Repository], Any]) -> Iterator[None]:
    """Run ``work`` in a write transaction that commits only when the block ends."""
    release = threading.Event()
    done = threading.Event()
    failure: list[BaseException] = []

    def hold() -> None:
        try:
            with database.transaction(write=True) as repo:
                work(repo)
                done.set()
                release.wait(WAIT_SECONDS)
        except BaseException as exc:  # reported in the test's thread
            failure.append(exc)
            done.set()

    holder = threading.Thread(target=hold)
    holder.start()
    assert done.wait(WAIT_SECONDS)
    try:
        yield
    finally:
        release.set()
        holder.join(WAIT_SECONDS)
    assert not failure, failure


def _second(
    database: Database, work: Callable[[Repository], Any]
) -> tuple[threading.Thread, list[Any]]:
    """Start ``work`` in its own write transaction; its result or exception lands in the list."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            with database.transaction(write=True) as repo:
                outcome.append(work(repo))
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def race(
    database: Database, first: Callable[[Repository], Any], second: Callable[[Repository], Any]
) -> Any:
    """``first`` holds its transaction until ``second`` waits on it; ``second``'s outcome."""
    with _first_holds(database, first):
        thread, outcome = _second(database, second)
        _until_blocked(database, thread)
    thread.join(WAIT_SECONDS)
    assert not thread.is_alive()
    assert len(outcome) == 1
    return outcome[0]
