"""Every bad input of docs/api.md, Fitting, and more: a clear 4xx, and nothing stored."""

from __future__ import annotations

from typing import Any

import pytest

from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch

FIT = "/v1/calibrators/churn/fit"
CSV_TYPE = {"content-type": "text/csv"}
GOOD = {"scores": [0.1, 0.4, 0.35, 0.8], "labels": [0, 0, 1, 1]}


def nothing_stored(client: TestClient) -> None:
    listing = client.get("/v1/calibrators").json()
    assert listing == {"items": [], "total": 0}
    assert client.get("/v1/calibrators/churn").status_code == 404


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        ({"scores": [0.1, 0.2, 0.3], "labels": [0, 1]}, ["labels", "has 2 values", "3"]),
        ({"scores": [], "labels": []}, ["scores", "empty"]),
        ({"scores": [0.1, None, 0.3], "labels": [0, 1, 1]}, ["scores[1]", "null"]),
        ({"scores": [0.1, 0.2, "x"], "labels": [0, 1, 1]}, ["scores[2]", "string"]),
        (b'{"scores": [0.1, 0.2, 1e999], "labels": [0, 1, 1]}', ["scores[2]", "infinite"]),
        ({"scores": [0.1, 0.2, 0.3], "labels": [0, 2, 1]}, ["labels[1]", "is 2"]),
        ({"scores": [0.1, 0.2, 0.3], "labels": [0, 0.5, 1]}, ["labels[1]", "0.5"]),
        ({"scores": [0.1, 0.2, 0.3], "labels": [1, 1, 1]}, ["labels", "single class", "both"]),
        (
            {"scores": [[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]], "labels": [2, 2], "method": "bostrom"},
            ["labels", "single class (2)", "at least two classes"],
        ),
        (
            {**GOOD, "sample_weight": [1, -1, 1, 1]},
            ["sample_weight[1]", ">= 0"],
        ),
        ({**GOOD, "sample_weight": [0, 0, 0, 0]}, ["sample_weight", "all zero"]),
        ({**GOOD, "sample_weight": [1, 1]}, ["sample_weight", "has 2 values"]),
        (
            {
                "scores": [[0.1, 0.8, 0.1], [0.7, 0.2, 0.1], [0.3, 0.3, 0.4]],
                "labels": [1, 0, 2],
                "method": "logistic_correction",
            },
            ["scores", "matrix", "binary"],
        ),
        (
            {"scores": [[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]], "labels": [1, 0, 1]},
            ["scores", "n x 2", "three columns", "vector"],
        ),
        ({**GOOD, "method": "magic"}, ["method", "magic", "platt"]),
        ({**GOOD, "method": "platt", "params": {"speed": 11}}, ["params.speed", "unknown"]),
        ({**GOOD, "method": "platt", "params": {"targets": "soft"}}, ["params.targets"]),
        ({**GOOD, "method": "isotonic", "params": {"interpolation": "cubic"}}, ["interpolation"]),
        ({**GOOD, "colour": "red"}, ["colour", "not a known field"]),
        ({**GOOD, "tags": {"team": 3}}, ["tags.team", "string"]),
        ({"labels": [0, 1]}, ["scores", "required"]),
        ({"scores": 0.5, "labels": [0, 1]}, ["scores", "must be an array"]),
        ({"scores": [[0.1, 0.9], [0.2]], "labels": [0, 1]}, ["scores[1]", "ragged"]),
    ],
)
def test_invalid_batches_are_422_naming_field_and_index(
    client: TestClient, body: dict[str, Any] | bytes, fragments: list[str]
) -> None:
    if isinstance(body, bytes):
        response = client.post(FIT, content=body, headers={"content-type": "application/json"})
    else:
        response = client.post(FIT, json=body)
    problem = assert_problem(response, 422, *fragments)
    assert problem["errors"], problem
    nothing_stored(client)


def test_nan_literals_in_json_and_csv_are_named(client: TestClient) -> None:
    response = client.post(
        FIT,
        content=b'{"scores": [0.1, 0.4, 0.3], "labels": [0, 1, 1], "sample_weight": [1, NaN, 1]}',
        headers={"content-type": "application/json"},
    )
    # NaN is not JSON, but Python's json.dumps writes it: it is read and named.
    assert_problem(response, 422, "sample_weight[1]")
    csv = "score,label\n0.1,0\n0.2,1\nnan,1\n"
    response = client.post(FIT, content=csv, headers={"content-type": "text/csv"})
    assert_problem(response, 422, "scores[2]", "NaN")
    nothing_stored(client)


@pytest.mark.parametrize("name", ["-churn", "a" * 129, "bad name", "ünï", ".hidden"])
def test_bad_calibrator_names_are_422(client: TestClient, name: str) -> None:
    response = client.post(f"/v1/calibrators/{name}/fit", json=GOOD)
    assert_problem(response, 422, "name")
    nothing_stored(client)


