"""A version is named one way wherever it is named: an empty selector is refused in the query
as in the body, and a number no version can have is a 404 in a path, a body or a selector."""

from __future__ import annotations

import pytest

from tests.api.helpers import assert_problem
from tests.client import TestClient

BASE = "/v1/calibrators/churn"


@pytest.mark.parametrize("query", ["?version=", "?version=&intervals=false"])  # hot path, route
def test_an_empty_version_in_the_query_is_refused_as_in_the_body(
    fitted: TestClient, query: str
) -> None:
    in_query = fitted.post(f"{BASE}/predict{query}", json={"scores": [0.5]})
    problem = assert_problem(in_query, 422, "must be a version number, 'latest' or an alias")
    assert problem["errors"][0]["loc"] == ["query", "version"]
    in_body = fitted.post(f"{BASE}/predict", json={"scores": [0.5], "version": ""})
    problem = assert_problem(in_body, 422, "must be a version number, 'latest' or an alias")
    assert problem["errors"][0]["loc"] == ["body", "version"]


@pytest.mark.parametrize("number", [2**31, 2**62 + 1, 10**30])
def test_a_version_number_past_the_store_is_not_found_wherever_it_is_named(
    fitted: TestClient, number: int
) -> None:
    assert_problem(fitted.delete(f"{BASE}/versions/{number}"), 404, f"no version {number}")
    assert_problem(fitted.post(f"{BASE}/predict?version={number}", json={"scores": [0.5]}), 404)
    if number < 2**63:  # beyond, a JSON number is read as a float: no longer a whole number
        put = fitted.put(f"{BASE}/aliases/production", json={"version": number})
        assert_problem(put, 404, f"no version {number}")
