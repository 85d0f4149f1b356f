"""413 for oversized bodies and batches; 503 with Retry-After when the database is away."""

from __future__ import annotations

import socket

from app.main import create_app
from app.settings import Settings
from app.store import Database
from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch


def test_body_and_batch_limits_are_413_and_nothing_is_stored(database_url: str) -> None:
    settings = Settings(database_url=database_url, max_body_bytes=4096, max_batch_rows=50)
    database = Database(database_url, settings)
    try:
        with TestClient(create_app(settings, database=database)) as client:
            big = sigmoid_batch(400)
            r = client.post("/v1/calibrators/m/fit", json=big)
            assert_problem(r, 413, "4096")
            rows = sigmoid_batch(60)
            r = client.post("/v1/calibrators/m/fit", json={**rows, "scores": rows["scores"]})
            assert_problem(r, 413, "60 rows", "50")
            assert client.get("/v1/calibrators").json()["total"] == 0
            assert client.post("/v1/calibrators/m/fit", json=sigmoid_batch(40)).status_code == 201
    finally:
        database.dispose()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens once the socket is closed


def test_unreachable_database_gives_503_with_retry_after() -> None:
    url = f"postgresql://nobody@127.0.0.1:{_closed_port()}/nothing"
    settings = Settings(database_url=url, db_connect_timeout_seconds=2)
    with TestClient(create_app(settings)) as client:
        r = client.post("/v1/calibrators/m/fit", json=sigmoid_batch(40))
        assert_problem(r, 503, "unavailable")
        assert r.headers["retry-after"].isdigit()
        r = client.post("/v1/calibrators/m/predict", json={"scores": [0.1]})
        assert_problem(r, 503)
        assert_problem(client.get("/readyz"), 503)
        v2 = client.get("/v2/health/ready")
        assert (v2.status_code, v2.json()) == (503, {"ready": False})
        assert client.get("/v2/health/live").status_code == 200
        assert client.get("/healthz").status_code == 200
