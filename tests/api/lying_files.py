"""Parquet files and Arrow streams whose metadata lies about the rows they hold, made for real.

Each is written honestly by pyarrow (zeros, one page or one record batch per column, zstd, so
that millions of rows take kilobytes), then its metadata is patched in place: a Parquet
footer's and row groups' counts and sizes (Thrift compact protocol, each integer rewritten as a
varint padded to the old one's length, which readers accept), a page header's values and size,
an Arrow record batch's length and its columns' lengths (flatbuffer int64s).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

Lie = Literal["footer", "row groups", "pages", "page sizes"]
"""How far a Parquet file lies: only its footer's total; also its row groups' rows, chunks'
values and sizes; also its pages' values; also what its pages decompress to."""


def zeros(rows: int) -> pa.Table:
    """A binary batch of ``rows`` rows: score and label columns of 8 bytes a value."""
    return pa.table({"score": np.zeros(rows), "label": np.zeros(rows, np.int64)})


def lying_parquet(rows: int, lie: Lie, claim: int = 1) -> bytes:
    """A Parquet file of ``rows`` rows in one row group, one plain page a column, that claims
    ``claim`` rows, as far as ``lie`` goes."""
    sink = io.BytesIO()
    pq.write_table(
        zeros(rows),
        sink,
        compression="zstd",
        use_dictionary=False,
        row_group_size=rows,
        data_page_size=1 << 30,
        max_rows_per_page=rows,
        write_statistics=False,
    )
    data = bytearray(sink.getvalue())
    footer_size = struct.unpack_from("<i", data, len(data) - 8)[0]
    footer = _struct(data, len(data) - 8 - footer_size)
    _patch(data, footer[3], claim)  # FileMetaData.num_rows
    if lie == "footer":
        return bytes(data)
    group = footer[4].value[0].value  # FileMetaData.row_groups[0]
    _patch(data, group[3], claim)  # RowGroup.num_rows
    for chunk in group[1].value:  # RowGroup.columns
        meta = chunk.value[3].value  # ColumnChunk.meta_data
        _patch(data, meta[5], claim)  # ColumnMetaData.num_values
        _patch(data, meta[6], 1024)  # total_uncompressed_size
        if lie in ("pages", "page sizes"):
            page = _struct(data, meta[9].value)  # the page at data_page_offset
            _patch(data, page[5].value[1], claim)  # DataPageHeader.num_values
            if lie == "page sizes":
                _patch(data, page[2], 1024)  # uncompressed_page_size
    return bytes(data)


def lying_arrow(rows: int, claim: int = 1) -> bytes:
    """An Arrow IPC stream of one zstd record batch of ``rows`` rows whose header declares
    ``claim`` rows, in the batch's length and in each column's (its FieldNodes)."""
    sink = io.BytesIO()
    table = zeros(rows)
    options = ipc.IpcWriteOptions(compression="zstd")
    with ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table, max_chunksize=rows)
    data = bytearray(sink.getvalue())
    honest, lie = struct.pack("<q", rows), struct.pack("<q", claim)
    header = data.index(b"\xff\xff\xff\xff", 8)  # the batch's message, after the schema's
    size = struct.unpack_from("<i", data, header + 4)[0]
    metadata = data[header + 8 : header + 8 + size]
    found = metadata.count(honest)
    assert found == 1 + table.num_columns, found  # RecordBatch.length and a FieldNode each
    data[header + 8 : header + 8 + size] = metadata.replace(honest, lie)
    return bytes(data)


@dataclass
class _Field:
    """A Thrift field's value and where its encoding lies."""

    value: object
    start: int
    end: int


def _struct(data: bytearray, position: int) -> dict[int, _Field]:
    return _read_struct(data, position)[0]


def _read_struct(data: bytearray, position: int) -> tuple[dict[int, _Field], int]:
    fields: dict[int, _Field] = {}
    last = 0
    while True:
        head = data[position]
        position += 1
        if head == 0:
            return fields, position
        kind, delta = head & 0x0F, head >> 4
        if delta:
            last += delta
        else:
            raw, position = _varint(data, position)
            last = (raw >> 1) ^ -(raw & 1)
        start = position
        value, position = _value(data, position, kind)
        fields[last] = _Field(value, start, position)


def _value(data: bytearray, position: int, kind: int) -> tuple[object, int]:
    if kind in (1, 2):  # a boolean field: its value is in the type
        return kind == 1, position
    if kind == 3:
        return data[position], position + 1
    if kind in (4, 5, 6):
        raw, position = _varint(data, position)
        return (raw >> 1) ^ -(raw & 1), position
    if kind == 7:
        return struct.unpack_from("<d", data, position)[0], position + 8
    if kind == 8:
        size, position = _varint(data, position)
        return bytes(data[position : position + size]), position + size
    if kind in (9, 10):
        head = data[position]
        position += 1
        size, element = head >> 4, head & 0x0F
        if size == 15:
            size, position = _varint(data, position)
        items = []
        for _ in range(size):
            start = position
            if element in (1, 2):
                item: object = data[position] == 1
                position += 1
            else:
                item, position = _value(data, position, element)
            items.append(_Field(item, start, position))
        return items, position
    if kind == 12:
        return _read_struct(data, position)
    raise ValueError(f"no Thrift compact type {kind} in a Parquet footer")


def _varint(data: bytearray, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def _patch(data: bytearray, field: _Field, value: int) -> None:
    """``value`` over an integer field, as a zigzag varint as long as the one it replaces."""
    size = field.end - field.start
    raw = (value << 1) ^ (value >> 63)
    encoded = bytearray()
    for i in range(size):
        encoded.append((raw & 0x7F) | (0x80 if i < size - 1 else 0))
        raw >>= 7
    assert raw == 0, f"{value} does not fit in {size} bytes"
    data[field.start : field.end] = encoded
