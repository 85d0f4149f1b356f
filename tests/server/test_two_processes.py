"""Two ``python -m app.serve`` processes on one PostgreSQL database, as replicas run.

A version fitted through one is ``latest`` on the other within one second (the freshness
contract of docs/api.md, Predicting), and 40 concurrent fits of one new name spread over both
get the versions 1..40 exactly: no number twice, none skipped. The figures are printed:
``pytest -s``.

The freshness test (serial) runs on the pair the fault tests start on their cluster
(``tests/servers.py``: ``faults_service`` and ``faults_spare``, replicas with the default
one-second ``latest``), which the serial run has started already, their workers' fork
servers too; the concurrent fits (parallel part) on two of their own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.api.helpers import sigmoid_batch
from tests.postgres import DatabasePool, PostgresServer
from tests.servers import SCORES, Service

pytestmark = pytest.mark.postgres

FITS = 40


@pytest.fixture
def replicas(
    postgres_server: PostgresServer, postgres_pool: DatabasePool, tmp_path: Path
) -> Iterator[list[Service]]:
    # A migrated database from the pool: the replicas start without migrating it (their
    # migration is tests/server/test_deployment.py's).
    database = postgres_pool.lend()
    started: list[Service] = []
    try:
        started = [
            # A queue deep enough for FITS at once: the numbering is under test, not the bound.
            Service(
                postgres_server.url(database),
                tmp_path / f"serve-{i}.log",
                CALIBRATION_MAX_QUEUED_FITS="64",
            )
            for i in range(2)
        ]
        for service in started:
            service.wait_until_ready()
        yield started
    finally:
        for service in started:
            service.stop()
        postgres_pool.give_back(database)


def seen_as_latest(service: Service, name: str, version: int, timeout: float) -> float:
    """Poll ``latest`` on ``service`` until it is ``version``; seconds it took."""
    start = time.monotonic()
    while True:
        r = service.predict(name)
        if r.status_code == 200 and r.json()["version"] == version:
            return time.monotonic() - start
        assert r.status_code in (200, 404), r.text
        assert time.monotonic() - start < timeout, (version, r.text)
        time.sleep(0.01)


@pytest.mark.serial  # the other replica sees it within 1 s
def test_a_fit_through_one_is_latest_on_the_other_within_a_second(
    faults_service: Service, faults_spare: Service
) -> None:
    replicas = [faults_service, faults_spare]
    name = "shared"
    r = replicas[0].fit(name)
    assert r.status_code == 201, r.text
    seen_as_latest(replicas[1], name, 1, timeout=5)  # replica 1 now caches latest = 1
    seen_as_latest(replicas[0], name, 1, timeout=5)
    delays = []
    for round_ in range(4):
        source, other = replicas[round_ % 2], replicas[1 - round_ % 2]
        r = source.fit(name)
        assert r.status_code == 201, r.text
        delays.append(seen_as_latest(other, name, r.json()["version"], timeout=5))
    assert max(delays) < 1.0, delays
    print(
        "\n[two processes] a version fitted through one replica is latest on the other after "
        + ", ".join(f"{d:.3f}" for d in delays)
        + " s"
    )


def test_concurrent_fits_over_two_processes_give_versions_one_to_forty(
    replicas: list[Service],
) -> None:
    name = "crowded"
    batches = [{**sigmoid_batch(200, seed=i), "method": "platt"} for i in range(FITS)]
    clients = [
        httpx.Client(
            base_url=service.base_url, timeout=60, limits=httpx.Limits(max_connections=FITS)
        )
        for service in replicas
    ]

    def fit(i: int) -> httpx.Response:
        return clients[i % 2].post(f"/v1/calibrators/{name}/fit", json=batches[i])

    start = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=FITS) as pool:
            answers = list(pool.map(fit, range(FITS)))
    finally:
        for client in clients:
            client.close()
    took = time.monotonic() - start

    assert [r.status_code for r in answers] == [201] * FITS, [r.text for r in answers]
    versions = sorted(r.json()["version"] for r in answers)
    assert versions == list(range(1, FITS + 1))
    for r in answers:
        assert r.headers["location"] == f"/v1/calibrators/{name}/versions/{r.json()['version']}"
    for service in replicas:
        assert service.versions(name) == versions
        r = service.client.post(f"/v1/calibrators/{name}/predict?version={FITS}", json=SCORES)
        assert r.status_code == 200, r.text
    print(f"\n[two processes] {FITS} concurrent fits over 2 processes in {took:.2f} s: 1..{FITS}")
