"""/metrics counts what an operator needs (per route template, summed over workers), and every
log line is one JSON object carrying the request id."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import iter_route_contexts
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families
from starlette.routing import Mount

from app.api.request_log import RouteTemplates, route_templates
from app.main import create_app
from app.observability import JsonFormatter
from app.settings import Settings
from demo.server import stop_process_group
from tests.api.helpers import sigmoid_batch, spy_on_regular_predict
from tests.client import TestClient
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
BASE = "/v1/calibrators/churn"
PREDICT = "/v1/calibrators/{name}/predict"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Every sample of a Prometheus text exposition, by name and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(get: Any) -> Samples:
    response = get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    return parse(response.text)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def requests_counted(samples: Samples) -> float:
    """Requests counted over every route but the scrapes themselves."""
    return sum(
        count
        for (name, labels), count in samples.items()
        if name == "calibration_http_requests_total" and ("route", "/metrics") not in labels
    )


def requests_by_worker(metrics_dir: Path) -> dict[str, float]:
    """What each worker process counted, from its own file of the multiprocess directory."""
    return {
        path.stem.rpartition("_")[2]: requests_counted(
            {
                (sample.name, tuple(sorted(sample.labels.items()))): sample.value
                for family in MultiProcessCollector.merge([str(path)])
                for sample in family.samples
            }
        )
        for path in metrics_dir.glob("counter_*.db")
    }


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    path = tmp_path / "calibration.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def client(sqlite_url: str) -> Iterator[TestClient]:
    settings = Settings(database_url=sqlite_url, latest_refresh_seconds=60.0)
    with TestClient(create_app(settings), raise_server_exceptions=False) as test_client:
        yield test_client


def test_metrics_count_requests_by_route_template(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    regular = spy_on_regular_predict(client, monkeypatch)
    before = scrape(client.get)

    assert client.post(f"{BASE}/fit?method=platt", json=sigmoid_batch(200)).status_code == 201
    scores = {"scores": [-1.0, 0.0, 2.0]}
    assert client.post(f"{BASE}/predict", json=scores).status_code == 200
    assert regular == []  # the hot path answered
    assert client.post(f"{BASE}/predict?version=1&unrelated=1", json=scores).status_code == 200
    assert len(regular) == 1  # the regular route answered
    assert client.get("/v1/calibrators/nobody").status_code == 404
    assert client.get("/no/such/route").status_code == 404
    assert client.get("/static/docs/swagger/swagger-ui.css").status_code == 200
    assert client.post(f"{BASE}/predict", json={"scores": "high"}).status_code == 422

    after = scrape(client.get)
    assert not any("churn" in dict(labels).get("route", "") for _, labels in after)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    requests = "calibration_http_requests_total"
    fit_route = "/v1/calibrators/{name}/fit"
    assert delta(requests, method="POST", route=fit_route, status="201") == 1.0
    assert delta(requests, method="POST", route=PREDICT, status="200") == 2.0
    assert delta(requests, method="POST", route=PREDICT, status="422") == 1.0
    assert delta(requests, method="GET", route="/v1/calibrators/{name}", status="404") == 1.0
    assert delta(requests, method="GET", route="unmatched", status="404") == 1.0
    assets = "/static/docs/{path:path}"  # the docs' files, under their mount's template
    assert delta(requests, method="GET", route=assets, status="200") == 1.0
    latency = "calibration_http_request_duration_seconds_count"
    assert delta(latency, method="POST", route=PREDICT) == 3.0
    assert delta("calibration_fits_total", method="platt") == 1.0
    assert delta("calibration_fit_duration_seconds_count", method="platt") == 1.0
    assert delta("calibration_predictions_total", method="platt") == 6.0  # 3 scores, twice
    assert delta("calibration_artifact_cache_total", result="hit") >= 2.0


@pytest.mark.in_threads  # it patches code the job runs
def test_log_lines_are_json_with_the_request_id(client: TestClient) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        headers = {"X-Request-ID": "trace-42"}
        response = client.post(f"{BASE}/fit", json=sigmoid_batch(100), headers=headers)
        assert response.headers["x-request-id"] == "trace-42"
    finally:
        root.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    ours = [line for line in lines if line["logger"].startswith("app.")]
    assert {line["logger"] for line in ours} >= {"app.service", "app.access"}
    assert all(line["request_id"] == "trace-42" for line in ours)  # threadpool work included
    (access,) = (line for line in ours if line["logger"] == "app.access")
    assert access["route"] == "/v1/calibrators/{name}/fit"
    assert access["status"] == 201
    assert access["duration_ms"] > 0
    assert {"ts", "level", "msg", "method", "path"} <= access.keys()


def test_workers_metrics_add_up(tmp_path: Path) -> None:
    """Two workers: every scrape counts every request, whichever worker answers it."""
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    (metrics_dir / "counter_1.db").write_bytes(b"an earlier run")  # serve must clear it
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CALIBRATION_", "PROMETHEUS_"))
    }
    env.update(
        CALIBRATION_WORKERS="2",
        CALIBRATION_DATABASE_URL=f"sqlite:///{tmp_path / 'calibration.db'}",
        CALIBRATION_HOST="127.0.0.1",
        CALIBRATION_PORT=str(port),
        PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
        # No job runs here: without worker processes neither server starts a fork server,
        # seconds of imports each, beside the two servers' own start on the same cores.
        CALIBRATION_WORK_PROCESSES="false",
    )
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "app.serve"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,  # stop_process_group ends its workers too
        )
    base = f"http://127.0.0.1:{port}"
    # A new connection for each request (the kernel picks the worker), from one client: each
    # httpx.get would make a client of its own, and its TLS context (~60 ms of CPU).
    fresh = httpx.Client(base_url=base, limits=httpx.Limits(max_keepalive_connections=0))
    try:
        deadline = time.monotonic() + 90  # seconds to start, longer on a busy machine
        while True:
            assert server.poll() is None, log_path.read_text()
            try:
                if fresh.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        sent = 1  # the health check that answered

        def one(i: int) -> None:
            headers = {"X-Request-ID": f"mp-{i}"}
            assert fresh.get("/healthz", headers=headers).status_code == 200

        # Until both workers have answered some: almost always the first round, but the second
        # may still be starting on a busy machine (seen: 200 requests, all to the first).
        both_by = time.monotonic() + 60
        with ThreadPoolExecutor(max_workers=8) as pool:
            while True:
                list(pool.map(one, range(sent, sent + 20)))
                sent += 20
                by_worker = requests_by_worker(metrics_dir)
                if sum(count > 0 for count in by_worker.values()) >= 2:
                    break
                if time.monotonic() > both_by:
                    break
                time.sleep(0.2)
        assert sum(count > 0 for count in by_worker.values()) == 2, by_worker
        assert sum(by_worker.values()) == sent
        for _ in range(6):
            assert requests_counted(scrape(fresh.get)) == sent
    finally:
        fresh.close()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        finally:
            stop_process_group(server)  # what is left of it: nothing, after a clean exit
    assert server.returncode == 0
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line]
    access = [line for line in lines if line["logger"] == "app.access"]
    assert len(access) >= sent
    assert {line["request_id"] for line in access} >= {f"mp-{i}" for i in range(1, sent)}
    assert not [line for line in lines if line["logger"] == "uvicorn.access"]


def test_requests_refused_before_routing_are_counted_by_template(sqlite_url: str) -> None:
    digest = hashlib.sha256(b"reader-key").hexdigest()
    settings = Settings(database_url=sqlite_url, api_keys=f"model-server:read:{digest}")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logging.getLogger("app.access").addHandler(handler)
    try:
        with TestClient(create_app(settings)) as client:
            before = scrape(client.get)
            assert client.post(f"{BASE}/predict", json={"scores": [0.5]}).status_code == 401
            reader = {"Authorization": "Bearer reader-key"}
            assert client.post(f"{BASE}/fit", json={}, headers=reader).status_code == 403
            assert client.get(f"{BASE}", headers=reader).status_code == 404
            after = scrape(client.get)
    finally:
        logging.getLogger("app.access").removeHandler(handler)

    def delta(**labels: str) -> float:
        name = "calibration_http_requests_total"
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta(method="POST", route=PREDICT, status="401") == 1.0
    assert delta(method="POST", route="/v1/calibrators/{name}/fit", status="403") == 1.0
    assert delta(method="GET", route="/v1/calibrators/{name}", status="404") == 1.0
    lines = {
        line["status"]: line
        for line in map(json.loads, stream.getvalue().splitlines())
        if line["path"] != "/metrics"
    }
    assert "api_key" not in lines[401]
    assert lines[404]["api_key"] == "model-server"  # the key's name, never the key


def test_unhandled_errors_are_counted_as_500(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = client.app.state.service  # type: ignore[attr-defined]

    def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(service.calibrators, "get", broken)
    before = scrape(client.get)
    assert client.get(BASE).status_code == 500
    after = scrape(client.get)
    labels = {"method": "GET", "route": "/v1/calibrators/{name}", "status": "500"}
    name = "calibration_http_requests_total"
    assert value(after, name, **labels) - value(before, name, **labels) == 1.0


def test_a_path_answered_before_routing_gets_the_router_s_template() -> None:
    """The templates are the router's own paths, converters included: a request the router
    would send to ``/ui/{rest:path}`` gets that label, however many segments it has, as a
    routed one does (``scope["route"].path``); a mount's files get ``{mount}/{path:path}``."""
    app = create_app(Settings(database_url="sqlite://"))
    template = RouteTemplates(lambda: route_templates(app))
    assert template("GET", "/ui/a/b") == "/ui/{rest:path}"
    assert template("GET", "/ui/a") == "/ui/{rest:path}"
    assert template("DELETE", "/v1/calibrators/churn") == "/v1/calibrators/{name}"
    assert template("GET", "/static/docs/swagger/x.css") == "/static/docs/{path:path}"
    assert template("GET", "/nowhere") == "unmatched"
    routed = {
        route.path
        for route in iter_route_contexts(app.routes)
        if route.path and not isinstance(route.original_route, Mount)
    }
    assert routed <= route_templates(app).keys()
