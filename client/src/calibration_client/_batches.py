"""A labelled batch as a request body: JSON for small batches; from :data:`BULK_ROWS` rows an
Arrow IPC stream when pyarrow is installed, else CSV. All three carry the same float64 values
bit for bit (JSON and CSV write each float's shortest round-tripping text), so the service
fits the same numbers whichever one goes.

The options of the call (method, params, ...) are JSON members beside the arrays, and query
parameters for the other media types (objects as JSON text), as the service reads them."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

BULK_ROWS = 10_000
"""Rows from which a batch goes as Arrow (or CSV) and scores as /v2 binary tensors: below it
JSON costs little, above it JSON's text is most of a request's time."""

BatchTransport = Literal["auto", "json", "arrow", "csv"]
ARROW_STREAM = "application/vnd.apache.arrow.stream"
PARQUET = "application/vnd.apache.parquet"
PARQUET_MAGIC = b"PAR1"
CHUNK_BYTES = 256 * 1024
QueryValue = str | list[str]
Stream = Callable[[], Iterable[bytes]]
"""A body sent as it is read: each call makes a fresh iterable (one per attempt)."""

try:  # orjson writes numpy arrays straight, several times faster than json over tolist()
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is optional
    _orjson = None  # type: ignore[assignment]


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(document: Mapping[str, Any]) -> bytes:
    """``document`` as compact JSON bytes, numpy arrays as nested lists, floats as their
    shortest round-tripping text (``repr``). The same bytes whatever is installed: a fit
    retried under its idempotency key must send what its first attempt sent."""
    text = json.dumps(document, default=_plain, allow_nan=False, separators=(",", ":"))
    return text.encode()


def loads(content: bytes) -> Any:
    """A JSON answer's document, through orjson when installed (a one-score predict's answer
    in 0.4 us against 2.6 us through ``json``)."""
    return json.loads(content) if _orjson is None else _orjson.loads(content)


def dumps_fast(document: Mapping[str, Any]) -> bytes:
    """``document`` as JSON bytes as :func:`dumps` writes it, through orjson when installed
    (several times faster on big arrays; its bytes may differ, its numbers never do). For
    bodies whose exact bytes nothing depends on: predicts."""
    if _orjson is None:
        return dumps(document)
    ready = {
        k: np.ascontiguousarray(v) if isinstance(v, np.ndarray) else v for k, v in document.items()
    }
    return _orjson.dumps(ready, default=_plain, option=_orjson.OPT_SERIALIZE_NUMPY)


@dataclass(frozen=True)
class Body:
    """A request's body (bytes, or a :data:`Stream` of ``length`` bytes), its media type,
    and the query parameters that go with it."""

    content: bytes | Stream
    content_type: str
    params: dict[str, QueryValue]
    length: int | None = None

    @property
    def headers(self) -> dict[str, str]:
        """The body's own headers: its media type, and its length when it is streamed."""
        headers = {"Content-Type": self.content_type}
        if self.length is not None:  # known: httpx sends it instead of chunks
            headers["Content-Length"] = str(self.length)
        return headers


def file_body(path: Path, options: Mapping[str, Any]) -> Body:
    """A CSV or Parquet file (told apart by Parquet's magic bytes) as a body streamed from
    disk as it is, and ``options`` as query parameters. OSError when it cannot be read."""
    length = path.stat().st_size
    with path.open("rb") as head:
        parquet = head.read(len(PARQUET_MAGIC)) == PARQUET_MAGIC

    def chunks() -> Iterator[bytes]:
        with path.open("rb") as stream:
            while chunk := stream.read(CHUNK_BYTES):
                yield chunk

    params = {k: _query_value(v) for k, v in options.items() if v is not None}
    return Body(chunks, PARQUET if parquet else "text/csv", params, length)


def has_pyarrow() -> bool:
    """Whether pyarrow can be imported (found, not imported: that costs ~100 ms)."""
    return importlib.util.find_spec("pyarrow") is not None


def chosen_transport(rows: int, transport: BatchTransport, bulk_rows: int) -> BatchTransport:
    """The media type a batch of ``rows`` goes as."""
    if transport != "auto":
        return transport
    if rows < bulk_rows:
        return "json"
    return "arrow" if has_pyarrow() else "csv"


def labelled_body(
    scores: NDArray[np.float64],
    labels: NDArray[Any],
    weights: NDArray[np.float64] | None,
    options: Mapping[str, Any],
    transport: BatchTransport,
    bulk_rows: int = BULK_ROWS,
) -> Body:
    """The batch and its ``options`` (None values left out) as a body of ``transport``."""
    given = {key: value for key, value in options.items() if value is not None}
    kind = chosen_transport(len(scores), transport, bulk_rows)
    if kind == "json":
        document: dict[str, Any] = {"scores": scores, "labels": labels}
        if weights is not None:
            document["sample_weight"] = weights
        return Body(dumps({**document, **given}), "application/json", {})
    params = {key: _query_value(value) for key, value in given.items()}
    columns = _columns(scores, labels, weights)
    if kind == "arrow":
        return Body(_arrow_stream(columns), ARROW_STREAM, params)
    if kind == "csv":
        return Body(_csv(columns), "text/csv", params)
    raise ValueError(f"transport must be auto, json, arrow or csv; got {transport!r}")


def _query_value(value: Any) -> QueryValue:
    """An option as the service reads it from a query: objects as JSON, lists repeated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return str(value)


def _columns(
    scores: NDArray[np.float64], labels: NDArray[Any], weights: NDArray[np.float64] | None
) -> dict[str, NDArray[Any]]:
    """The batch's columns by the names the service reads."""
    if scores.ndim == 1:
        columns = {"score": scores}
    else:
        columns = {f"score_{j}": np.ascontiguousarray(scores[:, j]) for j in range(scores.shape[1])}
    columns["label"] = labels
    if weights is not None:
        columns["weight"] = weights
    return columns


def _arrow_stream(columns: dict[str, NDArray[Any]]) -> bytes:
    import pyarrow as pa  # the [arrow] extra; chosen only when it is installed

    table = pa.table({name: pa.array(values) for name, values in columns.items()})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def _csv(columns: dict[str, NDArray[Any]]) -> bytes:
    """CSV with each float as Python's ``repr`` writes it: the shortest text that reads back
    as the same double (``%.17g`` would too, longer; ``np.savetxt`` is several times slower)."""
    cells = [list(map(repr, values.tolist())) for values in columns.values()]
    lines = map(",".join, zip(*cells, strict=True))
    return "\n".join([",".join(columns), *lines, ""]).encode()
