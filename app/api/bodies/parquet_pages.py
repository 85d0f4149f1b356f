"""The page headers of a Parquet column chunk, read without decompressing a page.

Each page of a column chunk starts with a ``PageHeader`` in Thrift's compact protocol
(parquet-format's ``parquet.thrift``): its type (field 1), the size the decompressor allocates
(``uncompressed_page_size``, 2), the bytes that follow the header (``compressed_page_size``, 3)
and, in the data or dictionary page's own header (fields 5, 7, 8), its ``num_values`` (their
field 1). pyarrow offers no way to bound a page before it is decompressed, so the reader of a
body (:mod:`app.api.bodies.parquet_body`) walks these headers itself: it is what a lying
footer cannot fake, since the decompressor allocates what the page header says.

Compact protocol: a field is a byte holding the field id's delta (high nibble; 0 means a
zigzag varint id follows) and its type (low nibble); integers are zigzag varints; a struct
ends at a 0 byte (thrift's ``TCompactProtocol``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

DATA_PAGE = 0
DICTIONARY_PAGE = 2
DATA_PAGE_V2 = 3
VALUE_HEADERS = {DATA_PAGE: 5, DICTIONARY_PAGE: 7, DATA_PAGE_V2: 8}
"""The PageHeader field holding each page type's own header, whose field 1 is num_values."""

MAX_DEPTH = 8
"""Nested structs a page header may hold (its statistics are two deep)."""

_FIXED = {1: 0, 2: 0, 3: 1, 7: 8}
"""Compact types of a fixed size: booleans (in the field byte), a byte, a double."""
_INTEGERS = (4, 5, 6)
_BINARY, _LIST, _SET, _MAP, _STRUCT = 8, 9, 10, 11, 12


@dataclass(frozen=True)
class Page:
    """A page header: its type, its size with the header, what it decompresses to, and its
    values (data and dictionary pages; 0 for others)."""

    kind: int
    size: int
    uncompressed: int
    values: int
    header: int = 0
    """The header's own bytes (``size`` less the compressed data that follows it)."""


def pages(data: bytes, start: int, end: int) -> Iterator[Page]:
    """The pages of the column chunk at ``data[start:end]``, in order (ValueError for a header
    that runs past ``end`` or cannot be read)."""
    reader = _Reader(data, end)
    position = start
    while position < end:
        fields, after = reader.struct(position, 0)
        kind, uncompressed, compressed = (fields.get(i) for i in (1, 2, 3))
        if not (isinstance(kind, int) and isinstance(uncompressed, int)):
            raise ValueError("a page header without its type or size")
        if not isinstance(compressed, int) or compressed < 0 or uncompressed < 0:
            raise ValueError("a page header with a negative size")
        own = fields.get(VALUE_HEADERS.get(kind, -1))
        values = own.get(1, 0) if isinstance(own, dict) else 0
        if not isinstance(values, int) or values < 0:
            raise ValueError("a page header with a negative number of values")
        header = position
        position = reader.within(after + compressed)
        yield Page(kind, position - header, uncompressed, values, after - header)


class _Reader:
    """Compact-protocol reading of ``data`` up to ``end``: a struct's integer fields and, at
    depth 0, its nested structs' integer fields; everything else skipped."""

    def __init__(self, data: bytes, end: int) -> None:
        self.data = data
        self.end = end

    def struct(self, position: int, depth: int) -> tuple[dict[int, object], int]:
        if depth > MAX_DEPTH:
            raise ValueError("a page header nested too deep")
        fields: dict[int, object] = {}
        last = 0
        while True:
            head = self.byte(position)
            position += 1
            if head == 0:
                return fields, position
            kind, delta = head & 0x0F, head >> 4
            if delta:
                last += delta
            else:
                raw, position = self.varint(position)
                last = _zigzag(raw)
            if kind in _INTEGERS:
                raw, position = self.varint(position)
                fields[last] = _zigzag(raw)
            elif kind == _STRUCT:
                nested, position = self.struct(position, depth + 1)
                if depth == 0:
                    fields[last] = nested
            else:
                position = self.skip(kind, position, depth)

    def skip(self, kind: int, position: int, depth: int) -> int:
        """The position after a value of compact type ``kind`` at ``position``."""
        if kind in _FIXED:
            return self.within(position + _FIXED[kind])
        if kind in _INTEGERS:
            return self.varint(position)[1]
        if kind == _BINARY:
            size, position = self.varint(position)
            return self.within(position + size)
        if kind == _STRUCT:
            return self.struct(position, depth + 1)[1]
        items: tuple[int, ...]  # the types of an element's parts: a value, or a key and a value
        if kind in (_LIST, _SET):
            head = self.byte(position)
            size, items = head >> 4, (head & 0x0F,)
            position += 1
            if size == 15:
                size, position = self.varint(position)
        elif kind == _MAP:
            size, position = self.varint(position)
            types = self.byte(position) if size else 0
            position += 1 if size else 0
            items = (types >> 4, types & 0x0F)
        else:
            raise ValueError(f"a page header holds an unknown type {kind}")
        # every element takes a byte at least: a size past the chunk is refused before the loop
        self.within(position + size * len(items))
        for _ in range(size):
            for item in items:  # a boolean element is a byte of its own
                position = (
                    self.within(position + 1)
                    if item in (1, 2)
                    else self.skip(item, position, depth + 1)
                )
        return position

    def varint(self, position: int) -> tuple[int, int]:
        value = shift = 0
        for _ in range(10):
            byte = self.byte(position)
            position += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value, position
            shift += 7
        raise ValueError("a page header's varint runs past 10 bytes")

    def byte(self, position: int) -> int:
        if not 0 <= position < self.end:
            raise ValueError("a page header runs past its column chunk")
        return self.data[position]

    def within(self, position: int) -> int:
        if position > self.end:
            raise ValueError("a page header runs past its column chunk")
        return position


def _zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)
