"""The prediction log raced against outcomes and deletes, on SQLite and PostgreSQL (issue 11).

Each round starts its racers together at a barrier; afterwards what is stored must be what
some serial order of the round's writes gives:

- outcomes posted while the writer flushes the predictions of the same ids: every outcome
  ends on its own id (joined, never left in ``pending_outcomes``, never dropped), and the
  counts answered account for each id once as matched or pending, every repeat as a
  duplicate;
- the calibrator deleted and fitted again while outcomes are posted, predictions made and
  the writer flushes: no 500; the new calibrator's log holds exactly what its versions
  answered, and its pending outcomes only those posted after the delete (surely those of a
  post begun once the delete had answered); monitoring shows no old version.

Each race runs :data:`SECONDS` per backend, then on until it has run its rounds: what is
checked is each round's outcome, never how fast the rounds go, so the module runs in the
parallel part of ``make test`` (a busy machine only makes a race take longer).

Two outcomes of one id with different labels at once: ``tests/store/test_serialised_writers.py``
(with each interleaving of a flush and an outcome, or a delete, held open).
"""

from __future__ import annotations

import functools
import itertools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from app.main import create_app
from app.settings import Settings
from app.store import Database
from app.store.models import PendingOutcome, Prediction
from tests.api.helpers import sigmoid_batch
from tests.client import TestClient
from tests.store.traffic.rollup_checks import assert_rollups_sum_the_rows

NAME = "raced"
BASE = f"/v1/calibrators/{NAME}"
FIT = {**sigmoid_batch(200), "method": "platt"}
SECONDS = 3.0
"""How long each race runs on each backend at least."""
LONGEST = 10 * SECONDS
"""How long a race goes on past :data:`SECONDS` until it has run its rounds (a busy machine
makes them longer); the test fails if it has not by then."""

IDS_PER_ROUND = 60
POSTERS = 4


@pytest.fixture
def client(database_url: str, database: Database) -> Iterator[TestClient]:
    """A fitted ``raced`` v1. The log's writer thread is stopped: the test's threads flush
    (the same :meth:`~app.service.traffic.log.TrafficLog.flush`), so that once they are done nothing
    is still being written."""
    settings = Settings(database_url=database_url)
    with TestClient(create_app(settings, database=database), raise_server_exceptions=False) as c:
        service(c).prediction_log.close()
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


def racing(started: float, rounds: int, least: int) -> bool:
    """Whether a race begun at ``started`` goes on: for :data:`SECONDS`, then until it has run
    ``least`` rounds, for :data:`LONGEST` at most."""
    elapsed = time.monotonic() - started
    return elapsed < SECONDS or (rounds < least and elapsed < LONGEST)


def label_of(client_id: str) -> int:
    """The one label every post gives ``client_id``: repeats are duplicates, never 409s."""
    return sum(client_id.encode()) % 2


def test_outcomes_posted_while_their_predictions_are_flushed_all_end_joined(
    client: TestClient,
) -> None:
    rng = random.Random(11)
    traffic = service(client).prediction_log
    posted: set[str] = set()
    answered: list[tuple[int, dict[str, int]]] = []  # (ids sent, counts) per response
    started = time.monotonic()
    rounds = 0
    while racing(started, rounds, 5):
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
    assert_rollups_sum_the_rows(service(client).database, NAME)
    print(f"\n[traffic races] {rounds} rounds, {len(posted)} ids posted")


@dataclass(frozen=True)
class Call:
    """One request of a racer: when it ran, what it answered."""

    started: float
    ended: float
    status: int
    ids: tuple[str, ...]
    version: int | None = None


def timed(client: TestClient, path: str, body: dict[str, Any]) -> Call:
    started = time.monotonic()
    r = client.post(path, json=body)
    version = r.json().get("version") if r.status_code == 200 else None
    return Call(started, time.monotonic(), r.status_code, tuple(body["ids"]), version)


def outcomes_of(ids: list[str]) -> dict[str, Any]:
    return {"ids": ids, "labels": [label_of(i) for i in ids]}


