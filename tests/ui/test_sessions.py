"""The web view with API keys: the key form, the session cookie, and what it never opens."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from app.auth import parse_entry
from app.keys import new_key
from app.main import create_app
from app.settings import Settings
from app.store import Database
from app.ui.session import SESSION_SECONDS, Sessions, cookie_value, safe_next

from .conftest import SECRET

FORM = {"content-type": "application/x-www-form-urlencoded"}


def sign_in(client: TestClient, key: str, next_path: str = "/ui", **headers: str) -> Any:
    return client.post(
        f"/ui/key?next={quote(next_path, safe='')}",
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
    value = cookie_value(cookie.split(";")[0], "calibration_ui")
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


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 32 characters"):
        Settings(ui_secret="short")


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
    assert key not in token
    assert entry.digest.hex() not in token


def test_open_mode_needs_no_key(open_client: TestClient) -> None:
    assert open_client.get("/ui", follow_redirects=False).status_code == 200
    form = open_client.get("/ui/key?next=%2Fui%2Fcalibrators%2Fx", follow_redirects=False)
    assert form.status_code == 303
    assert form.headers["location"] == "/ui/calibrators/x"
