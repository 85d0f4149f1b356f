"""An Arrow IPC stream (or file) body read message by message, each record batch checked from
its header before its buffers are decompressed.

A record batch's header (format/Message.fbs, a flatbuffer) declares its rows (``length``),
each column's rows and nulls (``nodes``) and where each buffer lies in the message's body
(``buffers``). With body compression (LZ4 or ZSTD) each buffer starts with the int64 length it
decompresses to (-1: stored as is), which is what pyarrow allocates, whatever the rows. So
before a batch is decoded, its columns' rows must be its rows, and no buffer may decompress
to more than its rows need (a column of primitives has a validity bitmap and its values,
each padded to 64 bytes at most); all the batches' rows count against the limits
(:class:`~app.api.bodies.columnar_checks.Limits`) before the first is decoded, and each
batch's rows as read against its header's after, with a
:func:`~app.calibration.checkpoint` between batches.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from app.api.bodies.columnar_checks import Limits, checked_columns, disagrees
from app.calibration import checkpoint

ARROW_FILE_MAGIC = b"ARROW1\0\0"
"""How the Arrow IPC *file* format (``.arrow``, Feather v2) begins: its magic, padded to 8
bytes, then the stream format (ending in its end-of-stream marker), then a footer, so the
stream after the magic is read as any stream is."""
BUFFER_PADDING = 64
"""Writers pad a buffer to 8 or 64 bytes; a buffer may hold that much past its rows' need."""
MESSAGES_PER_CHECKPOINT = 1024


def read_arrow(data: bytes, field: str, limits: Limits) -> pa.Table:
    """The batch's columns of the Arrow IPC stream or file ``data``: 422 for a record batch
    whose columns or buffers disagree with its rows, 413 past ``limits``."""
    if data.startswith(ARROW_FILE_MAGIC):  # the file format: its stream follows
        data = data[len(ARROW_FILE_MAGIC) :]
    reader = ipc.MessageReader.open_stream(pa.BufferReader(data))
    first = _next(reader)
    if first is None:
        raise ValueError("no schema message")
    schema = ipc.read_schema(first)
    checked_columns(schema, field)  # every column is the batch's: batch_columns refuses others
    messages: list[tuple[Any, int]] = []
    rows = 0
    while (message := _next(reader)) is not None:
        if message.type != "record batch":  # a dictionary batch: no numbers column has one
            raise ValueError(f"a {message.type} message in a stream of numbers")
        length = _checked_batch(message, schema, field, len(messages))
        rows += length
        limits.check(rows, len(schema), field)
        messages.append((message, length))
        if len(messages) % MESSAGES_PER_CHECKPOINT == 0:
            checkpoint()
    batches = []
    for index, (message, length) in enumerate(messages):
        checkpoint()
        batch = ipc.read_record_batch(message, schema)
        if batch.num_rows != length:
            raise disagrees(field, f"record batch {index} declares {length} rows, holds more")
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=schema)


def _next(reader: ipc.MessageReader) -> Any:
    """The stream's next message, or None at its end."""
    try:
        return reader.read_next_message()
    except StopIteration:
        return None


def _checked_batch(message: Any, schema: pa.Schema, field: str, index: int) -> int:
    """The rows of record batch ``message`` (the ``index``-th), read from its header: 422 when
    a column's rows are not its rows or a buffer decompresses to more than they need."""
    metadata = message.metadata.to_pybytes()
    header = _Table(metadata, _unpack("<I", metadata, 0)).table(2)  # Message.header
    if header is None:
        raise ValueError("a record batch message without its header")
    length = header.long(0)
    nodes, buffers = header.pairs(1), header.pairs(2)
    compressed = header.field(3) is not None  # RecordBatch.compression
    where = f"record batch {index} of {length} rows"
    if length < 0 or len(nodes) != len(schema) or len(buffers) != 2 * len(schema):
        raise disagrees(
            field,
            f"{where} has {len(nodes)} columns of {len(buffers)} buffers for a "
            f"schema of {len(schema)} columns of 2 buffers",
        )
    body = memoryview(message.body) if message.body is not None else memoryview(b"")
    for column, (rows, nulls) in enumerate(nodes):
        name = schema.names[column]
        if rows != length or not 0 <= nulls <= rows:
            raise disagrees(field, f"{where} has {rows} rows and {nulls} nulls in column {name}")
        bits = schema.types[column].bit_width
        for (offset, size), width in zip(
            buffers[2 * column : 2 * column + 2], (1, bits), strict=True
        ):
            if offset < 0 or size < 0 or offset + size > len(body):
                raise ValueError("a buffer lies outside its message's body")
            decoded = size
            if compressed and size:
                prefix = _unpack("<q", body, offset) if size >= 8 else 0
                decoded = size - 8 if prefix == -1 else prefix
            needed = (length * width + 7) // 8
            most = (needed + BUFFER_PADDING - 1) // BUFFER_PADDING * BUFFER_PADDING
            if decoded > most:
                raise disagrees(
                    field,
                    f"{where} holds a buffer of {decoded} bytes in column {name} (at most {most})",
                )
    return length


class _Table:
    """A flatbuffer table of ``buffer`` at ``position``: it starts with the signed offset back
    to its vtable, [vtable size, table size, field offsets...] as uint16, a field's offset 0
    meaning absent (the flatbuffers binary format)."""

    def __init__(self, buffer: bytes, position: int) -> None:
        self.buffer = buffer
        self.position = position
        self.vtable = position - _unpack("<i", buffer, position)
        self.size = _unpack("<H", buffer, self.vtable)

    def field(self, index: int) -> int | None:
        """Where field ``index`` lies, None when absent."""
        entry = 4 + 2 * index
        if entry + 2 > self.size:
            return None
        offset: int = _unpack("<H", self.buffer, self.vtable + entry)
        return self.position + offset if offset else None

    def long(self, index: int) -> int:
        """Field ``index``, an int64 (absent: 0)."""
        at = self.field(index)
        return 0 if at is None else _unpack("<q", self.buffer, at)

    def table(self, index: int) -> _Table | None:
        """Field ``index``, a table."""
        at = self.field(index)
        return None if at is None else _Table(self.buffer, at + _unpack("<I", self.buffer, at))

    def pairs(self, index: int) -> list[tuple[int, int]]:
        """Field ``index``, a vector of structs of two int64 (FieldNode, Buffer)."""
        at = self.field(index)
        if at is None:
            return []
        vector = at + _unpack("<I", self.buffer, at)
        count: int = _unpack("<I", self.buffer, vector)
        if vector + 4 + 16 * count > len(self.buffer):
            raise ValueError("a vector runs past its message's header")
        return [struct.unpack_from("<qq", self.buffer, vector + 4 + 16 * i) for i in range(count)]


def _unpack(layout: str, buffer: bytes | memoryview, position: int) -> Any:
    """One value at ``position`` (struct.error past the end; ValueError before the start)."""
    if position < 0:
        raise ValueError("an offset before the start of its buffer")
    return struct.unpack_from(layout, buffer, position)[0]
