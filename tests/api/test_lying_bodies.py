"""Parquet files and Arrow streams whose metadata lies about their rows (issue 25): refused from
what they really hold, before a page or a buffer is decompressed, on fit, POST diagnostics and
compare; honest files written every way pyarrow writes them still read.

Before (one process each, peak RSS growth): a Parquet file whose footer claimed 1 row over
10^8 took 13 s and 4.8 GiB before its 413; one whose row group also claimed 1 row, over a page
of 10^7 values, 200 MiB, and it was read as 1 row; an Arrow record batch claiming 1 row
decompressed its 10^7 rows (200 MiB) and was read as 1 row (POST diagnostics answered 200).
After: each is refused in milliseconds for a few MiB.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from app.api.bodies import columnar, columnar_checks
from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch
from .lying_files import Lie, lying_arrow, lying_parquet
from .test_columnar_batches import ARROW, ENCODINGS, PARQUET, table_of
from .test_multiclass import logits_batch

pytestmark = pytest.mark.in_threads  # it patches the decoders jobs call, and a limit

ROWS = 2_000_000
"""Rows a lying body holds in the HTTP tests: 32 MB as arrays, past the limit they set."""
LIMIT = 1_000_000
URLS = {
    "fit": "/v1/calibrators/churn/fit?method=platt",
    "diagnostics": "/v1/calibrators/churn/versions/1/diagnostics",
    "compare": "/v1/calibrators/churn/compare",
}
LIES: dict[str, tuple[str, int, str]] = {
    # the footer claims 1 row; its one row group holds them all: counted from the row groups
    "parquet footer": (PARQUET, 413, f"has {ROWS} rows or more; the limit is {LIMIT}"),
    # the row group and its chunks claim 1 row too: their pages hold more values
    "parquet row groups": (PARQUET, 422, "holds pages of more values than that"),
    # the page claims 1 value too: it decompresses to more than a value needs
    "parquet pages": (PARQUET, 422, "decompresses to 16000009 bytes (at most 1033)"),
    # the record batch and its columns claim 1 row: its buffers decompress to 2 * 10^6 values
    "arrow": (ARROW, 422, "holds a buffer of 16000000 bytes in column score (at most 64)"),
}


@pytest.fixture(scope="module")
def bodies() -> dict[str, bytes]:
    """Each lying body of :data:`LIES`, of :data:`ROWS` rows (a few KB each)."""
    lies: dict[str, Lie] = {
        "parquet footer": "footer",
        "parquet row groups": "row groups",
        "parquet pages": "pages",
    }
    made = {name: lying_parquet(ROWS, lie) for name, lie in lies.items()}
    return {**made, "arrow": lying_arrow(ROWS)}


def never_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a row group or a record batch is decoded."""

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("a lying body was decoded")

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", never)
    monkeypatch.setattr(pq.ParquetFile, "read", never)
    monkeypatch.setattr(ipc, "read_record_batch", never)


@pytest.mark.parametrize("lie", LIES)
def test_a_lying_body_is_refused_before_it_is_decoded(
    fitted: TestClient, bodies: dict[str, bytes], monkeypatch: pytest.MonkeyPatch, lie: str
) -> None:
    media_type, status, detail = LIES[lie]
    monkeypatch.setattr(fitted.app.state.service.settings, "max_batch_rows", LIMIT)  # type: ignore[attr-defined]
    never_decoded(monkeypatch)
    body = bodies[lie]
    assert len(body) < 20_000  # kilobytes claiming, or holding, millions of rows
    for route, url in URLS.items():
        r = fitted.post(url, content=body, headers={"content-type": media_type})
        problem = assert_problem(r, status, detail)
        assert problem["detail"].startswith("body "), route  # it names the body
    versions = fitted.get("/v1/calibrators/churn").json()["versions"]
    assert [v["version"] for v in versions] == [1]  # nothing stored


