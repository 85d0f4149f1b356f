"""CSV errors that teach (issue 29): a header a route does not take is answered with the header
it expects and the one it found; a frame written without its header, or with its pandas
index, is named as such; ``True``/``False`` labels are read as JSON's booleans are, on every
route that takes labels as CSV (fit, diagnostics, compare, outcomes)."""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.api.bodies.column_names import BATCH_COLUMNS, found
from tests.client import TestClient

from .helpers import FEW_RESAMPLES, as_csv, assert_problem, sigmoid_batch
from .test_traffic import logged

BASE = "/v1/calibrators/churn"
FIT = f"{BASE}/fit?method=platt"
CSV = {"content-type": "text/csv"}
BATCH_HEADER = f"expected the header {BATCH_COLUMNS}"
JUDGES = (f"{BASE}/versions/1/diagnostics?bootstrap={FEW_RESAMPLES}", f"{BASE}/compare")
"""The routes that judge stored versions on a posted batch (``fitted`` has churn v1)."""


def frame(n: int = 200, seed: int = 3) -> pd.DataFrame:
    """A batch as a data scientist holds it: boolean labels, the default RangeIndex."""
    batch = sigmoid_batch(n, seed=seed)
    return pd.DataFrame({"score": batch["scores"], "label": [y == 1 for y in batch["labels"]]})


def post_csv(client: TestClient, url: str, body: str, upload: bool) -> Any:
    if upload:
        return client.post(url, files={"file": ("batch.csv", body.encode(), "text/csv")})
    return client.post(url, content=body.encode(), headers=CSV)


def header_error(response: Any, loc: list[Any], *fragments: str) -> dict[str, Any]:
    """The 422 of a header: located at ``loc``, its detail holding each fragment."""
    body = assert_problem(response, 422, *fragments)
    assert [error["loc"] for error in body["errors"]] == [loc], body
    return body


def nothing_stored(client: TestClient) -> None:
    assert client.get("/v1/calibrators").json() == {"items": [], "total": 0}


# -- headers ---------------------------------------------------------------------------------
HEADERS = [
    ("prob,y\n0.1,0\n0.9,1\n", [0], "header[0] is the unknown column 'prob'", "found 'prob,y'"),
    ("0.1,0\n0.9,1\n", [], "header is missing: the first row holds numbers", "found '0.1,0'"),
    ("0.1,True\n0.9,False\n", [], "header is missing", "found '0.1,True'"),
    ("score,weight\n0.1,1\n", [], "header has no 'label' column", "found 'score,weight'"),
    ("label,weight\n0,1\n", [], "header has no 'score' column", "found 'label,weight'"),
    ("score,label,label\n0.1,0,0\n", [], "header repeats a column name", "found 'score,label"),
    (
        "score_0,score_2,label\n0.1,0.9,0\n",
        [],
        "header multiclass columns must be",
        "found 'score_0,score_2",
    ),
    (",score,label\n0,0.1,0\n", [0], "header[0] is unnamed: the column looks like a pandas", ""),
    ("Unnamed: 0,score,label\n0,0.1,0\n", [0], "header[0] is named 'Unnamed: 0'", ""),
]


@pytest.mark.parametrize("upload", [False, True], ids=["body", "upload"])
@pytest.mark.parametrize(("body", "at", "why", "seen"), HEADERS)
def test_a_header_fit_does_not_take_says_what_it_expects_and_found(
    client: TestClient, body: str, at: list[int], why: str, seen: str, upload: bool
) -> None:
    field = "file" if upload else "body"
    place = "file." if upload else ""
    r = post_csv(client, FIT, body, upload)
    header_error(r, ["body", field, "header", *at], f"{place}{why}", BATCH_HEADER, seen)
    nothing_stored(client)


def test_every_batch_route_teaches_the_same_header(fitted: TestClient) -> None:
    for url in (FIT, *JUDGES):
        r = post_csv(fitted, url, "prob,y\n0.1,0\n0.9,1\n", upload=False)
        header_error(r, ["body", "body", "header", 0], "unknown column 'prob'", BATCH_HEADER)
    assert fitted.get(f"{BASE}/versions/2").status_code == 404


def test_what_was_found_is_cut_short() -> None:
    many = ["score", "label", "weight", "a", "b", "c", "d", "e"]
    assert found(many) == "'score,label,weight,a,b,c,...'"
    long = found(["x" * 200, "label"])
    assert long == repr("x" * 80 + "...")


def test_an_empty_csv_says_which_header_it_expects(client: TestClient) -> None:
    assert_problem(client.post(FIT, content=b"", headers=CSV), 422, "is empty", BATCH_HEADER)
    nothing_stored(client)


# -- pandas -----------------------------------------------------------------------------------
def test_pandas_to_csv_with_its_index_is_named_and_without_it_fits(client: TestClient) -> None:
    df = frame()
    r = post_csv(client, FIT, df.to_csv(), upload=True)
    body = header_error(r, ["body", "file", "header", 0], "pandas index", "index=False")
    assert "found ',score,label'" in body["detail"]
    nothing_stored(client)
    r = post_csv(client, FIT, df.to_csv(index=False), upload=True)
    assert r.status_code == 201, r.text
    as_json = client.post(FIT, json={"scores": df.score.tolist(), "labels": df.label.tolist()})
    assert r.json()["fitted"] == as_json.json()["fitted"]


def test_a_pandas_index_in_parquet_is_named_too(client: TestClient) -> None:
    # A frame that was filtered keeps an index that is not 0..n-1: pyarrow stores it as a column
    df = frame(300)
    kept = df[df.score > -3]
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(kept), buffer)
    r = client.post(
        FIT, content=buffer.getvalue(), headers={"content-type": "application/vnd.apache.parquet"}
    )
    detail = header_error(r, ["body", "body", "header", 2], "pandas index")["detail"]
    assert "'__index_level_0__'" in detail
    assert "expected the columns" in detail
    nothing_stored(client)


