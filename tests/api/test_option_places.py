"""An error names the place the client put the value: a fit option in the query is reported
at ``query``, in a multipart form at ``form``, in a JSON body at ``body``; and the tag filter
takes whatever a tag may hold."""

from __future__ import annotations

import pytest

from tests.api.helpers import as_csv, assert_problem, sigmoid_batch
from tests.client import TestClient

BASE = "/v1/calibrators/churn"
CSV = {"content-type": "text/csv"}


@pytest.mark.parametrize(
    ("query", "message"),
    [("tags=[1]", "must be a JSON object"), ("tags=nope", "must be a JSON object")],
)
def test_a_bad_option_in_the_query_is_reported_at_query(
    client: TestClient, query: str, message: str
) -> None:
    csv = client.post(f"{BASE}/fit?{query}", content=as_csv(sigmoid_batch()), headers=CSV)
    assert_problem(csv, 422, message)
    assert csv.json()["errors"][0]["loc"] == ["query", "tags"]
    json = client.post(f"{BASE}/fit?{query}", json=sigmoid_batch())
    assert json.json()["errors"][0]["loc"] == ["query", "tags"]


def test_a_bad_option_in_a_form_is_reported_at_form(client: TestClient) -> None:
    files = {"file": ("batch.csv", as_csv(sigmoid_batch()), "text/csv")}
    r = client.post(f"{BASE}/fit", files=files, data={"description": "x" * 10_001})
    assert_problem(r, 422, "the limit is 10000")
    assert r.json()["errors"][0]["loc"] == ["form", "description"]


def test_a_bad_option_in_the_body_is_reported_at_body(client: TestClient) -> None:
    r = client.post(f"{BASE}/fit", json={**sigmoid_batch(), "tags": [1]})
    assert r.json()["errors"][0]["loc"] == ["body", "tags"]


def test_any_tag_a_fit_stores_can_be_filtered_on(client: TestClient) -> None:
    fit = client.post(f"{BASE}/fit", json={**sigmoid_batch(), "tags": {"note": "line\nbreak"}})
    assert fit.status_code == 201, fit.text
    found = client.get("/v1/calibrators", params={"tag": "note:line\nbreak"})
    assert [item["name"] for item in found.json()["items"]] == ["churn"]
    too_long = client.get("/v1/calibrators", params={"tag": "k" * 129 + ":v"})
    assert_problem(too_long, 422, "key has 129 characters; the limit is 128")
    assert too_long.json()["errors"][0]["loc"] == ["query", "tag"]
    assert_problem(client.get("/v1/calibrators", params={"tag": "novalue"}), 422, "key:value")
