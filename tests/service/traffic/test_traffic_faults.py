"""The prediction log through faults, on a PostgreSQL cluster of this module's own.

- PostgreSQL stopped for 10 s under logged traffic, with a buffer smaller than the outage's
  traffic: predict answers every request; once the database is back every prediction
  answered is in the log (with the probability answered) or counted as dropped; every one
  made before the outage is in the log (none reported written is missing), and the buffer
  held the outage's first ones until the database was back.
- The serving process killed (SIGKILL) while it logs: every prediction the process reported
  written (``calibration_traffic_logged_total`` scraped before the kill) is in the log, each
  with the probability it was answered with; outcomes posted afterwards label exactly their
  own ids.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from tests.server.test_faults import BATCH, FAULT_SETTINGS, Cluster, Service, cluster

__all__ = ["cluster"]  # the module-scoped PostgreSQL fixture, shared by import

# serial: the outage test needs the load's throughput to overflow the buffer in 10 s
pytestmark = [pytest.mark.postgres, pytest.mark.serial]

SEND_SECONDS = 20.0
"""The longest the load runs in a test (each stops it sooner)."""

OUTAGE_SECONDS = 10.0
"""How long PostgreSQL is stopped under traffic (issue 11)."""

BUFFER_ROWS = 3000
"""The log's buffer in the outage test: about 3 s of the load, so the outage overflows it."""


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


def test_predict_answers_through_a_10_s_outage_and_no_logged_prediction_is_lost_silently(
    cluster: Cluster, tmp_path: Path
) -> None:
    settings = {**FAULT_SETTINGS, "CALIBRATION_TRAFFIC_BUFFER_ROWS": str(BUFFER_ROWS)}
    served = Service(cluster.url("calibration"), tmp_path / "serve.log", 1, **settings)
    try:
        served.wait_until_ready()
        assert served.fit("outage-log", BATCH).status_code == 201
        assert served.predict("outage-log", "1").status_code == 200  # loaded: needs no database
        with Load(served, "outage-log", "o") as load:
            time.sleep(1.5)
            reported = metric(served, "calibration_traffic_logged_total")
            stopped = time.monotonic()
            cluster.stop("fast")
            try:
                time.sleep(OUTAGE_SECONDS)
            finally:
                cluster.start()
            restarted = time.monotonic()
            time.sleep(1.0)
        assert load.failures == []
        deadline = time.monotonic() + 15
        while True:
            rows = logged_rows(cluster, "outage-log")
            dropped = metric(served, "calibration_traffic_dropped_total")
            if len(rows) + dropped >= len(load.answered) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        logged = metric(served, "calibration_traffic_logged_total")
    finally:
        served.stop()
    assert len(rows) + dropped == len(load.answered)  # each one logged, or counted as dropped
    assert dropped > 0  # the buffer overflowed
    assert all(rows[i][0] == load.answered[i] for i in rows)  # as answered, none invented
    during = [i for i in rows if stopped < load.times[i] < restarted]
    assert during  # the buffer held the outage's first predictions, written once it was back
    assert sum(load.times[i] < restarted for i in rows) >= BUFFER_ROWS  # all it held
    before = [i for i, t in load.times.items() if t < stopped]
    assert all(i in rows for i in before)  # those written before, and those still buffered
    assert 0 < reported <= len(before)  # what was reported written is there
    assert logged <= len(rows)
    print(
        f"\n[traffic faults] {OUTAGE_SECONDS:g} s outage: {len(load.answered)} predictions "
        f"answered, {len(rows)} logged ({len(during)} made during the outage), "
        f"{dropped:.0f} dropped and counted"
    )


def test_what_was_reported_written_survives_a_kill(cluster: Cluster, tmp_path: Path) -> None:
    first = Service(cluster.url("calibration"), tmp_path / "first.log", 1, **FAULT_SETTINGS)
    try:
        first.wait_until_ready()
        assert first.fit("killed", BATCH).status_code == 201
        with Load(first, "killed", "k") as load:
            time.sleep(2.5)
            reported = metric(first, "calibration_traffic_logged_total")
            first.process.kill()  # SIGKILL: no flush, no shutdown
            first.process.wait(10)
    finally:
        first.stop()
    rows = logged_rows(cluster, "killed")
    assert reported > 0
    assert len(rows) >= reported  # what was reported written is there
    assert set(rows) <= set(load.answered) | {f"k-{len(load.answered) + i}" for i in range(1, 50)}
    assert all(rows[i][0] == load.answered[i] for i in rows if i in load.answered)

    second = Service(cluster.url("calibration"), tmp_path / "second.log", 1, **FAULT_SETTINGS)
    try:
        second.wait_until_ready()
        ids = sorted(rows)[:50]
        labels = [int(rows[i][0] > 0.5) for i in ids]
        r = second.client.post(
            "/v1/calibrators/killed/outcomes", json={"ids": ids, "labels": labels}
        )
        assert r.status_code == 200, r.text
        assert r.json()["matched"] == len(ids)
    finally:
        second.stop()
    after = logged_rows(cluster, "killed")
    assert {i: after[i][1] for i in ids} == dict(zip(ids, labels, strict=True))
    assert all(after[i][1] is None for i in after if i not in set(ids))
    print(
        f"\n[traffic faults] killed while logging: {reported:.0f} reported written, "
        f"{len(rows)} in the log, {len(load.answered)} answered"
    )
