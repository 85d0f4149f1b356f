"""The smaller defects of issue 10, one regression test each: a request's answer never
depends on which path served it, and a request costs what its limits allow."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.main import create_app
from app.settings import Settings
from app.store import Database
from tests.client import TestClient

from .helpers import FEW_RESAMPLES, assert_problem, sigmoid_batch

BASE = "/v1/calibrators/churn"


@pytest.fixture
def fitted(client: TestClient) -> TestClient:
    r = client.post(f"{BASE}/fit", json={**sigmoid_batch(), "method": "platt"})
    assert r.status_code == 201, r.text
    return client


@pytest.mark.parametrize(
    ("types", "status"),
    [(["application/json", "text/csv"], 200), (["text/csv", "application/json"], 415)],
)
def test_two_content_types_get_one_answer_on_every_path(
    fitted: TestClient, types: list[str], status: int
) -> None:
    headers = [("content-type", kind) for kind in types]
    statuses = set()
    for _ in range(3):  # the first loads the version; the next would take the hot path
        r = fitted.post(f"{BASE}/predict", content=b'{"scores": [0.5]}', headers=headers)
        statuses.add(r.status_code)
    assert statuses == {status}


def test_a_patch_cannot_merge_past_the_tag_limit(fitted: TestClient) -> None:
    first = {f"a{i}": "x" for i in range(60)}
    assert fitted.patch(f"{BASE}/versions/1", json={"tags": first}).status_code == 200
    more = {f"b{i}": "y" for i in range(41)}
    assert_problem(fitted.patch(f"{BASE}/versions/1", json={"tags": more}), 422, "101 tags", "100")
    assert len(fitted.get(f"{BASE}/versions/1").json()["tags"]) == 60
    swap = {**{f"a{i}": None for i in range(41)}, **more}  # deletions count first
    assert fitted.patch(f"{BASE}/versions/1", json={"tags": swap}).status_code == 200
    assert len(fitted.get(f"{BASE}/versions/1").json()["tags"]) == 60


@pytest.mark.parametrize(
    ("accept", "media"),
    [
        ("image/png;q=0, application/json", "application/json"),
        ("image/png;q=0", "application/json"),
        ("application/json;q=0.5, image/svg+xml", "image/svg+xml"),
        ("application/json, image/png", "application/json"),
        ("image/png;q=0.9, image/svg+xml", "image/svg+xml"),
        ("image/*", "image/png"),
    ],
)
def test_accept_quality_values_choose_the_answer(
    fitted: TestClient, accept: str, media: str
) -> None:
    body = {**sigmoid_batch(seed=3), "bootstrap": FEW_RESAMPLES}
    r = fitted.post(f"{BASE}/versions/1/diagnostics", json=body, headers={"accept": accept})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith(media)


def test_predict_refuses_more_rows_than_the_batch_limit(
    settings: Settings, database: Database
) -> None:
    app = create_app(settings.model_copy(update={"max_batch_rows": 1000}), database=database)
    with TestClient(app, raise_server_exceptions=False) as client:
        client.post(f"{BASE}/fit", json={**sigmoid_batch(), "method": "platt"})
        assert client.post(f"{BASE}/predict", json={"scores": [0.1] * 1000}).status_code == 200
        assert_problem(
            client.post(f"{BASE}/predict", json={"scores": [0.1] * 1001}), 413, "1001", "1000"
        )


def test_a_full_pool_answers_503_with_retry_after_before_reading_the_body(
    settings: Settings, database: Database
) -> None:
    tight = settings.model_copy(update={"max_concurrent_fits": 1, "max_queued_fits": 0})
    app = create_app(tight, database=database)
    with TestClient(app, raise_server_exceptions=False) as client:
        with client.app.state.service.work.admit():  # type: ignore[attr-defined]
            r = client.post(f"{BASE}/fit", json={**sigmoid_batch(), "method": "platt"})
            assert_problem(r, 503, "busy")
            assert r.headers["retry-after"].isdigit()
            # Served, the connection then closes with the body unread: the server's protocol
            # does that for every early answer (tests/server/test_timeouts.py).
        assert client.post(f"{BASE}/fit", json=sigmoid_batch()).status_code == 201


def test_a_client_that_leaves_mid_body_is_no_server_error(
    settings: Settings, database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(settings, database=database)
    sent: list[dict[str, Any]] = []
    messages = [
        {"type": "http.request", "body": b'{"scores": [0.1, 0.', "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": f"{BASE}/fit",
        "raw_path": f"{BASE}/fit".encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"9999")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }

    async def lifespan_and_request() -> None:
        async with app.router.lifespan_context(app):
            await app(scope, receive, send)

    asyncio.run(lifespan_and_request())
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 499
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_a_bad_class_index_is_located_where_it_was_sent(fitted: TestClient) -> None:
    body = {**sigmoid_batch(seed=3), "class_index": 5}
    posted = assert_problem(fitted.post(f"{BASE}/versions/1/diagnostics", json=body), 422)
    assert posted["errors"][0]["loc"] == ["body", "class_index"]
    got = assert_problem(fitted.get(f"{BASE}/versions/1/diagnostics?class_index=5"), 422)
    assert got["errors"][0]["loc"] == ["query", "class_index"]


def test_a_calibration_error_names_its_field(client: TestClient) -> None:
    body = {"scores": [0.1, 0.2, 0.3], "labels": [0, 1, 2], "method": "platt"}
    problem = assert_problem(client.post(f"{BASE}/fit", json=body), 422)
    assert problem["errors"][0]["loc"] == ["body", "labels", 2]


def test_a_fit_over_its_time_budget_stores_nothing(settings: Settings, database: Database) -> None:
    tight = settings.model_copy(update={"fit_timeout_seconds": 1e-6})
    app = create_app(tight, database=database)
    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.post(f"{BASE}/fit", json={**sigmoid_batch(2000), "method": "auto"})
        assert_problem(r, 503, "budget", "nothing was stored")
        assert r.headers["retry-after"].isdigit()
        assert client.get(BASE).status_code == 404


def test_a_deleted_versions_report_is_never_another_versions(client: TestClient) -> None:
    # SQLite gives a deleted row's id to the next insert: nothing may be keyed by it.
    for seed in (1, 2):
        client.post("/v1/calibrators/k1/fit", json={**sigmoid_batch(seed=seed), "method": "platt"})
    query = f"n_bins=3&bootstrap={FEW_RESAMPLES}"  # the same report asked of k1 v2 and k2 v1
    assert client.get(f"/v1/calibrators/k1/versions/2/diagnostics?{query}").status_code == 200
    assert client.get("/v1/calibrators/k1/versions/2/diagnostics.svg?n_bins=3").status_code == 200
    assert client.delete("/v1/calibrators/k1/versions/2").status_code == 204
    client.post("/v1/calibrators/k2/fit", json={**sigmoid_batch(seed=3), "method": "isotonic"})
    report = client.get(f"/v1/calibrators/k2/versions/1/diagnostics?{query}").json()
    assert (report["name"], report["version"]) == ("k2", 1)
    svg = client.get("/v1/calibrators/k2/versions/1/diagnostics.svg?n_bins=3").text
    assert "k2 v1" in svg
    assert "k1" not in svg
