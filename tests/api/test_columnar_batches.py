"""Fit on Parquet files and Arrow IPC streams: the same version as the same batch in JSON, and
errors that name the column and the row."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch
from .test_multiclass import logits_batch

PARQUET = "application/vnd.apache.parquet"
ARROW = "application/vnd.apache.arrow.stream"


def parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def arrow(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=97)  # several record batches
    return sink.getvalue()


ENCODINGS = [(PARQUET, parquet), (ARROW, arrow)]


def table_of(batch: dict[str, Any], weights: list[float] | None = None) -> pa.Table:
    scores = np.array(batch["scores"])
    columns: dict[str, Any] = (
        {"score": scores}
        if scores.ndim == 1
        else {f"score_{j}": scores[:, j] for j in range(scores.shape[1])}
    )
    columns["label"] = pa.array(batch["labels"], type=pa.int8())
    if weights is not None:
        columns["weight"] = weights
    return pa.table(columns)


def fitted_state(client: TestClient, name: str) -> dict[str, Any]:
    version: dict[str, Any] = client.get(f"/v1/calibrators/{name}/versions/1").json()
    return {k: version[k] for k in ("method", "n_samples", "fitted", "metrics", "class_counts")}


@pytest.mark.parametrize(("media_type", "encode"), ENCODINGS)
@pytest.mark.parametrize("multiclass", [False, True])
def test_a_columnar_batch_fits_the_version_its_json_fits(
    client: TestClient, media_type: str, encode: Any, multiclass: bool
) -> None:
    batch = logits_batch(400) if multiclass else sigmoid_batch(600, seed=2)
    weights = np.random.default_rng(1).uniform(0.5, 2.0, len(batch["labels"])).round(3).tolist()
    method = "temperature" if multiclass else "isotonic"
    as_json = {**batch, "sample_weight": weights, "method": method}
    assert client.post("/v1/calibrators/json/fit", json=as_json).status_code == 201
    body = encode(table_of(batch, weights))
    r = client.post(
        f"/v1/calibrators/columns/fit?method={method}",
        content=body,
        headers={"content-type": media_type},
    )
    assert r.status_code == 201, r.text
    assert fitted_state(client, "columns") == fitted_state(client, "json")


def test_a_parquet_upload_with_its_options_in_the_form(client: TestClient) -> None:
    batch = sigmoid_batch(500, seed=3)
    files = {"file": ("batch.parquet", parquet(table_of(batch)), "application/octet-stream")}
    r = client.post("/v1/calibrators/up/fit", files=files, data={"method": "platt"})
    assert r.status_code == 201, r.text
    assert r.json()["method"] == "platt"
    assert client.post("/v1/calibrators/js/fit", json={**batch, "method": "platt"}).is_success
    assert fitted_state(client, "up") == fitted_state(client, "js")


def test_booleans_integers_and_float32_are_numbers(client: TestClient) -> None:
    batch = sigmoid_batch(300, seed=4)
    table = pa.table(
        {
            "label": pa.array([bool(y) for y in batch["labels"]]),
            "score": pa.array(batch["scores"], type=pa.float32()),
        }
    )
    headers = {"content-type": PARQUET}
    r = client.post("/v1/calibrators/t/fit", content=parquet(table), headers=headers)
    assert r.status_code == 201, r.text
    as_float32 = np.array(batch["scores"], dtype=np.float32).astype(np.float64).tolist()
    same = {"scores": as_float32, "labels": batch["labels"]}
    assert client.post("/v1/calibrators/t2/fit", json=same).status_code == 201
    assert fitted_state(client, "t") == fitted_state(client, "t2")


BAD_TABLES = [
    (pa.table({"score": [0.1, None, 0.3], "label": [0, 1, 0]}), 422, ["row[2].score", "null"]),
    (pa.table({"score": [0.1, 0.2], "label": ["a", "b"]}), 422, ["column.label", "string"]),
    (pa.table({"score": [[0.1], [0.2]], "label": [0, 1]}), 422, ["column.score", "list"]),
    (
        pa.table({"score": pa.array([], pa.float64()), "label": pa.array([], pa.int8())}),
        422,
        ["no rows"],
    ),
    (pa.table({"score": [0.1, 0.2], "label": [0, 1], "extra": [1, 2]}), 422, ["extra"]),
    (pa.table({"score": [0.1, 0.2]}), 422, ["label"]),
]
"""Tables every route that takes a batch refuses: (table, status, fragments of the detail)."""


@pytest.mark.parametrize(
    "url",
    [
        "/v1/calibrators/bad/fit",
        "/v1/calibrators/churn/versions/latest/diagnostics",
        "/v1/calibrators/churn/compare",
    ],
)
@pytest.mark.parametrize(("table", "status", "fragments"), BAD_TABLES)
@pytest.mark.parametrize(("media_type", "encode"), ENCODINGS)
def test_bad_columns_are_refused_by_name_and_row(
    fitted: TestClient,
    url: str,
    table: pa.Table,
    status: int,
    fragments: list[str],
    media_type: str,
    encode: Any,
) -> None:
    """By every route that takes a batch, alike (diagnostics and compare as a fit)."""
    headers = {"content-type": media_type}
    r = fitted.post(url, content=encode(table), headers=headers)
    assert_problem(r, status, *fragments)
    assert (
        r.json()
        == fitted.post("/v1/calibrators/bad/fit", content=encode(table), headers=headers).json()
    )
    assert fitted.get("/v1/calibrators/bad").status_code == 404  # nothing stored


@pytest.mark.parametrize("media_type", [PARQUET, ARROW])
def test_bytes_that_are_no_such_file_are_malformed(client: TestClient, media_type: str) -> None:
    r = client.post(
        "/v1/calibrators/bad/fit",
        content=b"score,label\n0.1,0\n",
        headers={"content-type": media_type},
    )
    assert_problem(r, 400, "not")


@pytest.mark.parametrize(("media_type", "encode"), ENCODINGS)
def test_rows_past_the_limit_are_refused_before_they_are_read(
    client: TestClient, media_type: str, encode: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compressed columns may inflate far past the body: rows are counted first."""
    monkeypatch.setattr(client.app.state.service.settings, "max_batch_rows", 250)  # type: ignore[attr-defined]
    batch = sigmoid_batch(300, seed=7)
    headers = {"content-type": media_type}
    r = client.post("/v1/calibrators/big/fit", content=encode(table_of(batch)), headers=headers)
    assert_problem(r, 413, "250")
    extra = table_of(batch).append_column("extra", pa.array(range(300)))
    r = client.post("/v1/calibrators/big/fit", content=encode(extra), headers=headers)
    assert_problem(r, 422, "extra")  # the schema is checked first