def race_a_delete(client: TestClient, round_: int, rng: random.Random, tally: Counter[str]) -> int:
    """One round: the calibrator has logged traffic, some labelled, outcomes waiting, and
    predictions in the buffer; it is deleted and fitted again while outcomes are posted,
    predictions are made and the writer flushes. Checks what is stored against the serial
    orders; the new version (``tally`` counts the answers)."""
    traffic = service(client).prediction_log
    ids = [f"d{round_}-{i}" for i in range(IDS_PER_ROUND)]
    half = IDS_PER_ROUND // 2
    client.post(f"{BASE}/predict", json={"scores": [0.0] * half, "ids": ids[:half]})
    traffic.flush()
    early = outcomes_of([*ids[: half // 2], f"d{round_}-early"])
    assert client.post(f"{BASE}/outcomes", json=early).status_code == 200
    client.post(f"{BASE}/predict", json={"scores": [0.0] * half, "ids": ids[half:]})
    posts: list[Call] = []
    predicts: list[Call] = []
    refit = threading.Event()
    times: dict[str, float] = {}

    def delete_and_fit() -> None:
        times["delete"] = time.monotonic()
        assert client.delete(BASE).status_code == 204
        times["deleted"] = time.monotonic()
        fit = client.post(f"{BASE}/fit", json=FIT)
        assert fit.status_code == 201, fit.text
        times["version"] = fit.json()["version"]
        refit.set()

    def flush() -> None:
        while not refit.wait(0.005):
            traffic.flush()
        traffic.flush()

    def predict() -> None:
        for n in itertools.count():
            body = {"scores": [0.5], "ids": [f"d{round_}-p{n}"]}
            predicts.append(timed(client, f"{BASE}/predict", body))
            if refit.is_set():
                return

    def post(k: int) -> None:
        for n in range(3):
            chosen = [*rng.sample(ids, half // 2), f"d{round_}-late-{k}-{n}"]
            posts.append(timed(client, f"{BASE}/outcomes", outcomes_of(chosen)))

    together(delete_and_fit, flush, predict, *(functools.partial(post, k) for k in range(3)))
    traffic.flush()

    assert {c.status for c in posts} <= {200, 404}, sorted(c.status for c in posts)
    assert {c.status for c in predicts} <= {200, 404}, sorted(c.status for c in predicts)
    logged, pending = stored(client)
    new = int(times["version"])
    # Logged: what the new calibrator answered, all of it, and nothing else.
    answered = {i for c in predicts if c.version == new for i in c.ids}
    assert set(logged) == answered, "the deleted calibrator's traffic kept, or the new one's lost"
    assert {v for v, _ in logged.values()} <= {new}
    assert all(label is None for _, label in logged.values())
    # Pending: only outcomes posted after the delete (the new calibrator's), and surely
    # those of a post that began once the delete had answered.
    after = {i for c in posts if c.status == 200 and c.ended > times["delete"] for i in c.ids}
    surely = {i for c in posts if c.status == 200 and c.started > times["deleted"] for i in c.ids}
    assert surely <= set(pending) <= after, "the deleted calibrator's outcomes kept"
    assert all(pending[i] == label_of(i) for i in pending)
    tally.update(f"outcomes {c.status}" for c in posts)
    tally.update(f"predict {c.status}" for c in predicts)
    return new


def test_a_delete_raced_by_outcomes_and_flushes_leaves_nothing_to_the_next_calibrator(
    client: TestClient,
) -> None:
    rng = random.Random(12)
    tally: Counter[str] = Counter()
    discarded = REGISTRY.get_sample_value("calibration_traffic_discarded_total") or 0.0
    started = time.monotonic()
    rounds = 0
    while racing(started, rounds, 3):
        version = race_a_delete(client, rounds, rng, tally)
        rounds += 1
    assert rounds >= 3
    windows = client.get(f"{BASE}/monitoring", params={"window": "1d"}).json()["windows"]
    assert {w["version"] for w in windows if w["n_predictions"]} <= {version}
    discarded = (REGISTRY.get_sample_value("calibration_traffic_discarded_total") or 0) - discarded
    answers = ", ".join(f"{k}: {n}" for k, n in sorted(tally.items()))
    print(f"\n[traffic races] {rounds} deletes raced; {answers}; {discarded:.0f} rows discarded")
