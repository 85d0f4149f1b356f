"""A multipart upload is parsed as what it is: its declared media type, else its file
extension (issue 25: ``x.arrow`` was read as CSV and answered "not UTF-8")."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from tests.client import TestClient

from .helpers import as_csv, assert_problem, sigmoid_batch
from .test_columnar_batches import arrow, fitted_state, parquet, table_of

BATCH = sigmoid_batch(300, seed=8)
OCTETS = "application/octet-stream"


def arrow_file(table: pa.Table) -> bytes:
    """The Arrow IPC *file* format (Feather v2), what ``.arrow`` files often hold."""
    sink = io.BytesIO()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=97)
    return sink.getvalue()


def upload(client: TestClient, name: str, filename: str, data: bytes, media_type: str) -> Any:
    files = {"file": (filename, data, media_type)}
    return client.post(f"/v1/calibrators/{name}/fit", files=files, data={"method": "platt"})


@pytest.mark.parametrize(
    ("filename", "encode", "media_type"),
    [
        ("batch.arrow", arrow, OCTETS),
        ("batch.arrows", arrow, OCTETS),
        ("BATCH.ARROW", arrow_file, OCTETS),
        ("batch", arrow, "application/vnd.apache.arrow.stream"),
        ("batch.bin", arrow_file, "application/vnd.apache.arrow.file"),
        ("batch.parquet", parquet, OCTETS),
        ("batch", parquet, "application/vnd.apache.parquet"),
        ("batch.csv", lambda _: as_csv(BATCH).encode(), "text/csv"),
        ("batch.csv", lambda _: as_csv(BATCH).encode(), OCTETS),
    ],
)
def test_an_upload_is_parsed_by_its_type_or_extension(
    client: TestClient, filename: str, encode: Any, media_type: str
) -> None:
    assert client.post("/v1/calibrators/json/fit", json={**BATCH, "method": "platt"}).is_success
    r = upload(client, "up", filename, encode(table_of(BATCH)), media_type)
    assert r.status_code == 201, r.text
    assert fitted_state(client, "up") == fitted_state(client, "json")


def test_an_arrow_upload_that_is_no_arrow_is_malformed_not_csv(client: TestClient) -> None:
    r = upload(client, "up", "x.arrow", b"\xff\xfe not arrow at all", OCTETS)
    assert_problem(r, 400, "Arrow IPC stream")
    assert "UTF-8" not in r.json()["detail"]


@pytest.mark.parametrize("media_type", ["image/png", "application/json"])
def test_an_unknown_declared_type_is_415(client: TestClient, media_type: str) -> None:
    r = upload(client, "up", "batch.csv", as_csv(BATCH).encode(), media_type)
    assert_problem(r, 415, media_type)
    assert client.get("/v1/calibrators/up").status_code == 404  # nothing stored
