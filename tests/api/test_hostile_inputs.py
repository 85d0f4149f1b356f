"""What an adversarial pass over ONNX export, /v2 infer and columnar bodies found, kept as
regressions: each failed before its fix. (Its ONNX Runtime findings, maps that magnify a
runtime's last bits, are tests/export's refusals.)"""

from __future__ import annotations

import gzip
import io
import json

import numpy as np
import onnxruntime as ort
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from app.api.bodies.tensors import parse_infer
from app.errors import InvalidInput
from app.settings import Settings
from tests.client import TestClient

from .helpers import sigmoid_batch

PARITY = 1e-12


def _ort(model: bytes, scores: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(["probabilities"], {"scores": scores})[0]


# --- 500s ---------------------------------------------------------------------------------


def _binary_infer_body() -> tuple[bytes, int]:
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "scores",
                    "datatype": "FP64",
                    "shape": [2],
                    "parameters": {"binary_data_size": 16},
                }
            ]
        }
    ).encode()
    return header + np.array([0.5, 1.0]).tobytes(), len(header)


@pytest.mark.parametrize(
    "length", ["\u00b2", "\u00b91"], ids=["superscript-two", "superscript-one-then-1"]
)
def test_infer_header_length_with_a_unicode_digit_is_a_400_error(length: str) -> None:
    # Starlette decodes header bytes as latin-1: a raw 0xB2 byte arrives as '²', which
    # str.isdigit() accepts and int() refuses: ValueError -> 500 (over a real socket:
    # curl -H $'Inference-Header-Content-Length: \xb2'; the TestClient re-encodes header
    # bytes as UTF-8, so this one calls the parser the route calls)
    body, _ = _binary_infer_body()
    with pytest.raises(InvalidInput):
        parse_infer(body, length, 1000)


@pytest.mark.parametrize(
    "length", [b"1" * 5000, b"0" * 5000 + b"2"], ids=["5000-digits", "5001-digits-value-2"]
)
def test_infer_header_length_past_python_int_digits_is_400(
    fitted: TestClient, length: bytes
) -> None:
    # int() refuses strings past 4300 digits (even zeros): ValueError -> 500
    body, _ = _binary_infer_body()
    r = fitted.post(
        "/v2/models/churn/infer",
        content=body,
        headers={"Inference-Header-Content-Length": length, "content-type": "application/json"},
    )
    assert r.status_code == 400, r.text
    assert "Inference-Header-Content-Length" in r.json()["error"]


CSV_SUPERSCRIPT = (
    "score_0,score_1,score_\u00b2,label\n0.1,0.2,0.7,2\n0.3,0.3,0.4,1\n0.5,0.2,0.3,0\n"
)


def test_csv_column_with_a_unicode_digit_is_422(client: TestClient) -> None:
    # _class_column: '²'.isdigit() is True, int('²') raises ValueError -> 500
    r = client.post(
        "/v1/calibrators/x/fit?method=temperature",
        content=CSV_SUPERSCRIPT.encode(),
        headers={"content-type": "text/csv"},
    )
    assert r.status_code == 422, r.text
    r = client.post(
        "/v1/calibrators/x/fit?method=temperature",
        files={"file": ("batch.csv", CSV_SUPERSCRIPT.encode())},
    )
    assert r.status_code == 422, r.text


def test_parquet_column_with_a_unicode_digit_is_422_unknown_column(client: TestClient) -> None:
    # answered 400 "body is not a Parquet file: invalid literal for int()": the file is fine
    table = pa.table(
        {"score_0": [0.1, 0.3], "score_1": [0.2, 0.3], "score_\u00b2": [0.7, 0.4], "label": [2, 1]}
    )
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    r = client.post(
        "/v1/calibrators/x/fit?method=temperature",
        content=buffer.getvalue(),
        headers={"content-type": "application/vnd.apache.parquet"},
    )
    assert r.status_code == 422, r.text


# --- memory ---------------------------------------------------------------------------------


