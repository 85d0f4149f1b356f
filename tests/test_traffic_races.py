"""The prediction log raced against outcomes and deletes, on SQLite and PostgreSQL (issue 11).

Each round starts its racers together at a barrier; afterwards what is stored must be what
some serial order of the round's writes gives:

- outcomes posted while the writer flushes the predictions of the same ids: every outcome
  ends on its own id (joined, never left in ``pending_outcomes``, never dropped), and the
  counts answered account for each id once as matched or pending, every repeat as a
  duplicate.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.main import create_app
from app.settings import Settings
from app.store import Database
from app.store.models import PendingOutcome, Prediction

from .api.helpers import sigmoid_batch

NAME = "raced"
BASE = f"/v1/calibrators/{NAME}"
FIT = {**sigmoid_batch(200), "method": "platt"}
SECONDS = 3.0
"""How long each race runs on each backend (bounded)."""

IDS_PER_ROUND = 60
POSTERS = 4


@pytest.fixture
def client(database_url: str, database: Database) -> Iterator[TestClient]:
    """A fitted ``raced`` v1; the writer flushes when the test says so (or once a second)."""
    settings = Settings(database_url=database_url, traffic_flush_rows=1_000_000)
    with TestClient(create_app(settings, database=database), raise_server_exceptions=False) as c:
        assert c.post(f"{BASE}/fit", json=FIT).status_code == 201
        yield c


def service(client: TestClient) -> Any:
    return client.app.state.service  # type: ignore[attr-defined]


def stored(client: TestClient) -> tuple[dict[str, tuple[int, int | None]], dict[str, int]]:
    """(client id → (version, label)) of the logged predictions of ``NAME``, and its pending
    outcomes (client id → label)."""
    with service(client).database.transaction() as repo:
        session = repo._session
        logged = session.execute(
            select(Prediction.client_id, Prediction.version, Prediction.label).where(
                Prediction.name == NAME
            )
        ).all()
        pending = session.execute(
            select(PendingOutcome.client_id, PendingOutcome.label).where(
                PendingOutcome.name == NAME
            )
        ).all()
    return {i: (v, label) for i, v, label in logged}, dict(pending)


def together(*racers: Callable[[], object]) -> None:
    """Run ``racers`` on threads released at once by a barrier; re-raise the first failure."""
    barrier = threading.Barrier(len(racers))
    failures: list[BaseException] = []

    def run(racer: Callable[[], object]) -> None:
        barrier.wait(10)
        try:
            racer()
        except BaseException as exc:  # re-raised in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    if failures:
        raise failures[0]


def label_of(client_id: str) -> int:
    """The one label every post gives ``client_id``: repeats are duplicates, never 409s."""
    return sum(client_id.encode()) % 2


def test_outcomes_posted_while_their_predictions_are_flushed_all_end_joined(
    client: TestClient,
) -> None:
    rng = random.Random(11)
    traffic = service(client).traffic
    posted: set[str] = set()
    answered: list[tuple[int, dict[str, int]]] = []  # (ids sent, counts) per response
    deadline = time.monotonic() + SECONDS
    rounds = 0
    while time.monotonic() < deadline:
        ids = [f"r{rounds}-{i}" for i in range(IDS_PER_ROUND)]
        r = client.post(f"{BASE}/predict", json={"scores": [0.0] * len(ids), "ids": ids})
        assert r.status_code == 200, r.text  # buffered, not yet written

        def post(chosen: list[str]) -> None:
            labels = [label_of(i) for i in chosen]
            r = client.post(f"{BASE}/outcomes", json={"ids": chosen, "labels": labels})
            assert r.status_code == 200, r.text
            answered.append((len(chosen), r.json()))

        # Each poster sends a random half of the ids (they overlap), some also ids whose
        # predictions never come in this round (they stay pending).
        batches = [[*rng.sample(ids, len(ids) // 2), f"r{rounds}-late-{k}"] for k in range(3)]
        batches.append(rng.sample(ids, len(ids) // 2))
        for chosen in batches:
            posted.update(chosen)
        together(traffic.flush, *(lambda c=c: post(c) for c in batches))
        rounds += 1
    traffic.flush()

    logged, pending = stored(client)
    late = {i for i in posted if "late" in i}
    assert rounds >= 5
    unlabelled = sorted(i for i in posted - late if logged[i][1] is None)
    assert not unlabelled, f"{len(unlabelled)} outcomes never joined, e.g. {unlabelled[:3]}"
    stuck = sorted(set(pending) - late)
    assert not stuck, f"{len(stuck)} outcomes stuck in pending, e.g. {stuck[:3]}"
    wrong = sorted(i for i, (_, y) in logged.items() if y != (label_of(i) if i in posted else None))
    assert not wrong, f"{len(wrong)} ids labelled wrongly, e.g. {wrong[:3]}"
    assert pending == {i: label_of(i) for i in late}
    assert len(logged) == rounds * IDS_PER_ROUND
    for n, counts in answered:
        assert sum(counts.values()) == n, counts
    # In a serial order each id's first post matches it or keeps it pending; repeats are
    # duplicates, and nothing is overwritten (one label per id).
    first = sum(c["matched"] + c["pending"] for _, c in answered)
    assert first == len(posted)
    assert sum(c["duplicates"] for _, c in answered) == sum(n for n, _ in answered) - len(posted)
    assert sum(c["overwritten"] for _, c in answered) == 0
    print(f"\n[traffic races] {rounds} rounds, {len(posted)} ids posted")
