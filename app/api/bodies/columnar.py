"""Batches as Parquet files or Arrow IPC streams: the columns of a CSV batch, typed.

Data scientists hold their batches in pandas or Polars and save them as Parquet; an Arrow
stream is what those libraries write without a file. The columns are the CSV's
(:mod:`app.api.bodies.csv_batches`): ``score``, ``label``, optional ``weight``, or
``score_0..score_{k-1}``, ``label``. Each must be numbers (integers or floats; booleans too
for labels and weights, never for scores) with no nulls; errors name the column and the first
bad row (1 = the first row), and a file without rows is refused. pyarrow reads the columns
straight into float64 arrays, so a 10^7-row batch never exists as text or Python objects.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from numpy.typing import NDArray

from app.api.bodies.csv_batches import batch_columns
from app.api.places import invalid
from app.errors import MalformedBody, PayloadTooLarge

PARQUET = "application/vnd.apache.parquet"
ARROW_STREAM = "application/vnd.apache.arrow.stream"
COLUMNAR_TYPES = (PARQUET, ARROW_STREAM)
ARROW_FILE_MAGIC = b"ARROW1\0\0"
"""How the Arrow IPC *file* format (``.arrow``, Feather v2) begins: its magic, padded to 8
bytes, then the stream format (ending in its end-of-stream marker), then a footer, so the
stream after the magic is read as any stream is."""


def parse_columnar(
    data: bytes, kind: str, *, field: str = "body", max_rows: int
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64] | None]:
    """A Parquet file or an Arrow IPC stream (``kind``, a media type of
    :data:`COLUMNAR_TYPES`) → (scores, labels, weights), as :func:`parse_csv` gives them.
    Compressed columns can inflate far past the body's size, so the columns' names and types
    are checked from the schema and the rows counted (413 past ``max_rows``) before anything
    is decompressed (:func:`_table`)."""
    table = _table(data, kind, field, max_rows)
    names = table.column_names
    columns = batch_columns(names, field)
    if table.num_rows == 0:
        raise invalid(("body", field), "has no rows")
    scores = np.column_stack(
        [_numbers(table, names[i], field, booleans=False) for i in columns["scores"]]
    )
    labels = _numbers(table, names[columns["label"][0]], field)
    weights = _numbers(table, "weight", field) if columns["weight"] else None
    return (scores[:, 0] if scores.shape[1] == 1 else scores), labels, weights


def _table(data: bytes, kind: str, field: str, max_rows: int) -> pa.Table:
    """The table in ``data``, of at most ``max_rows`` rows; 400 when it is no Parquet file or
    Arrow stream. Nothing is decompressed before the columns' names and types are checked
    and the rows counted (a 100 KB compressed file may hold 10^9 rows or strings of 1 GB):
    a Parquet file's rows from its footer, only the batch's columns read; an Arrow stream's
    from each record batch's header (:func:`_stream_rows`)."""
    what = "a Parquet file" if kind == PARQUET else "an Arrow IPC stream (or file)"
    try:
        if kind == PARQUET:
            parquet = pq.ParquetFile(pa.BufferReader(data))
            needed = _checked_columns(parquet.schema_arrow, field)
            _check_rows(parquet.metadata.num_rows, max_rows, field)
            return parquet.read(columns=needed)
        if data.startswith(ARROW_FILE_MAGIC):  # the file format: its stream follows
            data = data[len(ARROW_FILE_MAGIC) :]
        _check_rows(_stream_rows(data, field), max_rows, field)
        with ipc.open_stream(pa.BufferReader(data)) as reader:
            batches, rows = [], 0
            for batch in reader:
                rows += batch.num_rows
                _check_rows(rows, max_rows, field)
                batches.append(batch)
            return pa.Table.from_batches(batches, schema=reader.schema)
    except (pa.ArrowException, OSError, ValueError, struct.error, IndexError) as exc:
        raise MalformedBody(f"{field} is not {what}: {str(exc)[:200]}") from None


def _checked_columns(schema: pa.Schema, field: str) -> list[str]:
    """The batch's columns in ``schema`` (422 for a missing or unknown one, or one that does
    not hold numbers), by name."""
    names = schema.names
    columns = batch_columns(names, field)
    scores = [names[i] for i in columns["scores"]]
    for name in scores:
        _check_type(schema.field(name).type, name, field, booleans=False)
    others = [names[i] for i in (*columns["label"], *columns["weight"])]
    for name in others:
        _check_type(schema.field(name).type, name, field)
    return scores + others


def _check_type(kind: Any, name: str, field: str, *, booleans: bool = True) -> None:
    """422 unless column ``name`` holds numbers (or, with ``booleans``, booleans as 0/1)."""
    if pa.types.is_boolean(kind) and not booleans:
        raise invalid(
            ("body", field, "column", name), "is a boolean column; scores must be numbers"
        )
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
        raise invalid(("body", field, "column", name), f"is of type {kind}; expected numbers")


def _stream_rows(data: bytes, field: str) -> int:
    """The rows an Arrow IPC stream's record batches declare, read from each message's
    flatbuffer header (``Message.header`` → ``RecordBatch.length``, format/Message.fbs)
    without decoding, so without decompressing, a body; its schema, the first message,
    checked first (:func:`_checked_columns`)."""
    reader = ipc.MessageReader.open_stream(pa.BufferReader(data))
    try:
        first = reader.read_next_message()
    except StopIteration:
        raise ValueError("no schema message") from None
    _checked_columns(ipc.read_schema(first), field)
    rows = 0
    while True:
        try:
            message = reader.read_next_message()
        except StopIteration:
            return rows
        if message is None:
            return rows
        if message.type == "record batch":
            rows += max(0, _batch_length(message.metadata.to_pybytes()))


def _batch_length(metadata: bytes) -> int:
    """``RecordBatch.length`` of a record batch message's flatbuffer: the root table's field
    2 (``header``) points to the RecordBatch table, whose field 0 is its length (absent: 0).
    A table starts with the signed offset back to its vtable: [vtable size, table size,
    field offsets...] as uint16; a field's offset 0 means absent."""

    def field(table: int, index: int) -> int | None:
        vtable = table - struct.unpack_from("<i", metadata, table)[0]
        size = struct.unpack_from("<H", metadata, vtable)[0]
        entry = 4 + 2 * index
        if entry + 2 > size:
            return None
        offset: int = struct.unpack_from("<H", metadata, vtable + entry)[0]
        return table + offset if offset else None

    root = struct.unpack_from("<I", metadata, 0)[0]
    header = field(root, 2)
    if header is None:
        raise ValueError("a record batch message without its header")
    batch = header + struct.unpack_from("<I", metadata, header)[0]
    length = field(batch, 0)
    return 0 if length is None else int(struct.unpack_from("<q", metadata, length)[0])


def _check_rows(rows: int, max_rows: int, field: str) -> None:
    if rows > max_rows:
        raise PayloadTooLarge(f"{field} has {rows} rows or more; the limit is {max_rows}")


def _numbers(
    table: pa.Table, name: str, field: str, *, booleans: bool = True
) -> NDArray[np.float64]:
    """Column ``name`` as float64: integers, floats or (with ``booleans``) booleans, without
    nulls."""
    column = table.column(name)
    _check_type(column.type, name, field, booleans=booleans)
    if column.null_count:
        first = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise invalid(("body", field, "row", first + 1, name), "is null; expected a number")
    values: NDArray[np.float64] = column.to_numpy(zero_copy_only=False).astype(
        np.float64, copy=False
    )
    return values