@pytest.mark.in_threads  # it patches the decoders the job calls
def test_compressed_arrow_stream_rows_are_counted_before_decoding(
    client: TestClient, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one zstd record batch of 3 x 10^8 rows is 83 KB: it was decoded (+1.7 GB, 3.9 s)
    # before its rows were counted; the count now comes from the batch's header, and
    # nothing is decoded (no record batch is read) for a body past the limit
    rows = settings.max_batch_rows + 1
    table = pa.table({"score": np.zeros(rows), "label": np.zeros(rows, np.int8)})
    stream = io.BytesIO()
    with ipc.new_stream(
        stream, table.schema, options=ipc.IpcWriteOptions(compression="zstd")
    ) as writer:
        writer.write_table(table, max_chunksize=rows)
    body = stream.getvalue()
    assert len(body) < rows  # compressed far below a byte a row

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the stream was decoded before its rows were counted")

    monkeypatch.setattr(ipc, "read_record_batch", never)
    r = client.post(
        "/v1/calibrators/x/fit",
        content=body,
        headers={"content-type": "application/vnd.apache.arrow.stream"},
    )
    assert r.status_code == 413, r.text


@pytest.mark.in_threads  # it patches the decoders the job calls
def test_parquet_column_types_are_checked_before_reading(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a 108 KB Parquet file whose score column is 10^6 copies of a 1000-byte string (stored
    # without the Arrow schema, so it is read plain) cost +1.45 GB and 3.2 s before the 422:
    # the types now come from the schema, and the file is never read
    rows = 1000
    strings = pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(rows, np.int32)), pa.array(["x" * 1000])
    )
    table = pa.table({"score": strings, "label": pa.array(np.zeros(rows, np.int8))})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd", store_schema=False)

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the file was read before its columns' types were checked")

    monkeypatch.setattr(pq.ParquetFile, "read", never)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", never)
    r = client.post(
        "/v1/calibrators/x/fit",
        content=buffer.getvalue(),
        headers={"content-type": "application/vnd.apache.parquet"},
    )
    assert r.status_code == 422, r.text
    assert "score" in r.json()["detail"]


# --- contract and protocol details ----------------------------------------------------------


@pytest.mark.parametrize("path", ["compare", "versions/1/diagnostics"])
def test_compare_and_diagnostics_take_csv_and_parquet(fitted: TestClient, path: str) -> None:
    # docs/api.md, Fitting: diagnostics and compare "take their batch in every one of these
    # forms" (JSON, CSV, Parquet, Arrow, multipart); both answer 415 for anything but JSON
    batch = sigmoid_batch(200, seed=3)
    csv = "score,label\n" + "\n".join(
        f"{s!r},{y}" for s, y in zip(batch["scores"], batch["labels"], strict=True)
    )
    r = fitted.post(
        f"/v1/calibrators/churn/{path}", content=csv.encode(), headers={"content-type": "text/csv"}
    )
    assert r.status_code == 200, r.text
    buffer = io.BytesIO()
    pq.write_table(pa.table({"score": batch["scores"], "label": batch["labels"]}), buffer)
    r = fitted.post(
        f"/v1/calibrators/churn/{path}",
        content=buffer.getvalue(),
        headers={"content-type": "application/vnd.apache.parquet"},
    )
    assert r.status_code == 200, r.text


def test_weak_etag_in_if_none_match_gets_304(fitted: TestClient) -> None:
    # RFC 9110 13.1.2: If-None-Match compares weakly, so W/"tag" matches "tag"
    url = "/v1/calibrators/churn/versions/1/artifact?format=onnx"
    tag = fitted.get(url).headers["etag"]
    assert fitted.get(url, headers={"If-None-Match": f"W/{tag}"}).status_code == 304


def test_gzip_body_with_two_members_or_trailing_bytes(fitted: TestClient) -> None:
    # RFC 1952 2.2: a gzip file is a series of members (pigz, `cat a.gz b.gz`); only the
    # first is inflated and whatever follows it is silently dropped
    body = json.dumps(
        {"inputs": [{"name": "scores", "datatype": "FP64", "shape": [2], "data": [0.5, 1.0]}]}
    ).encode()
    half = len(body) // 2
    two_members = gzip.compress(body[:half]) + gzip.compress(body[half:])
    r = fitted.post(
        "/v2/models/churn/infer", content=two_members, headers={"Content-Encoding": "gzip"}
    )
    assert r.status_code == 200, r.text
    trailing = gzip.compress(body) + b"not gzip"
    r = fitted.post(
        "/v2/models/churn/infer", content=trailing, headers={"Content-Encoding": "gzip"}
    )
    assert r.status_code == 400, r.text


@pytest.mark.parametrize("body", [b"", b"\x00" * 7, b"\xff\xff\xff\xff" + b"\x00" * 12])
def test_an_arrow_body_without_a_schema_is_a_400(client: TestClient, body: bytes) -> None:
    r = client.post(
        "/v1/calibrators/x/fit",
        content=body,
        headers={"content-type": "application/vnd.apache.arrow.stream"},
    )
    assert r.status_code == 400, r.text
    assert "not an Arrow IPC stream" in r.json()["detail"]


def test_what_a_database_refuses_is_a_4xx_on_both_backends(client: TestClient) -> None:
    """PostgreSQL refuses a NUL byte in text and an integer past BIGINT where SQLite stores or
    compares them: each is a 4xx before it reaches either (the fuzzer meets them only by
    chance on PostgreSQL, where it sends fewer cases)."""
    batch = {**sigmoid_batch(60, seed=1), "method": "platt"}
    assert client.post("/v1/calibrators/churn/fit", json=batch).status_code == 201
    nul = "a\u0000b"
    refused = [
        client.post("/v1/calibrators/churn/fit", json={**batch, "description": nul}),
        client.post("/v1/calibrators/churn/fit", json={**batch, "tags": {"team": nul}}),
        client.post("/v1/calibrators/a%00b/fit", json=batch),  # the name, percent-encoded
        client.post("/v1/calibrators/churn/predict", json={"scores": [0.1], "ids": [nul]}),
        client.post("/v1/calibrators/churn/outcomes", json={"ids": [nul], "labels": [1]}),
        client.get(f"/v1/calibrators/churn/versions/{2**63}"),
        client.delete(f"/v1/calibrators/churn/versions/{2**63}"),
        client.put("/v1/calibrators/churn/aliases/prod", json={"version": 2**63}),
        client.get("/v1/calibrators", params={"offset": 2**63}),
    ]
    for response in refused:
        assert 400 <= response.status_code < 500, (response.request.url, response.text)
    listed = client.get("/v1/calibrators/churn").json()
    assert listed["latest_version"] == 1  # nothing more was stored