# -- booleans ---------------------------------------------------------------------------------
def boolean_csv(df: pd.DataFrame, spelling: tuple[str, str] = ("True", "False")) -> str:
    rows = (
        f"{s!r},{spelling[0] if y else spelling[1]}"
        for s, y in zip(df.score, df.label, strict=True)
    )
    return "score,label\n" + "\n".join(rows) + "\n"


@pytest.mark.parametrize("spelling", [("True", "False"), ("true", "false"), ("TRUE", "FALSE")])
def test_boolean_labels_fit_as_json_booleans_do(client: TestClient, spelling: Any) -> None:
    df = frame()
    as_json = client.post(
        f"{BASE}/fit?method=platt",
        json={"scores": df.score.tolist(), "labels": df.label.tolist()},
    )
    r = post_csv(client, FIT, boolean_csv(df, spelling), upload=False)
    assert r.status_code == 201, r.text
    assert r.json()["fitted"] == as_json.json()["fitted"]


def test_boolean_labels_and_weights_read_off_every_piece(client: TestClient) -> None:
    # Quoted cells go through the csv module; plain ones through np.loadtxt: both read booleans
    df = frame()
    weights = [i % 3 != 0 for i in range(len(df))]
    plain = "score,label,weight\n" + "".join(
        f"{s!r},{y},{w}\n" for s, y, w in zip(df.score, df.label, weights, strict=True)
    )
    quoted = "score,label,weight\n" + "".join(
        f'"{s!r}","{y}",{w}\n' for s, y, w in zip(df.score, df.label, weights, strict=True)
    )
    numbers = as_csv(
        {"scores": df.score.tolist(), "labels": df.label.astype(int).tolist()},
        [float(w) for w in weights],
    )
    fits = [post_csv(client, FIT, body, upload=False) for body in (plain, quoted, numbers)]
    assert [r.status_code for r in fits] == [201, 201, 201]
    assert fits[0].json()["fitted"] == fits[1].json()["fitted"] == fits[2].json()["fitted"]


@pytest.mark.parametrize(
    ("body", "loc", "fragment"),
    [
        ("score,label\n0.1,0\nTrue,1\n", ["row", 2, "score"], "is 'True', a boolean; scores must"),
        ("score,label\n0.1,0\n0.2,yes\n", ["row", 2, "label"], "is 'yes', not a number"),
        ("score,label\n0.1,0\n0.2,t\n", ["row", 2, "label"], "is 't', not a number"),
    ],
)
def test_only_labels_and_weights_take_booleans_and_only_true_and_false(
    client: TestClient, body: str, loc: list[Any], fragment: str
) -> None:
    r = client.post(FIT, content=body.encode(), headers=CSV)
    header_error(r, ["body", "body", *loc], fragment)
    nothing_stored(client)


@pytest.mark.parametrize("url", JUDGES)
def test_diagnostics_and_compare_read_boolean_labels_as_json_does(
    fitted: TestClient, url: str
) -> None:
    df = frame(seed=5)
    as_json = fitted.post(url, json={"scores": df.score.tolist(), "labels": df.label.tolist()})
    as_csv_body = post_csv(fitted, url, boolean_csv(df), upload=False)
    uploaded = post_csv(fitted, url, df.to_csv(index=False), upload=True)
    assert [as_json.status_code, as_csv_body.status_code, uploaded.status_code] == [200] * 3
    assert as_csv_body.json() == as_json.json() == uploaded.json()


# -- outcomes ---------------------------------------------------------------------------------
def test_outcome_labels_take_booleans_in_csv_and_json(fitted: TestClient) -> None:
    ids = ["a", "b", "c", "d"]
    r = fitted.post(f"{BASE}/predict", json={"scores": [0.1, 0.2, 0.3, 0.4], "ids": ids})
    assert r.status_code == 200, r.text
    csv = "id,label\na,True\nb,false\n"
    r = fitted.post(f"{BASE}/outcomes", content=csv.encode(), headers=CSV)
    assert r.status_code == 200, r.text
    r = fitted.post(f"{BASE}/outcomes", json={"ids": ["c", "d"], "labels": [True, False]})
    assert r.status_code == 200, r.text
    rows = logged(fitted)
    assert [rows[i]["label"] for i in ids] == [1, 0, 1, 0]


@pytest.mark.parametrize(
    ("body", "at", "fragment"),
    [
        ("prob,y\na,1\n", [0], "header[0] is the unknown column 'prob'"),
        ("17,1\n18,0\n", [], "header is missing: the first row holds numbers"),
        (",id,label\n0,a,1\n", [0], "header[0] is unnamed: the column looks like a pandas index"),
        ("id,id\na,b\n", [], "header must name id and label once each"),
    ],
)
def test_an_outcomes_header_says_what_it_expects_and_found(
    fitted: TestClient, body: str, at: list[int], fragment: str
) -> None:
    r = fitted.post(f"{BASE}/outcomes", content=body.encode(), headers=CSV)
    detail = header_error(r, ["body", "header", *at], fragment, "expected the header id,label")
    assert f"found {body.splitlines()[0]!r}" in detail["detail"]


def test_an_outcome_label_that_is_a_word_is_refused(fitted: TestClient) -> None:
    r = fitted.post(f"{BASE}/outcomes", content=b"id,label\na,yes\n", headers=CSV)
    header_error(r, ["body", "row", 1, "label"], "is 'yes', not a class index")
