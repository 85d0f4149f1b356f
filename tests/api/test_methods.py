"""HEAD on every GET route, and 405 answers whose ``Allow`` lists every method of the path
(issue 25's hostile client: HEAD was 405, and ``Allow`` named one method of several)."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import REGISTRY

from tests.client import TestClient

from .helpers import assert_problem

BASE = "/v1/calibrators/churn"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/calibrators",
        BASE,
        f"{BASE}/versions/1",
        f"{BASE}/versions/latest/diagnostics?bootstrap=0",
        f"{BASE}/versions/1/artifact",
        "/v2/models/churn",
        "/healthz",
        "/openapi.json",
    ],
)
def test_head_answers_as_get_without_a_body(fitted: TestClient, path: str) -> None:
    got = fitted.get(path)
    head = fitted.head(path)
    assert got.status_code == 200, got.text
    assert head.status_code == 200, head.text
    assert head.content == b""
    assert head.headers["content-length"] == str(len(got.content))
    assert head.headers["content-type"] == got.headers["content-type"]
    assert "x-request-id" in head.headers


def test_head_of_an_error_is_the_get_error_without_its_body(fitted: TestClient) -> None:
    got = fitted.get("/v1/calibrators/nope")
    head = fitted.head("/v1/calibrators/nope")
    assert got.status_code == head.status_code == 404
    assert head.content == b""
    assert head.headers["content-length"] == str(len(got.content))
    assert head.headers["content-type"] == "application/problem+json"


def test_head_stores_nothing_and_is_counted_as_head(
    fitted: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    labels = {"method": "HEAD", "route": "/v1/calibrators/{name}", "status": "200"}
    before = REGISTRY.get_sample_value("calibration_http_requests_total", labels) or 0.0
    with caplog.at_level(logging.INFO, logger="app.access"):
        assert fitted.head(BASE).status_code == 200
    after = REGISTRY.get_sample_value("calibration_http_requests_total", labels)
    assert after == before + 1
    assert any(r.getMessage() == f"HEAD {BASE} 200" for r in caplog.records)


def test_head_is_no_way_around_a_post_only_route(client: TestClient) -> None:
    r = client.head(f"{BASE}/fit")
    assert r.status_code == 405
    assert r.headers["allow"] == "POST"


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", BASE, "DELETE, GET, HEAD"),
        ("POST", BASE, "DELETE, GET, HEAD"),
        ("PUT", f"{BASE}/fit", "POST"),
        ("GET", f"{BASE}/fit", "POST"),
        ("POST", f"{BASE}/versions/1", "DELETE, GET, HEAD, PATCH"),
        ("GET", f"{BASE}/aliases/production", "DELETE, PUT"),
        ("DELETE", "/v1/calibrators", "GET, HEAD"),
    ],
)
def test_405_lists_every_method_of_the_path(
    client: TestClient, method: str, path: str, allowed: str
) -> None:
    r = client.request(method, path)
    assert_problem(r, 405, method)
    assert r.headers["allow"] == allowed
