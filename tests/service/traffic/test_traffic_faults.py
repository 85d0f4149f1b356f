"""The prediction log through faults, on the PostgreSQL cluster and the ``app.serve`` that
``tests/server/test_faults.py`` uses too (``tests/servers.py``).

- PostgreSQL stopped under logged traffic, for longer than a flush may wait on it and until
  the buffer (:data:`~tests.servers.TRAFFIC_BUFFER_ROWS`) has overflowed: predict answers
  every request; once the database is back every prediction answered is in the log (with the
  probability answered) or counted as dropped; every one made before the outage is in the
  log (none reported written is missing), and the buffer held the outage's first ones until
  the database was back.
- Another serving process on the cluster (``faults_spare``) killed (SIGKILL) while it logs:
  every prediction the process reported written (``calibration_traffic_logged_total``
  scraped before the kill) is in the log, each with the probability it was answered with;
  outcomes posted afterwards (through the shared process) label exactly their own ids.

The counters are the shared process's since its start: the tests read what they add.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from tests.servers import (
    BATCH,
    CONNECT_TIMEOUT,
    TRAFFIC_BUFFER_ROWS,
    Cluster,
    Service,
)

# serial: each prediction of the load is answered within 5 s, through the outage; and the
# cluster and server are test_faults.py's (serial), started once for both
pytestmark = [pytest.mark.postgres, pytest.mark.serial]

SEND_SECONDS = 45.0
"""The longest the load runs in a test (each stops it sooner)."""

OUTAGE_SECONDS = 10.0
"""The shortest PostgreSQL is stopped under traffic: the 10 s of issue 11, far longer than a
flush may wait on the stopped database (a checkout: a failed pre-ping, then one reconnect, each
up to the connect timeout), so that the writer failed to write while it was down."""
assert OUTAGE_SECONDS > 2 * CONNECT_TIMEOUT + 1.0  # and a flush period (1 s) more

OUTAGE_LIMIT = 25.0
"""The longest it is stopped, waiting for the buffer to overflow (at 150 predictions a
second, the slowest seen, 4 s do it)."""

LOGGED = "calibration_traffic_logged_total"
DROPPED = "calibration_traffic_dropped_total"


def logged_rows(cluster: Cluster, name: str) -> dict[str, tuple[float, int | None]]:
    """client id → (probability, label) of every logged prediction of ``name``."""
    engine = create_engine(cluster.url("calibration"), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT client_id, probability, label FROM predictions WHERE name = :n"),
                {"n": name},
            )
            return {c: (p, label) for c, p, label in rows}
    finally:
        engine.dispose()


def metric(service: Service, name: str) -> float:
    text_ = service.client.get("/metrics").text
    found = re.search(rf"^{name} ([0-9.e+]+)$", text_, re.M)
    return float(found.group(1)) if found else 0.0


class Load:
    """Predicts of one score, each under a fresh id, from a thread, for a bounded time."""

    def __init__(self, service: Service, name: str, prefix: str) -> None:
        self.service, self.name, self.prefix = service, name, prefix
        self.answered: dict[str, float] = {}
        self.times: dict[str, float] = {}  # when each was answered (monotonic)
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def _run(self) -> None:
        deadline = time.monotonic() + SEND_SECONDS
        count = 0
        while not self._stop.is_set() and time.monotonic() < deadline:
            count += 1
            client_id = f"{self.prefix}-{count}"
            try:
                r = self.service.client.post(
                    f"/v1/calibrators/{self.name}/predict?version=1",
                    json={"scores": [count % 7 - 3.0], "ids": [client_id]},
                    timeout=5,
                )
            except Exception as exc:  # the process may be killed mid-request
                self.failures.append(repr(exc))
                continue
            if r.status_code == 200:
                self.answered[client_id] = r.json()["probabilities"][0]
                self.times[client_id] = time.monotonic()
            else:
                self.failures.append(f"{r.status_code} {r.text[:200]}")

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(SEND_SECONDS + 10)


def until_more(read: Callable[[], float], than: float, timeout: float) -> float:
    """Read until the value is above ``than`` (a counter that grew); the value."""
    deadline = time.monotonic() + timeout
    while (value := read()) <= than:
        assert time.monotonic() < deadline, f"still {value:g} after {timeout:g} s"
        time.sleep(0.1)
    return value


def test_predict_answers_through_an_outage_and_no_logged_prediction_is_lost_silently(
    faults_cluster: Cluster, faults_service: Service
) -> None:
    cluster, served = faults_cluster, faults_service
    assert served.fit("outage-log", BATCH).status_code == 201
    assert served.predict("outage-log", "1").status_code == 200  # loaded: needs no database
    logged_before, dropped_before = metric(served, LOGGED), metric(served, DROPPED)
    with Load(served, "outage-log", "o") as load:
        # a flush has written some, which must all still be there afterwards
        reported = until_more(lambda: metric(served, LOGGED), logged_before, 10) - logged_before
        stopped = time.monotonic()
        cluster.stop("fast")
        try:
            overflowed = False
            while not (overflowed and time.monotonic() - stopped >= OUTAGE_SECONDS):
                assert time.monotonic() - stopped < OUTAGE_LIMIT, "the buffer never overflowed"
                overflowed = overflowed or metric(served, DROPPED) > dropped_before
                time.sleep(0.2)
        finally:
            cluster.start()
        restarted = time.monotonic()
        time.sleep(1.0)
    assert load.failures == []
    deadline = time.monotonic() + 15
    while True:
        rows = logged_rows(cluster, "outage-log")
        dropped = metric(served, DROPPED) - dropped_before
        if len(rows) + dropped >= len(load.answered) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    logged = metric(served, LOGGED) - logged_before
    assert len(rows) + dropped == len(load.answered)  # each one logged, or counted as dropped
    assert dropped > 0  # the buffer overflowed
    assert all(rows[i][0] == load.answered[i] for i in rows)  # as answered, none invented
    during = [i for i in rows if stopped < load.times[i] < restarted]
    assert during  # the buffer held the outage's first predictions, written once it was back
    assert sum(load.times[i] < restarted for i in rows) >= TRAFFIC_BUFFER_ROWS  # all it held
    before = [i for i, t in load.times.items() if t < stopped]
    assert all(i in rows for i in before)  # those written before, and those still buffered
    assert 0 < reported <= len(before)  # what was reported written is there
    assert logged <= len(rows)
    print(
        f"\n[traffic faults] {restarted - stopped:.1f} s outage: {len(load.answered)} "
        f"predictions answered, {len(rows)} logged ({len(during)} made during the outage), "
        f"{dropped:.0f} dropped and counted"
    )


def test_what_was_reported_written_survives_a_kill(
    faults_cluster: Cluster, faults_service: Service, faults_spare: Service
) -> None:
    # Fitted through the shared process: the one killed only predicts, and runs no job.
    assert faults_service.fit("killed", BATCH).status_code == 201
    first = faults_spare
    try:
        with Load(first, "killed", "k") as load:
            until_more(lambda: metric(first, LOGGED), 0, 10)  # a flush has written some
            time.sleep(0.5)  # into the next flush period: more are buffered, not yet written
            reported = metric(first, LOGGED)
            first.process.kill()  # SIGKILL: no flush, no shutdown
            first.process.wait(10)
    finally:
        first.stop()
    rows = logged_rows(faults_cluster, "killed")
    assert reported > 0
    assert len(rows) >= reported  # what was reported written is there
    assert set(rows) <= set(load.answered) | {f"k-{len(load.answered) + i}" for i in range(1, 50)}
    assert all(rows[i][0] == load.answered[i] for i in rows if i in load.answered)

    ids = sorted(rows)[:50]
    labels = [int(rows[i][0] > 0.5) for i in ids]
    r = faults_service.client.post(
        "/v1/calibrators/killed/outcomes", json={"ids": ids, "labels": labels}
    )
    assert r.status_code == 200, r.text
    assert r.json()["matched"] == len(ids)
    after = logged_rows(faults_cluster, "killed")
    assert {i: after[i][1] for i in ids} == dict(zip(ids, labels, strict=True))
    assert all(after[i][1] is None for i in after if i not in set(ids))
    print(
        f"\n[traffic faults] killed while logging: {reported:.0f} reported written, "
        f"{len(rows)} in the log, {len(load.answered)} answered"
    )
