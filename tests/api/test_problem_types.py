"""Problem types are ours: every error's ``type`` is ``/problems/{slug}``, a page this service
serves (what the problem means, how to fix it), and the set of slugs is closed."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from app.api import problem_types
from app.api.problem_types import PROBLEM_TYPES
from app.errors import ServiceError
from app.keys import new_key
from app.main import create_app  # imports every module: every ServiceError subclass exists
from app.settings import Settings
from app.store import Database
from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch

KEY, ENTRY = new_key("admin", "write")
AUTH = {"Authorization": f"Bearer {KEY}"}
FIT = "/v1/calibrators/churn/fit"
BELOW_THE_APPLICATION = {
    problem_types.UNKNOWN_ROUTE,
    problem_types.METHOD_NOT_ALLOWED,
    problem_types.LARGE_HEADERS,
    problem_types.MALFORMED_REQUEST,
    problem_types.HTTP_ERROR,
}


def every_service_error() -> list[type[ServiceError]]:
    """ServiceError and all its subclasses, however deep."""
    found, pending = [], [ServiceError]
    while pending:
        error = pending.pop()
        found.append(error)
        pending.extend(error.__subclasses__())
    return found


@pytest.fixture
def backend() -> str:
    """Error rendering does not depend on the database: SQLite is enough."""
    return "sqlite"


@pytest.fixture
def secured(database_url: str, database: Database) -> Iterator[TestClient]:
    """An app behind a key, with a 4 KiB body limit."""
    settings = Settings(database_url=database_url, api_keys=ENTRY.entry(), max_body_bytes=4096)
    with TestClient(create_app(settings, database=database), raise_server_exceptions=False) as c:
        yield c


def test_every_service_error_has_its_own_type_and_the_set_is_closed() -> None:
    errors = every_service_error()
    slugs = [error.slug for error in errors]
    assert len(set(slugs)) == len(errors), "two errors share a slug"
    for error in errors:
        page = PROBLEM_TYPES[error.slug]
        assert (page.title, page.statuses) == (error.title, (error.status,)), error
    assert PROBLEM_TYPES.keys() == set(slugs) | BELOW_THE_APPLICATION
    for slug in PROBLEM_TYPES:
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", slug), slug


def test_every_problem_type_has_a_plain_html_page(secured: TestClient) -> None:
    index = secured.get("/problems")
    assert index.status_code == 200
    assert index.headers["content-type"].startswith("text/html")
    for slug, problem in PROBLEM_TYPES.items():
        assert f'href="/problems/{slug}"' in index.text
        page = secured.get(f"/problems/{slug}")  # no key: the pages are open
        assert page.status_code == 200, slug
        assert page.headers["content-type"].startswith("text/html")
        assert f"<h1>{problem.title}</h1>" in page.text
        assert "What it means" in page.text
        assert "How to fix it" in page.text
        assert "<script" not in page.text
        assert not re.search(r"https?://", page.text), slug  # nothing loads from elsewhere


def test_an_unknown_problem_type_is_a_404_problem(secured: TestClient) -> None:
    body = assert_problem(secured.get("/problems/no-such-thing"), 404, "no-such-thing")
    assert body["type"] == "/problems/not-found"


def resolves(client: TestClient, body: dict[str, object], slug: str) -> None:
    """The problem's ``type`` is ``slug``'s page, and that page answers."""
    assert body["type"] == f"/problems/{slug}"
    page = client.get(str(body["type"]))
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")


def test_real_error_answers_point_to_their_page(secured: TestClient) -> None:
    no_key = assert_problem(secured.get("/v1/calibrators"), 401)
    resolves(secured, no_key, "unauthorized")
    assert no_key["title"] == "Unauthorized"

    bad_body = assert_problem(secured.post(FIT, json={"scores": [1.0]}, headers=AUTH), 422)
    resolves(secured, bad_body, "invalid-input")
    assert bad_body["title"] == "Invalid input"
    assert bad_body["errors"]

    unknown = assert_problem(secured.get("/v1/calibrators/nope", headers=AUTH), 404, "nope")
    resolves(secured, unknown, "not-found")

    too_large = assert_problem(secured.post(FIT, json=sigmoid_batch(400), headers=AUTH), 413)
    resolves(secured, too_large, "payload-too-large")

    xml = {**AUTH, "content-type": "application/xml"}
    media = assert_problem(secured.post(FIT, content=b"<x/>", headers=xml), 415)
    resolves(secured, media, "unsupported-media-type")

    not_json = {**AUTH, "content-type": "application/json"}
    malformed = assert_problem(secured.post(FIT, content=b"{no", headers=not_json), 400)
    resolves(secured, malformed, "malformed-body")

    route = assert_problem(secured.get("/v1/no/such/route", headers=AUTH), 404)
    resolves(secured, route, "unknown-route")
    assert route["title"] == "Not Found"

    method = assert_problem(secured.put(FIT, json={}, headers=AUTH), 405)
    resolves(secured, method, "method-not-allowed")


@pytest.mark.parametrize("uvicorn_style", [False, True])
def test_problem_types_follow_a_proxy_prefix(secured: TestClient, uvicorn_style: bool) -> None:
    # uvicorn --root-path puts the prefix in scope["path"] too; TestClient's root_path does not.
    at = "/calib" if uvicorn_style else ""
    client = TestClient(secured.app, root_path="/calib", raise_server_exceptions=False)
    answers = {
        "unauthorized": client.get(f"{at}/v1/calibrators"),
        "unknown-route": client.get(f"{at}/v1/no/such/route", headers=AUTH),
        "invalid-input": client.post(f"{at}{FIT}", json={"scores": [1.0]}, headers=AUTH),
        "not-found": client.get(f"{at}/v1/calibrators/nope", headers=AUTH),
    }
    for slug, answer in answers.items():
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert answer.json()["type"] == f"/calib/problems/{slug}", answer.text
    assert client.get(f"{at}/problems/not-found").status_code == 200  # open below it too
