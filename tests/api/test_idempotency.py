"""``Idempotency-Key`` on fits (API.md, CLIENT.md): one key, one version, on SQLite and
PostgreSQL, also when the requests race; another payload under the key is 422; a failed fit
frees its key; a claim whose holder died is taken over; keys expire after a day."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import update

from app.errors import FitUnderWay
from app.main import create_app
from app.service.batches import Batch
from app.service.fit_keys import Claim
from app.settings import Settings
from app.store import Database
from app.store.models import FitKey
from tests.client import TestClient

from .conftest import OPTIONS
from .helpers import as_csv, assert_problem, sigmoid_batch

FIT = "/v1/calibrators/churn/fit"
BATCH = {**sigmoid_batch(300), "method": "platt"}


def fit(client: TestClient, key: str | None, batch: dict[str, Any] = BATCH) -> Any:
    headers = {} if key is None else {"Idempotency-Key": key}
    return client.post(FIT, json=batch, headers=headers)


def versions(client: TestClient, name: str = "churn") -> list[int]:
    r = client.get(f"/v1/calibrators/{name}")
    return [] if r.status_code == 404 else [v["version"] for v in r.json()["versions"]]


def test_the_same_key_answers_the_first_version_without_fitting_again(
    client: TestClient,
) -> None:
    first = fit(client, "k-1")
    assert first.status_code == 201, first.text
    assert "idempotent-replayed" not in first.headers
    again = fit(client, "k-1")
    assert again.status_code == 200, again.text
    assert (
        again.headers["location"] == first.headers["location"] == FIT.replace("fit", "versions/1")
    )
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert versions(client) == [1]
    # without a key, or with another, the same batch fits again
    assert fit(client, None).json()["version"] == 2
    assert fit(client, "k-2").json()["version"] == 3
    assert fit(client, "k-2").json()["version"] == 3
    assert versions(client) == [3, 2, 1]


def test_a_key_belongs_to_one_calibrator(client: TestClient) -> None:
    assert fit(client, "shared").status_code == 201
    other = client.post(
        "/v1/calibrators/other/fit", json=BATCH, headers={"Idempotency-Key": "shared"}
    )
    assert other.status_code == 201, other.text
    assert versions(client, "other") == [1]


def test_another_batch_or_other_options_under_the_key_is_422_and_stores_nothing(
    client: TestClient,
) -> None:
    assert fit(client, "k").status_code == 201
    for changed in (
        {**BATCH, "labels": [1 - y for y in BATCH["labels"]]},
        {**BATCH, "method": "isotonic"},
        {**BATCH, "description": "another"},
    ):
        r = fit(client, "k", changed)
        problem = assert_problem(r, 422, "Idempotency-Key", "another batch")
        assert problem["errors"][0]["loc"] == ["header", "Idempotency-Key"]
    csv = client.post(
        FIT + "?method=isotonic",
        content=as_csv(BATCH),
        headers={"Content-Type": "text/csv", "Idempotency-Key": "k"},
    )
    assert_problem(csv, 422, "Idempotency-Key")
    assert versions(client) == [1]


def test_the_same_rows_in_other_bytes_are_the_same_fit(client: TestClient) -> None:
    """A retry recognised by its batch as parsed: CSV for JSON, other spacing, the options
    in the query instead of the body."""
    first = fit(client, "k")
    assert first.status_code == 201
    csv = client.post(
        FIT + "?method=platt",
        content=as_csv(BATCH),
        headers={"Content-Type": "text/csv", "Idempotency-Key": "k"},
    )
    assert csv.status_code == 200, csv.text
    spaced = json.dumps(BATCH, indent=2).encode()
    again = client.post(
        FIT, content=spaced, headers={"Content-Type": "application/json", "Idempotency-Key": "k"}
    )
    assert again.status_code == 200, again.text
    assert csv.json() == again.json() == first.json()
    assert versions(client) == [1]


@pytest.mark.parametrize("key", ["", "x" * 129, "caf\u00e9", "tab\there"])
def test_a_key_out_of_the_contract_is_422_naming_the_header(client: TestClient, key: str) -> None:
    r = client.post(FIT, json=BATCH, headers={"Idempotency-Key": key.encode("utf-8")})
    problem = assert_problem(r, 422, "Idempotency-Key", "printable")
    assert problem["errors"][0]["loc"] == ["header", "Idempotency-Key"]
    assert versions(client) == []


def test_a_key_sent_twice_is_422(client: TestClient) -> None:
    """Two header lines (a proxy may fold them into one, which would name another key): the
    request says which fit it is ambiguously, so it is refused."""
    headers = [("Idempotency-Key", "a"), ("Idempotency-Key", "b")]
    r = client.post(FIT, json=BATCH, headers=headers)
    assert_problem(r, 422, "Idempotency-Key", "more than once")
    assert versions(client) == []


def test_keys_of_128_printable_characters_are_taken(client: TestClient) -> None:
    key = "".join(chr(c) for c in range(0x20, 0x7F))[:95] + "k" * 33
    assert len(key) == 128
    assert fit(client, key).status_code == 201
    assert fit(client, key).status_code == 200


def test_a_failed_fit_frees_its_key(client: TestClient) -> None:
    bad = {**BATCH, "labels": BATCH["labels"][:-1]}
    assert_problem(fit(client, "k", bad), 422, "labels")
    assert_problem(fit(client, "k", bad), 422, "labels")  # fitted (and failed) again
    assert fit(client, "k").status_code == 201, "the key was left claimed"


def test_racing_requests_with_one_key_make_one_version(client: TestClient) -> None:
    """Eight requests with one key at once: one fits (201), the others wait for it and answer
    its version (200): the outcome of any serial order."""
    answers: list[Any] = []
    barrier = threading.Barrier(8)

    def send() -> None:
        barrier.wait()
        answers.append(fit(client, "race"))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [200] * 7 + [201], [r.text for r in answers if r.status_code >= 300]
    assert {r.json()["version"] for r in answers} == {1}
    assert versions(client) == [1]


def test_racing_requests_with_a_bad_batch_all_fail_and_free_the_key(client: TestClient) -> None:
    bad = {**BATCH, "scores": [float("nan"), *BATCH["scores"][1:]]}
    assert fit(client, None).status_code == 201
    answers: list[Any] = []
    barrier = threading.Barrier(4)

    def send() -> None:
        barrier.wait()
        text = str(bad["scores"]).replace("nan", "NaN")
        payload = f'{{"scores": {text}, "labels": {bad["labels"]}, "method": "platt"}}'
        answers.append(
            client.post(
                FIT,
                content=payload,
                headers={"Content-Type": "application/json", "Idempotency-Key": "bad"},
            )
        )

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.status_code for r in answers) == [422] * 4, [r.text for r in answers]
    assert versions(client) == [1]  # the one fitted above without a key
    assert fit(client, "bad").status_code == 201


def _claim_row(database: Database, **values: Any) -> None:
    with database.transaction(write=True) as repo:
        repo._session.execute(update(FitKey).values(**values))


def test_a_claim_whose_holder_stopped_renewing_is_taken_over(
    client: TestClient, database: Database
) -> None:
    """A request whose process died leaves its claim; once its lease ran out, the next
    request with the key fits (the service's clock moved past the lease, not slept)."""
    assert fit(client, "k").status_code == 201
    lease = datetime.now(UTC) + timedelta(seconds=10)
    _claim_row(database, version=None, owner="a-dead-process", lease_until=lease)
    keys = client.app.state.service.fit_keys  # type: ignore[attr-defined]
    keys.clock = lambda: datetime.now(UTC) + timedelta(seconds=11)
    r = fit(client, "k")
    assert r.status_code == 201, r.text
    assert r.json()["version"] == 2
    assert fit(client, "k").json()["version"] == 2


def test_a_request_waits_for_a_live_claim_and_gives_up_with_503(
    database: Database, database_url: str
) -> None:
    """Another request's fit under the key, alive (its lease is renewed), outlasting what this
    request may wait (the fit's time budget and a lease): 503 fit-under-way, Retry-After."""
    quick = {"fit_timeout_seconds": 0.3, "fit_key_lease_seconds": 0.5}
    settings = Settings(database_url=database_url, **{**OPTIONS, **quick})
    with TestClient(create_app(settings, database=database), raise_server_exceptions=False) as app:
        assert fit(app, "k").status_code == 201
        _claim_row(
            database,
            version=None,
            owner="alive",
            lease_until=datetime.now(UTC) + timedelta(hours=1),
        )
        r = fit(app, "k")
    assert_problem(r, 503, "still running")
    assert r.headers["retry-after"] == "5"
    assert r.json()["type"].endswith("/fit-under-way")


def test_keys_expire_after_a_day(client: TestClient, database: Database) -> None:
    assert fit(client, "k").status_code == 201
    assert fit(client, "old").status_code == 201
    _claim_row(database, created_at=datetime.now(UTC) - timedelta(hours=24, seconds=1))
    assert fit(client, "k").status_code == 201  # a new fit: the key had expired
    with database.transaction() as repo:
        left = repo._session.query(FitKey.key).all()
    assert [row.key for row in left] == ["k"], "the expired 'old' was not purged"


def test_the_replay_of_a_deleted_version_is_409(client: TestClient) -> None:
    assert fit(client, "k").status_code == 201
    assert client.delete("/v1/calibrators/churn/versions/1").status_code == 204
    assert_problem(fit(client, "k"), 409, "was deleted", "new key")


def test_a_fit_that_lost_its_claim_stores_nothing(client: TestClient) -> None:
    """The version and the key's mark are one transaction: a claim another request took
    over makes the fit a 503 with nothing stored."""
    service = client.app.state.service  # type: ignore[attr-defined]
    state, claim = service.fit_keys.claim("churn", "k", "0" * 64)
    assert claim is not None
    assert state.claimed
    batch = Batch(
        np.asarray(BATCH["scores"], dtype=float),
        np.asarray(BATCH["labels"], dtype=np.int64),
        np.ones(len(BATCH["labels"])),
    )
    stolen = Claim(claim.name, claim.key, "someone-else")
    with pytest.raises(FitUnderWay, match="took it over") as lost:
        service.versions.fit("churn", batch, method="platt", params={}, claim=stolen)
    assert lost.value.status == 503  # the client retries it: the other request's version
    assert versions(client) == []
    assert service.fit_keys.claim("churn", "k", "0" * 64)[1] is None  # still the first's


@pytest.mark.in_threads
def test_racers_wait_for_the_fit_under_way_and_its_claim_is_renewed(
    client: TestClient, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first request's fit is held until the seven others have each read the key at
    least twice (they wait, not fit), and while it is held its lease is renewed."""
    service = client.app.state.service  # type: ignore[attr-defined]
    service.fit_keys.lease = timedelta(seconds=1)  # renewed every 0.2 s
    looks: list[int] = []
    look = service.fit_keys.look
    monkeypatch.setattr(service.fit_keys, "look", lambda *a: looks.append(1) or look(*a))
    release = threading.Event()
    fit_versions = service.versions.fit

    def held_fit(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(60)
        return fit_versions(*args, **kwargs)

    monkeypatch.setattr(service.versions, "fit", held_fit)
    answers: list[Any] = []
    threads = [
        threading.Thread(target=lambda: answers.append(fit(client, "held"))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    leases = []
    started = datetime.now(UTC)
    deadline, held_for = started + timedelta(seconds=60), started + timedelta(seconds=0.5)
    while (len(looks) < 8 + 14 or datetime.now(UTC) < held_for) and datetime.now(UTC) < deadline:
        with database.transaction() as repo:
            leases.append(repo._session.query(FitKey.lease_until).scalar())
        threading.Event().wait(0.05)
    release.set()
    for thread in threads:
        thread.join()
    assert len(looks) >= 8 + 14, "the racers did not wait"
    assert sorted(r.status_code for r in answers) == [200] * 7 + [201]
    renewed = [lease for lease in leases if lease is not None]
    assert renewed[-1] > renewed[0], "the claim was not renewed while its fit ran"
    assert versions(client) == [1]