def test_a_lying_upload_names_the_file(
    fitted: TestClient, bodies: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    never_decoded(monkeypatch)
    files = {"file": ("batch.parquet", bodies["parquet row groups"], "application/octet-stream")}
    r = fitted.post("/v1/calibrators/other/fit", files=files, data={"method": "platt"})
    assert_problem(r, 422, "file is malformed: column score of a row group of 1 rows")
    assert fitted.get("/v1/calibrators/other").status_code == 404


def test_pages_that_lie_about_their_size_fail_without_their_memory(client: TestClient) -> None:
    # a page that also claims to decompress to 1 KB passes every check: zstd then refuses to
    # write 16 MB into 1 KB ("Destination buffer is too small"), so the file is malformed (400)
    # for the price of that kilobyte
    body = lying_parquet(ROWS, "page sizes")
    r = client.post(URLS["fit"], content=body, headers={"content-type": PARQUET})
    assert_problem(r, 400, "body is not a Parquet file")
    assert client.get("/v1/calibrators/churn").status_code == 404


@pytest.mark.parametrize(("media_type", "encode"), ENCODINGS)
def test_numbers_past_the_limit_are_413_before_they_are_read(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, media_type: str, encode: Any
) -> None:
    # rows x columns: 300 rows of 4 scores and a label are 1500 numbers; the limit here is
    # max(1000 numbers, 3 x 400 rows)
    monkeypatch.setattr(client.app.state.service.settings, "max_batch_rows", 400)  # type: ignore[attr-defined]
    monkeypatch.setattr(columnar_checks, "MIN_DECODED_BYTES", 8 * 1000)
    never_decoded(monkeypatch)
    body = encode(table_of(logits_batch(300, k=4)))
    r = client.post("/v1/calibrators/wide/fit", content=body, headers={"content-type": media_type})
    assert_problem(r, 413, "rows of 5 columns or more", "as numbers; the limit is 9600")


MEASURE = """
import json, os, re, sys
import pyarrow as pa, pyarrow.parquet as pq
from app.api.bodies.columnar import parse_columnar
from app.errors import ServiceError

def memory(key):
    return int(re.search(key + r":\\s+(\\d+)", open("/proc/self/status").read())[1]) * 1024

def peak_growth(since=[0]):
    # the peak RSS (VmHWM) over the RSS when it was last reset (clear_refs' 5 resets it)
    grown = memory("VmHWM") - since[0]
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    since[0] = memory("VmRSS")
    return grown

files = json.loads(sys.argv[1])
bodies = {name: open(path, "rb").read() for name, (path, _) in files.items()}
answers = {}
peak_growth()
for name, (path, kind) in files.items():
    try:
        parse_columnar(bodies[name], kind, max_rows=int(sys.argv[2]))
        answers[name] = 200
    except ServiceError as exc:
        answers[name] = exc.status
refused = peak_growth()
pq.read_table(pa.BufferReader(bodies["parquet footer"]))  # what the lie hides, decoded
print(json.dumps({"answers": answers, "refused": refused, "decoded": peak_growth()}), flush=True)
os._exit(0)  # past pyarrow's threads, which may abort at interpreter exit ("terminate called")
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux's peak RSS reset")
def test_refusing_lying_bodies_costs_a_sliver_of_decoding_them(tmp_path: Path) -> None:
    # in a process of its own, its peak RSS reset before the bodies are parsed (what the test
    # process allocated before would hide their peak): the four lies of 4 * 10^6 rows each
    # (64 MB as Arrow arrays, 96 MB more as float64) are refused for < 16 MiB of peak RSS
    rows = 4_000_000
    made = {
        "parquet footer": (lying_parquet(rows, "footer"), PARQUET),
        "parquet row groups": (lying_parquet(rows, "row groups"), PARQUET),
        "parquet pages": (lying_parquet(rows, "pages"), PARQUET),
        "arrow": (lying_arrow(rows), ARROW),
    }
    files: dict[str, tuple[str, str]] = {}
    for name, (body, kind) in made.items():
        path = tmp_path / name.replace(" ", "-")
        path.write_bytes(body)
        files[name] = (str(path), kind)
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run(
        [sys.executable, "-c", MEASURE, json.dumps(files), str(rows // 2)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    measured: dict[str, Any] = json.loads(run.stdout)
    assert measured["answers"] == {
        "parquet footer": 413,
        "parquet row groups": 422,
        "parquet pages": 422,
        "arrow": 422,
    }
    assert measured["refused"] < 16 * 2**20, measured
    assert measured["decoded"] > 120 * 2**20, measured  # the measure sees a decode


def honest_parquet(table: pa.Table, **options: Any) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def honest_arrow(table: pa.Table, *, file: bool = False, **options: Any) -> bytes:
    sink = io.BytesIO()
    opened = ipc.new_file if file else ipc.new_stream
    with opened(sink, table.schema, options=ipc.IpcWriteOptions(**options)) as writer:
        writer.write_table(table, max_chunksize=300)
    return sink.getvalue()


WRITES = {
    "dictionary, small pages, row groups": lambda t: honest_parquet(
        t, row_group_size=700, data_page_size=512, write_batch_size=64
    ),
    "plain, zstd, page v2": lambda t: honest_parquet(
        t, use_dictionary=False, compression="zstd", data_page_version="2.0"
    ),
    "gzip, tiny dictionary limit": lambda t: honest_parquet(
        t, compression="gzip", dictionary_pagesize_limit=256
    ),
    "byte stream split and delta": lambda t: honest_parquet(
        t,
        use_dictionary=False,
        column_encoding={"score": "BYTE_STREAM_SPLIT", "label": "DELTA_BINARY_PACKED"},
    ),
    "uncompressed, statistics in page index": lambda t: honest_parquet(
        t, compression="none", write_page_index=True, max_rows_per_page=100
    ),
    "arrow stream, lz4": lambda t: honest_arrow(t, compression="lz4"),
    "arrow file, zstd": lambda t: honest_arrow(t, file=True, compression="zstd"),
    "arrow stream of a slice": honest_arrow,
}


def test_honest_files_written_every_way_are_read(client: TestClient) -> None:
    batch = sigmoid_batch(2000, seed=4)
    weights = np.random.default_rng(2).uniform(0.5, 2.0, 2000).round(3).tolist()
    table = table_of(batch, weights)
    table = table.set_column(1, "label", table.column("label").cast(pa.int64()))
    as_json = {**batch, "sample_weight": weights, "method": "platt"}
    fitted = client.post("/v1/calibrators/json/fit", json=as_json).json()["fitted"]
    for write, encode in WRITES.items():
        shown = table.slice(3) if write.endswith("slice") else table
        media_type = ARROW if write.startswith("arrow") else PARQUET
        r = client.post(
            "/v1/calibrators/honest/fit?method=platt",
            content=encode(shown),
            headers={"content-type": media_type},
        )
        assert r.status_code == 201, (write, r.text)
        if shown is table:
            assert r.json()["fitted"] == fitted, write
        else:
            assert r.json()["n_samples"] == 2000 - 3, write


def test_running_out_of_memory_while_decoding_is_no_malformed_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # pyarrow's ArrowMemoryError is an ArrowException as well as a MemoryError: it must reach
    # the worker as the MemoryError it is (413 over-memory), not as "not a Parquet file"
    def exhausted(*args: object, **kwargs: object) -> None:
        raise pa.ArrowMemoryError("malloc of size 8589934592 failed")

    monkeypatch.setattr(columnar, "read_parquet", exhausted)
    with pytest.raises(MemoryError):
        columnar.parse_columnar(b"PAR1", PARQUET, max_rows=10)