@pytest.mark.parametrize("compression", ["snappy", "zstd", "none"])
def test_a_parquet_file_as_pyarrow_and_pandas_write_it_by_default_is_read(
    client: TestClient, compression: str
) -> None:
    """pyarrow's defaults (what pandas' ``to_parquet`` uses) dictionary-encode a column until
    its dictionary passes 1 MB: 10^5 distinct float scores make a dictionary page of 800 KB.
    The limit on what a chunk decompresses to counts its pages' headers and uncompressed
    bytes, as the file's own metadata does: it used to add the compressed bytes too and
    refused this file as malformed. Several chunks, integer labels of every width: the
    values come off Arrow's buffers as they are."""
    rng = np.random.default_rng(4)
    n = 100_000
    scores = rng.normal(size=n)
    labels = (rng.random(n) < 1 / (1 + np.exp(-2 * scores))).astype(np.int64)
    sink = io.BytesIO()
    pq.write_table(
        pa.table({"score": scores, "label": labels}),
        sink,
        compression=compression,
        row_group_size=40_000,
    )
    r = client.post(
        "/v1/calibrators/defaults/fit?method=platt",
        content=sink.getvalue(),
        headers={"content-type": PARQUET},
    )
    assert r.status_code == 201, r.text
    as_json = {"scores": scores.tolist(), "labels": labels.tolist(), "method": "platt"}
    assert client.post("/v1/calibrators/json/fit", json=as_json).status_code == 201
    assert fitted_state(client, "defaults") == fitted_state(client, "json")
    for kind in (pa.int8(), pa.uint16(), pa.int32(), pa.float32()):
        table = pa.table({"score": scores, "label": pa.array(labels).cast(kind)})
        body = arrow(table)  # record batches of 97 rows: many chunks
        r = client.post(
            f"/v1/calibrators/{kind}/fit?method=platt",
            content=body,
            headers={"content-type": ARROW},
        )
        assert r.status_code == 201, (kind, r.text)
        assert fitted_state(client, str(kind)) == fitted_state(client, "json")
