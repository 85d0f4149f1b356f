"""Batches as Parquet files or Arrow IPC streams: the columns of a CSV batch, typed.

Data scientists hold their batches in pandas or Polars and save them as Parquet; an Arrow
stream is what those libraries write without a file. The columns are the CSV's
(:mod:`app.api.bodies.column_names`): ``score``, ``label``, optional ``weight``, or
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
from numpy.typing import NDArray

from app.api.bodies.arrow_body import read_arrow
from app.api.bodies.column_names import batch_columns
from app.api.bodies.columnar_checks import Limits, check_type
from app.api.bodies.parquet_body import read_parquet
from app.api.places import invalid
from app.errors import MalformedBody

PARQUET = "application/vnd.apache.parquet"
ARROW_STREAM = "application/vnd.apache.arrow.stream"
COLUMNAR_TYPES = (PARQUET, ARROW_STREAM)


def parse_columnar(
    data: bytes, kind: str, *, field: str = "body", max_rows: int
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64] | None]:
    """A Parquet file or an Arrow IPC stream (``kind``, a media type of
    :data:`COLUMNAR_TYPES`) → (scores, labels, weights), as :func:`parse_csv` gives them.
    Compressed columns can inflate far past the body's size, so the columns' names and types
    are checked from the schema and the rows counted (413 past ``max_rows``, or past the
    numbers of :class:`~app.api.bodies.columnar_checks.Limits`) before anything is
    decompressed (:func:`_table`)."""
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
    and the rows counted (a 100 KB compressed file may hold 10^9 rows or strings of 1 GB),
    and the rows are those the body really holds, not those its metadata declares (a footer,
    a row group or a record batch may claim 1 row over 10^8): :mod:`app.api.bodies.parquet_body`,
    :mod:`app.api.bodies.arrow_body`."""
    what = "a Parquet file" if kind == PARQUET else "an Arrow IPC stream (or file)"
    limits = Limits(max_rows)
    try:
        if kind == PARQUET:
            return read_parquet(data, field, limits)
        return read_arrow(data, field, limits)
    except MemoryError:  # pyarrow's ArrowMemoryError is an ArrowException too: not malformed
        raise
    except (pa.ArrowException, OSError, ValueError, struct.error, IndexError) as exc:
        raise MalformedBody(f"{field} is not {what}: {str(exc)[:200]}") from None


def _numbers(
    table: pa.Table, name: str, field: str, *, booleans: bool = True
) -> NDArray[np.float64]:
    """Column ``name`` as float64: integers, floats or (with ``booleans``) booleans, without
    nulls."""
    column = table.column(name)
    check_type(column.type, name, field, booleans=booleans)
    if column.null_count:
        first = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise invalid(("body", field, "row", first + 1, name), "is null; expected a number")
    values: NDArray[np.float64] = _values(column).astype(np.float64, copy=False)
    return values


def _values(column: pa.ChunkedArray) -> NDArray[Any]:
    """A column of numbers without nulls as numpy, integers and floats read off their Arrow
    buffers: pyarrow's ``to_numpy`` first imports pandas where it is installed, ~1 s in each
    new worker process (whose first Parquet fit took 1.1 s instead of 0.1 s). Booleans, packed
    a bit a value, go through ``to_numpy``."""
    kind = column.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        booleans: NDArray[Any] = column.to_numpy(zero_copy_only=False)
        return booleans
    letter = "f" if pa.types.is_floating(kind) else "i" if pa.types.is_signed_integer(kind) else "u"
    dtype = np.dtype(f"{letter}{kind.bit_width // 8}")
    parts = [
        np.frombuffer(chunk.buffers()[1], dtype, len(chunk), chunk.offset * dtype.itemsize)
        for chunk in column.chunks
        if len(chunk)  # an empty chunk may have no buffer
    ]
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.empty(0, dtype)
