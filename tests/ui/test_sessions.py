"""The web view with API keys: the key form, the session cookie, and what it never opens."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from pydantic import ValidationError
from starlette.requests import cookie_parser
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app.access.api_keys import parse_entry
from app.access.sessions import SESSION_SECONDS, Sessions, safe_next
from app.keys import new_key
from app.main import create_app
from app.settings import Settings
from app.store import Database
from tests.client import TestClient

from .conftest import SECRET

FORM = {"content-type": "application/x-www-form-urlencoded"}


def sign_in(
    client: TestClient, key: str, next_path: str = "/ui", at: str = "", **headers: str
) -> Any:
    """Post the key form (at the path prefix ``at``, as a proxy forwards it to uvicorn)."""
    return client.post(
        f"{at}/ui/key?next={quote(next_path, safe='')}",
        content=f"key={quote(key)}",
        headers={**FORM, **headers},
        follow_redirects=False,
    )


def test_a_page_without_a_session_redirects_to_the_key_form(keyed_client: TestClient) -> None:
    answer = keyed_client.get("/ui/calibrators/churn?page=1", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/key?next=%2Fui%2Fcalibrators%2Fchurn%3Fpage%3D1"
    form = keyed_client.get(answer.headers["location"])
    assert form.status_code == 200
    assert 'type="password"' in form.text
    assert 'action="/ui/key?next=%2Fui%2Fcalibrators%2Fchurn%3Fpage%3D1"' in form.text


def test_a_read_key_signs_in_with_a_strict_httponly_cookie(
    keyed_client: TestClient, keys: dict[str, Any]
) -> None:
    answer = sign_in(keyed_client, keys["read"], "/ui/calibrators/churn")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/calibrators/churn"
    cookie = answer.headers["set-cookie"]
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "path", "max-age"} <= attributes
    assert "samesite=strict" in cookie.lower()
    assert "path=/ui" in cookie.lower()
    assert "secure" not in attributes  # plain http here; see the https test
    value = cookie_parser(cookie.split(";")[0]).get("calibration_ui")
    assert value is not None
    assert keys["read"] not in value
    page = keyed_client.get("/ui/calibrators/churn")
    assert page.status_code == 200
    assert "Sign out" in page.text


def test_the_cookie_is_secure_over_https(
    database_url: str, database: Database, keys: dict[str, Any]
) -> None:
    settings = Settings(database_url=database_url, api_keys=keys["entries"], ui_secret=SECRET)
    app = create_app(settings, database=database)
    with TestClient(app, base_url="https://testserver") as client:
        answer = sign_in(client, keys["read"])
        assert answer.status_code == 303
        assert "secure" in answer.headers["set-cookie"].lower()


def test_a_wrong_key_is_refused_and_sets_nothing(keyed_client: TestClient) -> None:
    answer = sign_in(keyed_client, "not-a-key")
    assert answer.status_code == 403
    assert "set-cookie" not in answer.headers
    assert "That key is not valid here." in answer.text
    empty = sign_in(keyed_client, "")
    assert empty.status_code == 403


def test_a_forged_or_foreign_cookie_opens_nothing(
    keyed_client: TestClient, keys: dict[str, Any]
) -> None:
    keyed_client.cookies.set("calibration_ui", f"viewer:{10**9}:forged", path="/ui")
    assert keyed_client.get("/ui", follow_redirects=False).status_code == 303
    keyed_client.cookies.set("calibration_ui", keys["read"], path="/ui")
    assert keyed_client.get("/ui", follow_redirects=False).status_code == 303


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/ui",
        "//evil.example/ui",
        "/\\evil.example",
        "/v1/calibrators",
        "/ui/../v1/calibrators",
        "/ui/%2e%2e/v1",
        "/ui\r\nSet-Cookie: x=1",
        "javascript:alert(1)",
        "/ui/key",
        "",
    ],
)
def test_the_page_to_return_to_stays_in_the_web_view(
    keyed_client: TestClient, keys: dict[str, Any], target: str
) -> None:
    answer = sign_in(keyed_client, keys["read"], target)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui"
    assert safe_next(target) == "/ui"


def test_a_form_posted_from_another_origin_is_refused(
    keyed_client: TestClient, keys: dict[str, Any]
) -> None:
    foreign = sign_in(keyed_client, keys["read"], origin="https://evil.example")
    assert foreign.status_code == 403
    assert "set-cookie" not in foreign.headers
    cross = sign_in(keyed_client, keys["read"], **{"sec-fetch-site": "cross-site"})
    assert cross.status_code == 403
    ours = sign_in(keyed_client, keys["read"], origin="http://testserver")
    assert ours.status_code == 303
    for refused in (foreign, cross):
        assert "Cross-site request" in refused.text  # not the key-scope page of Forbidden
    # Sec-Fetch-Site decides when the browser sends it; Origin only stands in for it.
    spoofed = {"origin": "http://testserver", "sec-fetch-site": "same-site"}
    assert sign_in(keyed_client, keys["read"], **spoofed).status_code == 403
    typed = sign_in(keyed_client, keys["read"], **{"sec-fetch-site": "none"})
    assert typed.status_code == 303
    logout = keyed_client.post("/ui/logout", headers={"origin": "https://evil.example"})
    assert logout.status_code == 403


def proxied(settings: Settings, database: Database, peer: str) -> TestClient:
    """The app as ``python -m app.serve`` runs it (uvicorn's proxy headers, trusting
    ``forwarded_allow_ips``), called from the address ``peer``."""
    app = ProxyHeadersMiddleware(
        create_app(settings, database=database), trusted_hosts=settings.forwarded_allow_ips
    )
    return TestClient(app, client=(peer, 40000), raise_server_exceptions=False)


def test_sign_in_works_behind_a_proxy_that_drops_the_port_from_host(
    database_url: str, database: Database, keys: dict[str, Any]
) -> None:
    # nginx with `proxy_set_header Host $host` sends "localhost", while the browser's page,
    # and so its Origin, is http://localhost:8000.
    settings = Settings(database_url=database_url, api_keys=keys["entries"], ui_secret=SECRET)
    browser = {"host": "localhost", "origin": "http://localhost:8000"}
    with proxied(settings, database, "127.0.0.1") as client:
        signed = sign_in(client, keys["read"], **browser, **{"sec-fetch-site": "same-origin"})
        assert signed.status_code == 303, signed.text
        assert "calibration_ui=" in signed.headers["set-cookie"]
        # A browser without Sec-Fetch-Site is judged by Origin, which needs the port in Host
        # (deploy/nginx.conf passes $http_host).
        assert sign_in(client, keys["read"], **browser).status_code == 403
        with_port = {"host": "localhost:8000", "origin": "http://localhost:8000"}
        assert sign_in(client, keys["read"], **with_port).status_code == 303


def test_the_cookie_is_secure_behind_a_trusted_tls_proxy_only(
    database_url: str, database: Database, keys: dict[str, Any]
) -> None:
    settings = Settings(
        database_url=database_url,
        api_keys=keys["entries"],
        ui_secret=SECRET,
        forwarded_allow_ips="10.0.0.0/8",
    )
    tls = {"x-forwarded-proto": "https", "sec-fetch-site": "same-origin"}
    with proxied(settings, database, "10.1.2.3") as trusted:
        answer = sign_in(trusted, keys["read"], **tls)
        assert answer.status_code == 303
        assert "; secure" in answer.headers["set-cookie"].lower()
    with proxied(settings, database, "192.0.2.7") as stranger:
        answer = sign_in(stranger, keys["read"], **tls)
        assert answer.status_code == 303
        assert "secure" not in answer.headers["set-cookie"].lower()


def test_the_form_takes_only_a_small_urlencoded_body(
    keyed_client: TestClient, keys: dict[str, Any]
) -> None:
    as_json = keyed_client.post("/ui/key", json={"key": keys["read"]}, follow_redirects=False)
    assert as_json.status_code == 415
    huge = keyed_client.post("/ui/key", content="key=" + "x" * 10_000, headers=FORM)
    assert huge.status_code == 413
    binary = keyed_client.post("/ui/key", content=b"key=\xff\xfe", headers=FORM)
    assert binary.status_code == 400
    for answer in (as_json, huge, binary):
        assert answer.headers["content-type"].startswith("text/html")


def test_a_session_never_reaches_the_api(keyed_client: TestClient, keys: dict[str, Any]) -> None:
    write = keys["write"]  # a write key's session is a view like any other
    sign_in(keyed_client, write)
    cookie = keyed_client.cookies.get("calibration_ui")
    assert cookie
    headers = {"cookie": f"calibration_ui={cookie}"}
    for method, path in [
        ("GET", "/v1/calibrators"),
        ("POST", "/v1/calibrators/churn/fit"),
        ("DELETE", "/v1/calibrators/churn"),
        ("PUT", "/v1/calibrators/churn/aliases/x"),
    ]:
        answer = keyed_client.request(method, path, headers=headers, json={"version": 1})
        assert answer.status_code == 401, (method, path)
    assert keyed_client.get("/v1/calibrators/churn", headers=headers).status_code == 401
    still = keyed_client.get("/v1/calibrators/churn", headers={"Authorization": f"Bearer {write}"})
    assert still.status_code == 200


def test_signing_out_clears_the_cookie(keyed_client: TestClient, keys: dict[str, Any]) -> None:
    sign_in(keyed_client, keys["read"])
    assert keyed_client.get("/ui", follow_redirects=False).status_code == 200
    out = keyed_client.post("/ui/logout", follow_redirects=False)
    assert out.status_code == 303
    assert out.headers["location"] == "/ui/key"
    assert 'calibration_ui=""' in out.headers["set-cookie"] or "max-age=0" in (
        out.headers["set-cookie"].lower()
    )
    assert keyed_client.get("/ui", follow_redirects=False).status_code == 303


def test_without_a_shared_secret_sign_in_is_refused_on_several_workers(
    database_url: str, database: Database, keys: dict[str, Any]
) -> None:
    settings = Settings(database_url=database_url, api_keys=keys["entries"], workers=2)
    app = create_app(settings, database=database)
    with TestClient(app, raise_server_exceptions=False) as client:
        form = client.get("/ui/key")
        assert form.status_code == 503
        assert "CALIBRATION_UI_SECRET" in form.text
        assert sign_in(client, keys["read"]).status_code == 503


def test_one_worker_on_loopback_signs_with_a_secret_of_its_own(
    database_url: str, database: Database, keys: dict[str, Any]
) -> None:
    settings = Settings(database_url=database_url, api_keys=keys["entries"], workers=1)
    app = create_app(settings, database=database)
    with TestClient(app) as client:
        assert sign_in(client, keys["read"]).status_code == 303
        assert client.get("/ui", follow_redirects=False).status_code == 200


def test_one_worker_on_a_reachable_address_without_a_secret_cannot_sign_in(
    database_url: str, database: Database, keys: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(
        database_url=database_url, api_keys=keys["entries"], host="0.0.0.0", workers=1
    )
    assert settings.ui_sign_in == "off"
    with caplog.at_level(logging.WARNING, logger="app.auth"):
        app = create_app(settings, database=database)
    warnings = [r.getMessage() for r in caplog.records if "CALIBRATION_UI_SECRET" in r.getMessage()]
    assert len(warnings) == 1
    assert "API is unaffected" in warnings[0]
    with TestClient(app, raise_server_exceptions=False) as client:
        form = client.get("/ui/key")
        assert form.status_code == 503
        assert "CALIBRATION_UI_SECRET" in form.text
        assert sign_in(client, keys["read"]).status_code == 503
        api = client.get("/v1/calibrators", headers={"Authorization": f"Bearer {keys['read']}"})
        assert api.status_code == 200  # the API serves as ever


@pytest.mark.parametrize(
    ("overrides", "decision"),
    [
        ({}, "open"),
        ({"auth": "disabled", "ui_secret": SECRET}, "open"),
        ({"keys": True, "ui_secret": SECRET, "workers": 4, "host": "0.0.0.0"}, "shared-secret"),
        ({"keys": True, "workers": 1}, "process-secret"),
        ({"keys": True, "workers": 2}, "off"),
        ({"keys": True, "workers": 1, "host": "10.0.0.1"}, "off"),
    ],
)
def test_settings_decide_how_the_web_view_signs(
    keys: dict[str, Any], overrides: dict[str, Any], decision: str
) -> None:
    values = dict(overrides)
    if values.pop("keys", False):
        values["api_keys"] = keys["entries"]
    assert Settings(**values).ui_sign_in == decision


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ("short", "at least 32 characters"),
        ("a" * 32, "at least 10 different characters"),
        ("abc" * 20, "at least 10 different characters"),
        ("change-me-ui-secret-from-secrets-token-urlsafe", "placeholder"),
    ],
)
def test_a_weak_secret_is_refused(secret: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as refused:
        Settings(ui_secret=secret)
    assert secret not in str(refused.value)  # never echoed into a log


def test_the_env_example_placeholder_is_refused() -> None:
    lines = (Path(__file__).parents[2] / ".env.example").read_text().splitlines()
    (line,) = [line for line in lines if line.startswith("CALIBRATION_UI_SECRET=")]
    with pytest.raises(ValidationError, match="placeholder"):
        Settings(ui_secret=line.partition("=")[2])


def test_a_session_ends_with_its_time_its_key_or_the_secret() -> None:
    key, entry = new_key("viewer", "read")
    configured = parse_entry(entry.entry())
    sessions = Sessions((configured,), SECRET.encode())
    token = sessions.issue(configured, now=1_000_000)
    assert sessions.verify(token, now=1_000_000 + SESSION_SECONDS) == configured
    assert sessions.verify(token, now=1_000_001 + SESSION_SECONDS) is None
    assert sessions.verify(token, now=1_000_000 - 3600) is None
    assert Sessions((configured,), b"another secret" * 3).verify(token, now=1_000_000) is None
    _, rotated = new_key("viewer", "read")  # the same name, a new key
    assert Sessions((rotated,), SECRET.encode()).verify(token, now=1_000_000) is None
    tampered = token.replace("viewer:", "admin:")
    assert sessions.verify(tampered, now=1_000_000) is None
    name, issued, mac = token.split(":")
    superscript = f"{name}:{issued[:-1]}\u00b2:{mac}"  # a digit to isdigit, not to int
    assert sessions.verify(superscript, now=1_000_000) is None
    for spelling in (f"0{issued}", f"+{issued}", f" {issued}"):  # one spelling a time
        assert sessions.verify(f"{name}:{spelling}:{mac}", now=1_000_000) is None
    assert key not in token
    assert entry.digest.hex() not in token


def test_open_mode_needs_no_key(open_client: TestClient) -> None:
    assert open_client.get("/ui", follow_redirects=False).status_code == 200
    form = open_client.get("/ui/key?next=%2Fui%2Fcalibrators%2Fx", follow_redirects=False)
    assert form.status_code == 303
    assert form.headers["location"] == "/ui/calibrators/x"


def test_rotating_or_removing_the_key_or_the_secret_ends_every_session(
    database_url: str, database: Database, keys: dict[str, Any]
) -> None:
    """Signing out deletes the cookie in one browser only: a copy stays valid (stateless,
    see docs/ui.md) until it expires or one of these changes, on every replica."""
    entries = keys["entries"]

    def replica(api_keys: Any, secret: str = SECRET) -> TestClient:
        settings = Settings(database_url=database_url, api_keys=api_keys, ui_secret=secret)
        return TestClient(create_app(settings, database=database), raise_server_exceptions=False)

    def opens(client: TestClient, cookie: str) -> bool:
        headers = {"cookie": f"calibration_ui={cookie}"}
        answer = client.get("/ui", headers=headers, follow_redirects=False)
        return answer.status_code == 200

    with replica(entries) as first:
        sign_in(first, keys["read"])
        cookie = first.cookies.get("calibration_ui")
        assert cookie
        first.post("/ui/logout")
        assert opens(first, cookie)  # a copy of the cookie outlives signing out
    with replica(entries) as other:
        assert opens(other, cookie)  # another replica, the same secret and keys
    _, rotated = new_key("viewer", "read")  # the same name, a new key
    others = {"rotated": (rotated, entries[1]), "removed": (entries[1],)}
    for changed in others.values():
        with replica(changed) as client:
            assert not opens(client, cookie)
    with replica(entries, secret="another-secret-" + SECRET) as client:
        assert not opens(client, cookie)


@pytest.mark.parametrize("uvicorn_style", [False, True])
def test_the_web_view_follows_a_proxy_prefix(
    database_url: str, database: Database, keys: dict[str, Any], uvicorn_style: bool
) -> None:
    # uvicorn --root-path puts the prefix in scope["path"] too; TestClient's root_path does not.
    settings = Settings(database_url=database_url, api_keys=keys["entries"], ui_secret=SECRET)
    app = create_app(settings, database=database)
    at = "/calib" if uvicorn_style else ""
    with TestClient(app, root_path="/calib", raise_server_exceptions=False) as client:
        page = client.get(f"{at}/ui/calibrators/churn", follow_redirects=False)
        assert page.status_code == 303
        assert page.headers["location"] == "/calib/ui/key?next=%2Fui%2Fcalibrators%2Fchurn"
        form = client.get(f"{at}/ui/key?next=%2Fui%2Fcalibrators%2Fchurn")
        assert 'action="/calib/ui/key?next=%2Fui%2Fcalibrators%2Fchurn"' in form.text
        answer = sign_in(client, keys["read"], "/ui/calibrators/churn", at=at)
        assert answer.status_code == 303
        assert answer.headers["location"] == "/calib/ui/calibrators/churn"
        assert "path=/calib/ui;" in answer.headers["set-cookie"].lower()
        out = client.post(f"{at}/ui/logout", follow_redirects=False)
        assert out.headers["location"] == "/calib/ui/key"
        assert "path=/calib/ui;" in out.headers["set-cookie"].lower()
