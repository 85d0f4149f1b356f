"""The prediction log through faults, on a PostgreSQL cluster of this module's own.

- PostgreSQL stopped for a few seconds under logged traffic: predict answers every request,
  and once the database is back every prediction answered is in the log (the buffer held
  them), none dropped.
- The serving process killed (SIGKILL) while it logs: every prediction the process reported
  written (``calibration_traffic_logged_total`` scraped before the kill) is in the log, each
  with the probability it was answered with; outcomes posted afterwards label exactly their
  own ids.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from tests.test_faults import BATCH, FAULT_SETTINGS, Cluster, Service, cluster

__all__ = ["cluster"]  # the module-scoped PostgreSQL fixture, shared by import

pytestmark = pytest.mark.postgres

SEND_SECONDS = 6.0
"""How long the load runs in each test (bounded)."""


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
            else:
                self.failures.append(f"{r.status_code} {r.text[:200]}")

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(SEND_SECONDS + 10)


@pytest.fixture
def served(cluster: Cluster, tmp_path: Path) -> Iterator[Service]:
    service = Service(cluster.url("calibration"), tmp_path / "serve.log", 1, **FAULT_SETTINGS)
    try:
        service.wait_until_ready()
        yield service
    finally:
        service.stop()


def test_predictions_logged_through_a_database_outage_are_all_written(
    cluster: Cluster, served: Service
) -> None:
    assert served.fit("outage-log", BATCH).status_code == 201
    assert (
        served.client.post(
            "/v1/calibrators/outage-log/predict?version=1", json={"scores": [0.0]}
        ).status_code
        == 200
    )  # loaded, so predict needs no database
    with Load(served, "outage-log", "o") as load:
        time.sleep(1.0)
        cluster.stop("fast")
        try:
            time.sleep(3.0)
        finally:
            cluster.start()
    assert load.failures == []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(logged_rows(cluster, "outage-log")) < len(
        load.answered
    ):
        time.sleep(0.2)
    rows = logged_rows(cluster, "outage-log")
    assert set(rows) == set(load.answered)
    assert all(rows[i][0] == p for i, p in load.answered.items())
    assert metric(served, "calibration_traffic_dropped_total") == 0
    print(f"\n[traffic faults] {len(rows)} predictions logged through a 3 s outage, none dropped")


def test_what_was_reported_written_survives_a_kill(cluster: Cluster, tmp_path: Path) -> None:
    first = Service(cluster.url("calibration"), tmp_path / "first.log", 1, **FAULT_SETTINGS)
    try:
        first.wait_until_ready()
        assert first.fit("killed", BATCH).status_code == 201
        with Load(first, "killed", "k") as load:
            time.sleep(2.5)
            reported = metric(first, "calibration_traffic_logged_total")
            first.proc.kill()  # SIGKILL: no flush, no shutdown
            first.proc.wait(10)
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
