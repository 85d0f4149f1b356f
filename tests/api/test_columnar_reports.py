"""POST diagnostics and compare take a batch as a fit does: Parquet, an Arrow stream, a
multipart upload, CSV, each answering exactly what the same rows answer in JSON, with the
report's options from the query or the form, and the fit's errors for bad files.

Neither stores anything (nor do the fits below, all refused), so the tests share one app per
backend with the versions fitted once (``versioned``), and the answer in JSON that the five
ways of sending a file are compared with is asked once (``in_json``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from httpx import Response

from tests.client import TestClient
from tests.conftest import unchanged

from .helpers import FEW_RESAMPLES, assert_problem, sigmoid_batch
from .test_columnar_batches import ARROW, ENCODINGS, PARQUET, arrow, parquet, table_of
from .test_multiclass import logits_batch

BASE = "/v1/calibrators/churn"
DIAGNOSTICS = f"{BASE}/versions/latest/diagnostics"
COMPARE = f"{BASE}/compare"
MULTICLASS_BASE = "/v1/calibrators/digits"
HOWS = ["parquet", "arrow", "parquet upload", "csv", "csv upload"]
"""The ways a batch can be sent besides JSON: the options go in the query, or for an upload
in its form."""


def csv_of(table: pa.Table) -> bytes:
    """The table as CSV, each number written as Python reads it back (exactly)."""
    columns = [table.column(name).to_pylist() for name in table.column_names]
    lines = [",".join(table.column_names)]
    lines += [",".join(str(value) for value in row) for row in zip(*columns, strict=True)]
    return ("\n".join(lines) + "\n").encode()


def send(
    client: TestClient,
    url: str,
    table: pa.Table,
    how: str,
    options: dict[str, Any],
    query: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """POST ``table`` to ``url`` as ``how`` (one of :data:`HOWS`), with ``options`` in the
    query string, or in the form for an upload; ``query`` goes in the query string always."""
    texts = {
        key: [str(v) for v in value] if isinstance(value, list) else str(value)
        for key, value in options.items()
    }
    if how.endswith("upload"):
        name = "batch.parquet" if how == "parquet upload" else "batch.csv"
        data = parquet(table) if how == "parquet upload" else csv_of(table)
        files = {"file": (name, data, "application/octet-stream")}
        return client.post(url, params=query, files=files, data=texts, headers=headers)
    media_type, encode = {
        "parquet": (PARQUET, parquet),
        "arrow": (ARROW, arrow),
        "csv": ("text/csv", csv_of),
    }[how]
    return client.post(
        url,
        params={**(query or {}), **texts},
        content=encode(table),
        headers={"content-type": media_type, **(headers or {})},
    )


def fresh_batch(multiclass: bool, seed: int = 9) -> tuple[dict[str, Any], list[float]]:
    """A labelled batch the versions were not fitted on, and weights for it."""
    batch = logits_batch(500, seed=seed) if multiclass else sigmoid_batch(700, seed=seed)
    weights = np.random.default_rng(seed).uniform(0.2, 3.0, len(batch["labels"])).round(3)
    return batch, weights.tolist()


def fit_versions(client: TestClient, multiclass: bool) -> None:
    """v1..v3 on other batches (two methods, one fitted to flipped labels), with
    ``production`` -> 2: of ``churn`` (binary) or ``digits`` (3 classes)."""
    base = MULTICLASS_BASE if multiclass else BASE
    batch = logits_batch(400, seed=1) if multiclass else sigmoid_batch(600, seed=1)
    methods = ["temperature", "platt"] if multiclass else ["platt", "isotonic"]
    flipped = {**batch, "labels": [(y + 1) % (3 if multiclass else 2) for y in batch["labels"]]}
    for body in ({**batch, "method": methods[0]}, {**batch, "method": methods[1]}, flipped):
        assert client.post(f"{base}/fit", json=body).status_code == 201
    assert client.put(f"{base}/aliases/production", json={"version": 2}).status_code == 200


@pytest.fixture(scope="module")
def versioned(shared_app: TestClient) -> Iterator[TestClient]:
    """The app the module's tests share: :func:`fit_versions`' ``churn`` and ``digits``."""
    fit_versions(shared_app, multiclass=False)
    fit_versions(shared_app, multiclass=True)
    with unchanged(shared_app):
        yield shared_app


Ask = Callable[[str, dict[str, Any], dict[str, Any] | None], Any]


@pytest.fixture(scope="module")
def in_json(versioned: TestClient) -> Ask:
    """``ask(url, body, query)``: the JSON document ``versioned`` answers to ``body`` posted
    as JSON, asked once per module (the parametrizations by way of sending compare with
    the same one)."""
    answers: dict[str, Any] = {}

    def ask(url: str, body: dict[str, Any], query: dict[str, Any] | None) -> Any:
        key = json.dumps([url, body, query], sort_keys=True)
        if key not in answers:
            answer = versioned.post(url, params=query, json=body)
            assert answer.status_code == 200, answer.text
            answers[key] = answer.json()
        return answers[key]

    return ask


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("multiclass", [False, True])
def test_diagnostics_of_a_file_equal_those_of_its_rows_in_json(
    versioned: TestClient, in_json: Ask, how: str, multiclass: bool
) -> None:
    url = f"{MULTICLASS_BASE if multiclass else BASE}/versions/latest/diagnostics"
    batch, weights = fresh_batch(multiclass)
    options: dict[str, Any] = {"n_bins": 7, "strategy": "quantile", "bootstrap": FEW_RESAMPLES}
    if multiclass:
        options["class_index"] = 1
    as_json = in_json(url, {**batch, "sample_weight": weights, **options}, None)
    r = send(versioned, url, table_of(batch, weights), how, options)
    assert r.status_code == 200, r.text
    assert r.json() == as_json
    assert (r.json()["n_bins"], r.json()["strategy"]) == (7, "quantile")  # not the defaults


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("multiclass", [False, True])
def test_a_comparison_of_a_file_equals_that_of_its_rows_in_json(
    versioned: TestClient, in_json: Ask, how: str, multiclass: bool
) -> None:
    url = f"{MULTICLASS_BASE if multiclass else BASE}/compare"
    batch, weights = fresh_batch(multiclass)
    by = {"by": "brier"}
    options: dict[str, Any] = {"versions": [3, "production"], "bootstrap": FEW_RESAMPLES}
    as_json = in_json(url, {**batch, "sample_weight": weights, **options}, by)
    r = send(versioned, url, table_of(batch, weights), how, options, query=by)
    assert r.status_code == 200, r.text
    assert r.json() == as_json
    assert [v["version"] for v in r.json()["versions"]] == [2, 3]  # the flipped one last


def test_every_version_is_compared_when_none_is_named(versioned: TestClient) -> None:
    batch, _ = fresh_batch(multiclass=False)
    few = {"bootstrap": FEW_RESAMPLES}
    as_json = versioned.post(COMPARE, json={**batch, **few}).json()
    r = send(versioned, COMPARE, table_of(batch), "arrow", few)
    assert r.json() == as_json
    assert sorted(v["version"] for v in as_json["versions"]) == [1, 2, 3]


def test_the_body_s_own_field_wins_then_the_form_then_the_query(versioned: TestClient) -> None:
    batch, _ = fresh_batch(multiclass=False)
    in_query = {"n_bins": 8, "bootstrap": FEW_RESAMPLES}
    answer = versioned.post(DIAGNOSTICS, params=in_query, json={**batch, "n_bins": 5}).json()
    assert answer["n_bins"] == 5
    assert versioned.post(DIAGNOSTICS, params=in_query, json=batch).json()["n_bins"] == 8
    upload = send(
        versioned, DIAGNOSTICS, table_of(batch), "parquet upload", {"n_bins": 5}, in_query
    )
    assert upload.json()["n_bins"] == 5
    upload = send(versioned, DIAGNOSTICS, table_of(batch), "parquet upload", {}, in_query)
    assert upload.json()["n_bins"] == 8
    queried_versions = {"versions": [1, 2], "bootstrap": FEW_RESAMPLES}
    named = versioned.post(COMPARE, params=queried_versions, json={**batch, "versions": [3]})
    assert [v["version"] for v in named.json()["versions"]] == [3]
    queried = versioned.post(COMPARE, params=queried_versions, json=batch)
    assert sorted(v["version"] for v in queried.json()["versions"]) == [1, 2]


def test_one_class_alone_is_judged(versioned: TestClient) -> None:
    batch = sigmoid_batch(200, seed=4)
    negatives = {"scores": batch["scores"], "labels": [0] * 200}
    few = {"bootstrap": FEW_RESAMPLES}
    for url in (DIAGNOSTICS, COMPARE):
        as_json = versioned.post(url, json={**negatives, **few})
        assert as_json.status_code == 200, as_json.text
        assert send(versioned, url, table_of(negatives), "parquet", few).json() == as_json.json()


def test_a_picture_of_a_parquet_batch_is_the_picture_of_its_rows(versioned: TestClient) -> None:
    batch, weights = fresh_batch(multiclass=False)
    png = {"accept": "image/png"}
    as_json = versioned.post(
        DIAGNOSTICS, json={**batch, "sample_weight": weights, "n_bins": 6}, headers=png
    )
    assert as_json.headers["content-type"] == "image/png"
    r = send(
        versioned, DIAGNOSTICS, table_of(batch, weights), "parquet", {"n_bins": 6}, headers=png
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/png"
    assert r.content == as_json.content
    default = send(versioned, DIAGNOSTICS, table_of(batch, weights), "parquet", {}, headers=png)
    assert default.content != as_json.content  # n_bins=6 was drawn, not the default


def problem(response: Response) -> dict[str, Any]:
    document: dict[str, Any] = response.json()
    assert response.headers["content-type"].startswith("application/problem+json")
    return document


@pytest.mark.parametrize("url", [DIAGNOSTICS, COMPARE])
def test_an_upload_names_the_file_and_the_row(versioned: TestClient, url: str) -> None:
    table = pa.table({"score": [0.1, 0.2, None], "label": [0, 1, 0]})
    r = send(versioned, url, table, "parquet upload", {})
    assert_problem(r, 422, "file", "row[3].score", "null")
    fit = send(versioned, "/v1/calibrators/other/fit", table, "parquet upload", {})
    assert problem(r) == problem(fit)


@pytest.mark.parametrize("url", [DIAGNOSTICS, COMPARE])
@pytest.mark.parametrize("media_type", [PARQUET, ARROW])
def test_bytes_that_are_no_file_are_malformed(
    versioned: TestClient, url: str, media_type: str
) -> None:
    headers = {"content-type": media_type}
    r = versioned.post(url, content=b"score,label\n0.1,0\n", headers=headers)
    assert_problem(r, 400, "not")
    fit = versioned.post(f"{BASE}/fit", content=b"score,label\n0.1,0\n", headers=headers)
    assert problem(r) == problem(fit)


@pytest.mark.parametrize("url", [DIAGNOSTICS, COMPARE])
@pytest.mark.parametrize(("media_type", "encode"), ENCODINGS)
def test_rows_past_the_limit_are_413(
    versioned: TestClient,
    url: str,
    media_type: str,
    encode: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(versioned.app.state.service.settings, "max_batch_rows", 250)  # type: ignore[attr-defined]
    body = encode(table_of(sigmoid_batch(300, seed=7)))
    r = versioned.post(url, content=body, headers={"content-type": media_type})
    assert_problem(r, 413, "250")


def test_bad_options_are_reported_where_they_were_given(versioned: TestClient) -> None:
    table = table_of(sigmoid_batch(100, seed=5))
    r = send(versioned, DIAGNOSTICS, table, "parquet", {"n_bins": 1})
    assert_problem(r, 422, "n_bins")
    assert r.json()["errors"][0]["loc"] == ["query", "n_bins"]
    r = send(versioned, DIAGNOSTICS, table, "parquet upload", {"n_bins": "many"})
    assert_problem(r, 422, "form.n_bins must be an integer")
    r = send(versioned, DIAGNOSTICS, table, "parquet upload", {"strategy": "random"})
    assert r.json()["errors"][0]["loc"] == ["form", "strategy"]
    r = send(versioned, COMPARE, table, "parquet upload", {"versions": ["1", ""]})
    assert r.json()["errors"][0]["loc"] == ["form", "versions", 1]
    r = send(versioned, COMPARE, table, "parquet", {"versions": [str(v) for v in range(51)]})
    assert_problem(r, 422, "versions has 51 entries; the limit is 50")
    assert r.json()["errors"][0]["loc"] == ["query", "versions"]
    assert_problem(send(versioned, COMPARE, table, "arrow", {"versions": ["9"]}), 404, "9")
    xml = versioned.post(COMPARE, content=b"<batch/>", headers={"content-type": "application/xml"})
    assert_problem(xml, 415, "application/xml")
