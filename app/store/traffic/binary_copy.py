"""PostgreSQL's binary ``COPY … TO STDOUT`` of rows of float8s, parsed by numpy.

After the 19-byte header (and its extension) each row is an int16 field count, then per
field an int32 length (8) and 8 big-endian bytes; an int16 -1 ends the data. Rows whose
fields are all float8 and never NULL (``TrafficReads`` casts them) have one size, so numpy
reads them as fixed-size records, with no Python object per row beyond the driver's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from app.calibration import FloatArray

COPY_BLOCKS = 100_000
"""Driver blocks joined and parsed at a time: psycopg hands over one block per row (a
``CopyData`` message each), so this many rows, about 6 MB of monitoring's."""


def copied_chunks(stream: Iterable[bytes | memoryview], width: int) -> Iterator[FloatArray]:
    """The rows of a binary ``COPY`` whose ``width`` fields are all float8 as float64 arrays
    of about :data:`COPY_BLOCKS` rows each. Any other layout (a NULL's length -1, data that
    ends early) is refused, not read shifted."""
    row = 2 + 12 * width
    parts: list[bytes] = []
    header: int | None = None
    for block in stream:
        parts.append(bytes(block))
        if header is None:
            start = b"".join(parts)
            if len(start) < 19 or len(start) < 19 + int.from_bytes(start[15:19], "big"):
                continue  # the header arrives in pieces: wait for the rest of it
            header = 19 + int.from_bytes(start[15:19], "big")
            parts = [start[header:]]
        elif len(parts) >= COPY_BLOCKS:
            data = b"".join(parts)
            whole = len(data) // row * row
            yield _rows(data[:whole], width)
            parts = [data[whole:]]
    rest = b"".join(parts)
    if header is None or rest[-2:] != b"\xff\xff" or (len(rest) - 2) % row:
        raise ValueError("binary COPY data ends early or holds rows that are not all float8")
    if len(rest) > 2:
        yield _rows(rest[:-2], width)


def _rows(data: bytes, width: int) -> FloatArray:
    """Whole rows, parsed, checked to hold ``width`` fields of 8 bytes each."""
    fields = [("count", ">i2")]
    for k in range(width):
        fields += [(f"size{k}", ">i4"), (f"value{k}", ">f8")]
    records = np.frombuffer(data, dtype=np.dtype(fields))
    sizes = [records[f"size{k}"] for k in range(width)]
    if np.any(records["count"] != width) or any(np.any(size != 8) for size in sizes):
        raise ValueError("binary COPY rows are not all float8: a NULL or another type")
    return np.column_stack([records[f"value{k}"] for k in range(width)]).astype(np.float64)
