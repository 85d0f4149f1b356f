"""API keys: who gets in, with which scope, and when the service refuses to start at all."""

from __future__ import annotations

import asyncio
import hmac
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app.access.api_keys import ApiKey, key_digest, match_key, parse_api_keys, required_scope
from app.api.security import ApiKeyAuth
from app.keys import new_key
from app.main import create_app
from app.settings import Settings, get_settings
from app.store import Database
from tests.client import TestClient

from .helpers import FEW_RESAMPLES, assert_problem, sigmoid_batch, spy_on_regular_predict

BASE = "/v1/calibrators/churn"
REALM = 'Bearer realm="calibration"'
READ_KEY, READ_ENTRY = new_key("model-server", "read")
WRITE_KEY, WRITE_ENTRY = new_key("admin", "write")
KEYS = f"{READ_ENTRY.entry()},{WRITE_ENTRY.entry()}"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


READ, WRITE = bearer(READ_KEY), bearer(WRITE_KEY)


@pytest.fixture
def backend() -> str:
    """Authentication happens before any database work: SQLite is enough."""
    return "sqlite"


@pytest.fixture
def secured(database_url: str, database: Database) -> Iterator[TestClient]:
    """An app with a read and a write key, whose cached versions the hot path serves."""
    settings = Settings(database_url=database_url, api_keys=KEYS, latest_refresh_seconds=60.0)
    with TestClient(create_app(settings, database=database), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def regular_calls(secured: TestClient, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Records every call of the regular predict route (the hot path does not call it)."""
    return spy_on_regular_predict(secured, monkeypatch)


def fit(client: TestClient, headers: dict[str, str]) -> Any:
    return client.post(
        f"{BASE}/fit", json={**sigmoid_batch(200), "method": "platt"}, headers=headers
    )


def test_without_keys_on_loopback_everything_is_open(client: TestClient) -> None:
    assert fit(client, {}).status_code == 201
    assert client.get(BASE).status_code == 200
    assert client.post(f"{BASE}/predict", json={"scores": [0.5]}).status_code == 200
    assert client.delete(BASE).status_code == 204


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/calibrators"),
        ("POST", f"{BASE}/fit"),
        ("POST", f"{BASE}/predict"),
        ("DELETE", BASE),
        ("GET", "/v1/no-such-route"),  # unknown routes: 401, not 404
        ("PATCH", "/v1/calibrators/churn/nothing/here"),
        ("GET", "/"),
    ],
)
def test_no_key_is_401_with_a_challenge(secured: TestClient, method: str, path: str) -> None:
    r = secured.request(method, path, json={"scores": [0.5]})
    assert_problem(r, 401, "Authorization: Bearer")
    assert r.headers["www-authenticate"] == REALM
    assert "x-request-id" in r.headers


@pytest.mark.parametrize(
    "authorization",
    [f"Bearer {READ_KEY}x", "Bearer " + "A" * 43, f"Bearer {READ_ENTRY.digest.hex()}"],
    ids=["key-plus-a-letter", "unknown-key", "the-hash-itself"],  # the keys are drawn per run
)
def test_a_wrong_key_is_401_invalid_token(secured: TestClient, authorization: str) -> None:
    r = secured.get("/v1/calibrators", headers={"Authorization": authorization})
    assert_problem(r, 401, "not valid")
    assert r.headers["www-authenticate"] == f'{REALM}, error="invalid_token"'


def test_another_scheme_counts_as_no_key(secured: TestClient) -> None:
    r = secured.get("/v1/calibrators", headers={"Authorization": f"Basic {READ_KEY}"})
    assert_problem(r, 401)
    assert r.headers["www-authenticate"] == REALM
    assert secured.get(
        "/v1/calibrators", headers={"Authorization": "bearer " + READ_KEY}
    ).is_success


def test_unknown_routes_answer_404_only_to_a_key_holder(secured: TestClient) -> None:
    assert_problem(secured.get("/v1/no-such-route", headers=READ), 404)
    assert_problem(secured.get("/v1/calibrators/nope", headers=READ), 404, "nope")


def test_a_read_key_reads_predicts_diagnoses_and_compares(
    secured: TestClient, regular_calls: list[Any]
) -> None:
    assert fit(secured, WRITE).status_code == 201
    for path in [
        "/v1/calibrators",
        BASE,
        f"{BASE}/versions/1",
        f"{BASE}/versions/latest/diagnostics?bootstrap={FEW_RESAMPLES}",
        f"{BASE}/versions/1/artifact",
    ]:
        assert secured.get(path, headers=READ).status_code == 200, path
    scores = {"scores": [-1.0, 0.0, 2.0]}
    fast = secured.post(f"{BASE}/predict?version=1", json=scores, headers=READ)
    assert fast.status_code == 200, fast.text
    assert regular_calls == []  # the hot path answered
    regular = secured.post(f"{BASE}/predict?version=1&unrelated=1", json=scores, headers=READ)
    assert len(regular_calls) == 1  # the regular route answered
    assert regular.content == fast.content
    fresh = {**sigmoid_batch(100, seed=3), "bootstrap": FEW_RESAMPLES}
    assert secured.post(f"{BASE}/versions/1/diagnostics", json=fresh, headers=READ).is_success
    assert secured.post(f"{BASE}/compare", json=fresh, headers=READ).is_success


def test_the_hot_path_refuses_what_the_route_refuses(
    secured: TestClient, regular_calls: list[Any]
) -> None:
    assert fit(secured, WRITE).status_code == 201
    scores = {"scores": [0.5]}
    assert secured.post(f"{BASE}/predict?version=1", json=scores, headers=READ).is_success
    assert regular_calls == []  # version 1 is loaded: the hot path would answer
    r = secured.post(f"{BASE}/predict?version=1", json=scores)
    assert_problem(r, 401)
    r = secured.post(f"{BASE}/predict?version=1", json=scores, headers=bearer("guess"))
    assert_problem(r, 401, "not valid")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", f"{BASE}/fit", {**sigmoid_batch(50), "method": "platt"}),
        ("DELETE", f"{BASE}/versions/1", None),
        ("DELETE", BASE, None),
        ("PUT", f"{BASE}/aliases/production", {"version": 1}),
        ("DELETE", f"{BASE}/aliases/candidate", None),
        ("PATCH", f"{BASE}/versions/1", {"description": "mine now"}),
        ("DELETE", "/v1/calibrators/nope/unknown", None),
    ],
)
def test_a_read_key_cannot_write(
    secured: TestClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    assert fit(secured, WRITE).status_code == 201
    assert secured.put(f"{BASE}/aliases/candidate", json={"version": 1}, headers=WRITE).is_success
    before = secured.get(BASE, headers=READ).json()
    r = secured.request(method, path, json=body, headers=READ)
    assert_problem(r, 403, "model-server", "write")
    assert r.headers["www-authenticate"] == (f'{REALM}, error="insufficient_scope", scope="write"')
    assert secured.get(BASE, headers=READ).json() == before  # nothing changed


def test_a_write_key_does_everything(secured: TestClient) -> None:
    assert fit(secured, WRITE).status_code == 201
    assert fit(secured, WRITE).status_code == 201
    calls = [
        ("GET", BASE, None, 200),
        ("POST", f"{BASE}/predict", {"scores": [0.5]}, 200),
        ("POST", f"{BASE}/compare", {**sigmoid_batch(80, seed=2), "bootstrap": FEW_RESAMPLES}, 200),
        ("PUT", f"{BASE}/aliases/production", {"version": 1}, 200),
        ("PATCH", f"{BASE}/versions/1", {"description": "first"}, 200),
        ("DELETE", f"{BASE}/aliases/production", None, 204),
        ("DELETE", f"{BASE}/versions/2", None, 204),
        ("DELETE", BASE, None, 204),
    ]
    for method, path, body, status in calls:
        r = secured.request(method, path, json=body, headers=WRITE)
        assert r.status_code == status, (method, path, r.text)


@pytest.mark.parametrize(
    "path",
    [
        "/healthz",
        "/readyz",
        "/docs",
        "/docs/oauth2-redirect",
        "/redoc",
        "/openapi.json",
        "/problems",
        "/problems/not-found",
        "/static/docs/swagger/swagger-ui-bundle.js",
        "/static/docs/swagger/swagger-ui.css",
        "/static/docs/redoc/redoc.standalone.js",
        "/static/docs/fastapi/favicon.png",
    ],
)
def test_probes_and_docs_stay_open(secured: TestClient, path: str) -> None:
    assert secured.get(path).status_code == 200


def test_metrics_is_never_behind_a_key(secured: TestClient) -> None:
    assert secured.get("/metrics").status_code != 401


def test_openapi_declares_the_bearer_scheme_and_its_errors(secured: TestClient) -> None:
    spec = secured.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": spec["components"]["securitySchemes"]["bearer"]["description"],
    }
    locked = set()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if required_scope(method.upper(), path) is not None:  # /docs shows a lock
                assert operation["security"] == [{"bearer": []}], (path, method)
                locked.add(path)
            else:
                assert "security" not in operation, (path, method)
            if path.startswith("/v1/"):
                assert {"401", "403"} <= operation["responses"].keys(), (path, method)
    keyed = {p for p in spec["paths"] if p.startswith(("/v1/", "/v2")) and "/health/" not in p}
    assert keyed == locked


def test_the_key_name_is_in_the_request_state_for_logs() -> None:
    seen: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["state"])

    async def call(headers: list[tuple[bytes, bytes]], path: str = "/v1/calibrators") -> None:
        scope = {"type": "http", "method": "GET", "path": path, "headers": headers}
        await ApiKeyAuth(app, parse_api_keys(KEYS))(scope, None, None)  # type: ignore[arg-type]
        await ApiKeyAuth(app, ())(scope | {"state": {}}, None, None)  # type: ignore[arg-type]

    asyncio.run(call([(b"authorization", f"Bearer {WRITE_KEY}".encode())]))
    asyncio.run(call([], path="/healthz"))
    admin = {"api_key": "admin", "api_scope": "write"}
    nobody = {"api_key": None, "api_scope": None}
    assert seen == [admin, nobody, nobody, nobody]


def test_auth_disabled_ignores_keys_and_serves_anyone(
    database_url: str, database: Database
) -> None:
    settings = Settings(database_url=database_url, api_keys=KEYS, auth="disabled", host="0.0.0.0")
    with TestClient(create_app(settings, database=database)) as client:
        assert fit(client, {}).status_code == 201
        assert client.delete(BASE).status_code == 204


# --- Settings: what refuses to start -------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("change-me-api-key", "entry 1 is not name:scope:sha256hex (a raw key?"),
        (f"{READ_ENTRY.entry()},admin:write", "entry 2 is not name:scope:sha256hex"),
        (f"a:admin:{'0' * 64}", "entry 1 ('a'): the scope must be read, log or write"),
        ("a:read:abc123", "entry 1 ('a'): the hash must be 64 hexadecimal digits"),
        (f"a b:read:{'0' * 64}", "entry 1: the name must be"),
        (f"a:read:{'0' * 64},a:write:{'1' * 64}", "names 'a' twice"),
        (f"a:read:{'0' * 64},b:write:{'0' * 64}", "the hash of 'b' twice"),
    ],
    ids=lambda param: param if "entry" in str(param) or "twice" in str(param) else "",
)
def test_malformed_key_entries_refuse_to_start(value: str, message: str) -> None:
    with pytest.raises(ValidationError, match=r"api_keys") as refused:
        Settings(api_keys=value)
    assert message in str(refused.value)
    assert "change-me-api-key" not in str(refused.value)  # a raw key is never echoed


def test_keys_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALIBRATION_API_KEYS", f" {READ_ENTRY.entry()} , {WRITE_ENTRY.entry()},")
    assert Settings().api_keys == (READ_ENTRY, WRITE_ENTRY)
    monkeypatch.setenv("CALIBRATION_API_KEYS", "")
    assert Settings().api_keys == ()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "calibration.internal"])
def test_a_reachable_host_without_keys_refuses_to_start(host: str) -> None:
    with pytest.raises(ValidationError, match=r"refusing to serve on .* without API keys"):
        Settings(host=host)
    assert Settings(host=host, api_keys=KEYS).host == host
    assert Settings(host=host, auth="disabled").auth == "disabled"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"])
def test_loopback_without_keys_runs_open(host: str) -> None:
    assert Settings(host=host).api_keys == ()


def test_serve_refuses_to_start_on_0000_without_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    from app import serve

    monkeypatch.setenv("CALIBRATION_HOST", "0.0.0.0")
    monkeypatch.delenv("CALIBRATION_API_KEYS", raising=False)
    monkeypatch.delenv("CALIBRATION_AUTH", raising=False)
    get_settings.cache_clear()
    try:
        with pytest.raises(
            SystemExit, match=r"not starting: refusing to serve on 0\.0\.0\.0 without API keys"
        ):
            serve.main()
    finally:
        get_settings.cache_clear()


def test_make_run_checks_the_host_it_binds() -> None:
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    assert (
        "CALIBRATION_HOST=$(HOST) CALIBRATION_PORT=$(PORT) CALIBRATION_WORKERS=1 $(PY) -m app.serve"
        in makefile
    )


# --- The key helper and the comparison -----------------------------------------------------


def test_the_key_helper_round_trips(database_url: str, database: Database) -> None:
    command = [sys.executable, "-m", "app.keys", "--name", "ci", "--scope", "write"]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    lines = dict(line.split(":", 1) for line in out.splitlines())
    key, entry = lines["key"].strip(), lines["entry"].strip()
    assert len(key) >= 43
    assert entry.startswith("ci:write:")
    (configured,) = parse_api_keys(entry)
    assert match_key(key, [configured]) == configured
    settings = Settings(database_url=database_url, api_keys=entry)
    with TestClient(create_app(settings, database=database)) as client:
        assert fit(client, bearer(key)).status_code == 201
        assert fit(client, bearer(key[:-1])).status_code == 401


def test_every_entry_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = [ApiKey(f"k{i}", "read", key_digest(f"secret-{i}")) for i in range(5)]
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)  # as app.access.api_keys calls it
    for presented, expected in [("secret-0", keys[0]), ("secret-3", keys[3]), ("nope", None)]:
        compared.clear()
        assert match_key(presented, keys) == expected
        assert [b for _, b in compared] == [k.digest for k in keys]  # all of them, in order
        assert {a for a, _ in compared} == {key_digest(presented)}


@pytest.mark.parametrize(
    ("method", "path", "scope"),
    [
        ("GET", "/v1/calibrators", "read"),
        ("HEAD", f"{BASE}/versions/1", "read"),
        ("POST", f"{BASE}/predict", "read"),
        ("POST", f"{BASE}/versions/latest/diagnostics", "read"),
        ("POST", f"{BASE}/compare", "read"),
        ("POST", f"{BASE}/versions/production/estimate", "read"),
        ("POST", f"{BASE}/fit", "write"),
        ("POST", "/v1/calibrators/predict/fit", "write"),
        ("POST", f"{BASE}/predict/extra", "write"),
        ("PUT", f"{BASE}/aliases/a", "write"),
        ("PATCH", f"{BASE}/versions/1", "write"),
        ("DELETE", BASE, "write"),
        ("OPTIONS", "/v1/calibrators", "write"),
        ("GET", "/healthz", None),
        ("GET", "/openapi.json", None),
        ("POST", "/metrics", None),
        ("GET", "/problems", None),
        ("GET", "/problems/not-found", None),
        ("GET", "/static/docs/swagger/swagger-ui.css", None),
        ("GET", "/problemsx", "read"),
        ("GET", "/problems/../v1/calibrators", "read"),
        ("GET", "/static/docs/../../v1/calibrators", "read"),
    ],
)
def test_the_scope_follows_method_and_path(method: str, path: str, scope: str | None) -> None:
    assert required_scope(method, path) == scope


def test_keys_are_checked_below_a_proxy_prefix(secured: TestClient) -> None:
    # uvicorn --root-path puts the prefix in scope["path"]: the scope follows what is after it.
    client = TestClient(secured.app, root_path="/calib", raise_server_exceptions=False)
    assert client.get("/calib/healthz").status_code == 200
    assert client.get("/calib/problems/unauthorized").status_code == 200
    refused = client.get("/calib/v1/calibrators")
    assert refused.status_code == 401
    assert refused.json()["type"] == "/calib/problems/unauthorized"
    assert client.get("/calib/v1/calibrators", headers=READ).status_code == 200
    assert client.post(f"/calib{BASE}/fit", json=sigmoid_batch(), headers=READ).status_code == 403
