"""Surviving faults: PostgreSQL stopped, restarted and frozen under a running ``app.serve``.

The database is a throwaway PostgreSQL cluster of the session's own (stopping it must not
disturb the other tests), shared with ``tests/service/traffic/test_traffic_faults.py`` as is
the ``python -m app.serve`` on it (``tests/servers.py``): 2 s connect and statement timeouts
and a 1 s freshness window. While the cluster is stopped
(``pg_ctl stop -m fast``) and then frozen (SIGSTOP on the postmaster and every backend):

- a fit answers 503 problem+json with ``Retry-After`` within the timeouts, ``/readyz`` 503;
- predict of a pinned version already loaded keeps answering 200 the whole time;
- predict of ``latest`` answers 503 once its freshness window has passed: another replica
  could have fitted a newer version, and serving an old one as ``latest`` would break the
  one-second freshness contract, so ``latest`` is not served from memory;
- once the database is back, the same process answers again without a restart;
- a statement already sent when the server freezes gives up after the statement timeout
  plus a short grace (the server cannot cancel it; the client does);
- no version is half-written: the versions stored are exactly those whose fit answered
  201, numbered 1..n without a gap, each with its blobs and a loadable artifact.

The figures (time to 503, time to recover, versions counted) are printed: ``pytest -s``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from app.errors import DatabaseUnavailable
from app.settings import Settings
from app.store import Database
from app.store.engines import CLIENT_GRACE_SECONDS
from tests.api.helpers import assert_problem
from tests.servers import (
    CONNECT_TIMEOUT,
    REFRESH_SECONDS,
    SCORES,
    STATEMENT_TIMEOUT,
    Cluster,
    Service,
)

pytestmark = pytest.mark.serial  # 503s and recoveries are timed against the timeouts


# -- measuring -----------------------------------------------------------------------------
def timed(call: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    start = time.monotonic()
    response = call()
    return response, time.monotonic() - start


def until(
    call: Callable[[], httpx.Response], status: int, timeout: float
) -> tuple[httpx.Response, float]:
    """Repeat ``call`` until it answers ``status``; return the answer and the time it took."""
    start = time.monotonic()
    while True:
        with contextlib.suppress(httpx.TransportError):
            response = call()
            if response.status_code == status:
                return response, time.monotonic() - start
        assert time.monotonic() - start < timeout, f"no {status} within {timeout:g} s"
        time.sleep(0.05)


def assert_unavailable(response: httpx.Response) -> None:
    assert_problem(response, 503)
    assert response.headers["retry-after"].isdigit(), response.headers


@dataclass
class PinnedPredictions:
    """Predict a pinned version in a loop, in the background, and keep every answer."""

    service: Service
    name: str
    version: int
    answers: list[tuple[int, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> PinnedPredictions:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        with httpx.Client(base_url=self.service.base_url, timeout=30) as client:
            while not self._stop.is_set():
                start = time.monotonic()
                try:
                    r = client.post(
                        f"/v1/calibrators/{self.name}/predict?version={self.version}",
                        json=SCORES,
                    )
                    status = r.status_code
                    assert status != 200 or r.json()["version"] == self.version
                except httpx.TransportError:
                    status = -1
                self.answers.append((status, time.monotonic() - start))
                time.sleep(0.05)

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=40)

    def check(self) -> str:
        statuses = [status for status, _ in self.answers]
        assert len(statuses) >= 10, statuses
        assert set(statuses) == {200}, statuses
        slowest = max(seconds for _, seconds in self.answers)
        return f"{len(statuses)} pinned predictions, all 200, slowest {slowest:.3f} s"


def check_versions(service: Service, cluster: Cluster, name: str, created: list[int]) -> None:
    """Stored versions are exactly the ones that answered 201, 1..n, each complete."""
    assert created == list(range(1, len(created) + 1)), created
    assert service.versions(name) == created
    engine = create_engine(cluster.url("calibration"), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT v.version, length(b.artifact) = v.artifact_bytes, length(b.batch) > 0"
                    " FROM versions v JOIN calibrators c ON c.id = v.calibrator_id"
                    " LEFT JOIN version_blobs b ON b.version_id = v.id"
                    " WHERE c.name = :name ORDER BY v.version"
                ),
                {"name": name},
            ).all()
            last = connection.execute(
                text("SELECT last_version FROM calibrators WHERE name = :name"), {"name": name}
            ).scalar_one()
    finally:
        engine.dispose()
    assert [tuple(row) for row in rows] == [(v, True, True) for v in created]
    assert last == len(created)  # a fit that failed consumed no number
    for version in created:  # every artifact loads (and matches its checksum)
        assert service.predict(name, str(version)).status_code == 200


# -- the tests -------------------------------------------------------------------------------
@pytest.mark.postgres
def test_stopped_database_gives_503_serves_pinned_and_recovers(
    faults_cluster: Cluster, faults_service: Service
) -> None:
    cluster, service = faults_cluster, faults_service
    name, created = "outage", []
    for _ in range(2):
        r = service.fit(name)
        assert r.status_code == 201, r.text
        created.append(r.json()["version"])
    assert service.predict(name, "1").status_code == 200  # loaded, pinned
    assert service.predict(name).status_code == 200

    with PinnedPredictions(service, name, 1) as pinned:
        time.sleep(0.3)
        stopped_at = time.monotonic()
        cluster.stop("fast")
        stop_took = time.monotonic() - stopped_at
        try:
            fit, fit_503 = timed(lambda: service.fit(name))
            assert_unavailable(fit)
            ready, ready_503 = timed(lambda: service.client.get("/readyz"))
            assert_unavailable(ready)
            assert_unavailable(service.client.get(f"/v1/calibrators/{name}/versions/1"))
            time.sleep(max(0.0, stopped_at + REFRESH_SECONDS + 0.5 - time.monotonic()))
            latest, latest_503 = timed(lambda: service.predict(name))
            assert_unavailable(latest)  # latest is not served from memory past its window
            time.sleep(1.0)  # pinned predictions go on, well past the window
        finally:
            restarted_at = time.monotonic()
            cluster.start()
        start_took = time.monotonic() - restarted_at
        _, ready_again = until(lambda: service.client.get("/readyz"), 200, timeout=10)
        fit_again, fit_again_took = until(lambda: service.fit(name), 201, timeout=10)
        recovered = time.monotonic() - restarted_at
        created.append(fit_again.json()["version"])
        time.sleep(0.2)
    summary = pinned.check()

    assert fit_503 < 5.0
    assert ready_503 < 5.0
    assert latest_503 < 5.0
    assert recovered < 10.0
    check_versions(service, cluster, name, created)
    assert service.predict(name).json()["version"] == created[-1]
    print(
        f"\n[faults] stopped PostgreSQL (pg_ctl stop -m fast took {stop_took:.2f} s): "
        f"fit 503 in {fit_503:.3f} s, /readyz 503 in {ready_503:.3f} s, "
        f"latest after the window 503 in {latest_503:.3f} s; {summary}. "
        f"Restarted (pg_ctl start -w took {start_took:.2f} s): /readyz 200 after "
        f"{ready_again:.3f} s more, a fit 201 after {recovered:.3f} s in all "
        f"(that fit {fit_again_took:.3f} s); versions stored {service.versions(name)} "
        f"== answered 201 {created}"
    )


@pytest.mark.postgres
def test_frozen_database_gives_503_in_bounded_time_and_recovers(
    faults_cluster: Cluster, faults_service: Service
) -> None:
    cluster, service = faults_cluster, faults_service
    name, created = "frozen", []
    for _ in range(2):
        r = service.fit(name)
        assert r.status_code == 201, r.text
        created.append(r.json()["version"])
    assert service.predict(name, "1").status_code == 200
    assert service.client.get("/readyz").status_code == 200  # a pooled connection, idle

    with PinnedPredictions(service, name, 1) as pinned:
        time.sleep(0.3)
        try:
            frozen_at = time.monotonic()
            cluster.freeze()
            fit, fit_503 = timed(lambda: service.fit(name))
            assert_unavailable(fit)
            ready, ready_503 = timed(lambda: service.client.get("/readyz"))
            assert_unavailable(ready)
            latest, latest_503 = timed(lambda: service.predict(name))
            assert_unavailable(latest)
            frozen_for = time.monotonic() - frozen_at
        finally:
            thawed_at = time.monotonic()
            cluster.thaw()
        _, ready_again = until(lambda: service.client.get("/readyz"), 200, timeout=10)
        fit_again, _ = until(lambda: service.fit(name), 201, timeout=10)
        recovered = time.monotonic() - thawed_at
        created.append(fit_again.json()["version"])
        time.sleep(0.2)
    summary = pinned.check()

    bound = 2 * CONNECT_TIMEOUT + 2  # a failed pre-ping, one reconnect, and slack
    assert fit_503 < bound
    assert ready_503 < bound
    assert latest_503 < bound
    assert recovered < 10.0
    check_versions(service, cluster, name, created)
    print(
        f"\n[faults] frozen PostgreSQL (SIGSTOP, {frozen_for:.1f} s): fit 503 in "
        f"{fit_503:.3f} s, /readyz 503 in {ready_503:.3f} s, latest 503 in {latest_503:.3f} s "
        f"(timeouts: connect {CONNECT_TIMEOUT:g} s, statement {STATEMENT_TIMEOUT:g} s); "
        f"{summary}. SIGCONT: /readyz 200 after {ready_again:.3f} s, a fit 201 after "
        f"{recovered:.3f} s; versions stored {service.versions(name)} == answered 201 {created}"
    )


@pytest.mark.postgres
def test_a_statement_in_flight_when_the_database_freezes_is_bounded(
    faults_cluster: Cluster,
) -> None:
    """Within a transaction, the server freezes: the next statement gives up on the client."""
    cluster = faults_cluster
    url = cluster.url("calibration")
    settings = Settings(
        database_url=url,
        db_connect_timeout_seconds=CONNECT_TIMEOUT,
        db_statement_timeout_seconds=STATEMENT_TIMEOUT,
    )
    database = Database(url, settings)
    try:
        with pytest.raises(DatabaseUnavailable), database.transaction(write=True) as repo:  # noqa: PT012
            repo.list_calibrators(10, 0, None)  # the connection is checked out, in a transaction
            try:
                cluster.freeze()
                start = time.monotonic()
                repo.list_calibrators(10, 0, None)
            finally:
                took = time.monotonic() - start
                cluster.thaw()
        assert database.unavailable
        assert took < STATEMENT_TIMEOUT + CLIENT_GRACE_SECONDS + 1.0
        with database.transaction(write=True) as repo:  # the same Database works again
            repo.list_calibrators(10, 0, None)
        assert not database.unavailable
    finally:
        cluster.thaw()
        database.dispose()
    print(
        f"\n[faults] a statement in flight on a frozen PostgreSQL: 503 after {took:.3f} s "
        f"(statement timeout {STATEMENT_TIMEOUT:g} s + client grace {CLIENT_GRACE_SECONDS:g} s)"
    )