def test_malformed_json_is_400(client: TestClient) -> None:
    response = client.post(FIT, content=b"{not json", headers={"content-type": "application/json"})
    assert_problem(response, 400, "JSON")
    response = client.post(FIT, content=b"[1, 2]", headers={"content-type": "application/json"})
    assert_problem(response, 400, "object")
    nothing_stored(client)


def test_unsupported_media_type_is_415(client: TestClient) -> None:
    response = client.post(FIT, content=b"<x/>", headers={"content-type": "application/xml"})
    assert_problem(response, 415, "application/xml")
    nothing_stored(client)


def test_bad_csv_names_row_and_column(client: TestClient) -> None:
    csv = "score,label\n0.1,0\n0.7,one\n"
    response = client.post(FIT, content=csv, headers={"content-type": "text/csv"})
    assert_problem(response, 422, "row[2]", "label", "'one'")
    response = client.post(FIT, files={"nope": ("a.csv", "score,label\n", "text/csv")})
    assert_problem(response, 422, "file")
    response = client.post(
        f"{FIT}?params=notjson",
        content="score,label\n0.1,0\n0.9,1\n",
        headers={"content-type": "text/csv"},
    )
    assert_problem(response, 422, "params")
    nothing_stored(client)


def test_unknown_version_calibrator_and_route_are_404(client: TestClient) -> None:
    assert client.post(FIT, json={**sigmoid_batch(50), "method": "platt"}).status_code == 201
    assert_problem(client.get("/v1/calibrators/churn/versions/2"), 404, "2")
    assert_problem(client.get("/v1/calibrators/nope/versions/latest"), 404, "nope")
    assert_problem(client.get("/v1/calibrators/churn/versions/production"), 404, "production")
    assert_problem(client.get("/v1/no/such/route"), 404, "/v1/no/such/route")
    assert_problem(client.post("/v1/calibrators/nope/predict", json={"scores": [1]}), 404, "nope")
    assert_problem(client.delete("/v1/calibrators/churn/versions/9"), 404, "9")
    assert_problem(client.put("/v1/calibrators/churn/fit", json={}), 405, "PUT")


def test_query_validation_errors_are_problem_json(client: TestClient) -> None:
    assert client.post(FIT, json={**sigmoid_batch(50), "method": "platt"}).status_code == 201
    base = "/v1/calibrators/churn/versions/1/diagnostics"
    assert_problem(client.get(f"{base}?n_bins=1"), 422, "n_bins")
    assert_problem(client.get(f"{base}?n_bins=101"), 422, "n_bins")
    assert_problem(client.get(f"{base}?strategy=log"), 422, "strategy")
    assert_problem(client.get("/v1/calibrators?limit=0"), 422, "limit")
    assert_problem(client.get("/v1/calibrators?offset=-1"), 422, "offset")


def test_request_id_is_echoed_and_generated(client: TestClient) -> None:
    r = client.get("/healthz", headers={"x-request-id": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    r = client.get("/v1/nothing")
    assert len(r.headers["x-request-id"]) == 32


def test_csv_that_python_refuses_to_read_is_a_422_naming_the_place(client: TestClient) -> None:
    # a header column of 5000 digits (past Python's int-conversion limit), and fields past the
    # csv module's 131,072 characters, in the header and in a row, as a body and as an upload
    long_index = "score_" + "1" * 5000
    assert_problem(
        client.post(FIT, content=f"{long_index},label\n0.1,0\n", headers=CSV_TYPE),
        422,
        "header[0]",
        "unknown column",
    )
    huge = '"' + "9" * 140_000 + '"'
    cases = ((f"score,label{huge}\n0.1,0\n", "header"), (f"score,label\n{huge},0\n", "row[1]"))
    for body, place in cases:
        assert_problem(
            client.post(FIT, content=body, headers=CSV_TYPE), 422, place, "cannot be read as CSV"
        )
        upload = client.post(FIT, files={"file": ("a.csv", body, "text/csv")})
        assert_problem(upload, 422, place, "cannot be read as CSV")
    nothing_stored(client)


def test_quoted_csv_numbers_are_read(client: TestClient) -> None:
    quoted = 'score,label\n"-1.5","0"\n"0.25",1\n2.0,"1"\n-0.5,0\n'
    plain = "score,label\n-1.5,0\n0.25,1\n2.0,1\n-0.5,0\n"
    fits = [
        client.post(f"{FIT}?method=platt", content=body, headers=CSV_TYPE)
        for body in (quoted, plain)
    ]
    assert [r.status_code for r in fits] == [201, 201]
    assert fits[0].json()["fitted"] == fits[1].json()["fitted"]
