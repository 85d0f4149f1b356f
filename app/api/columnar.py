"""Batches as Parquet files or Arrow IPC streams: the columns of a CSV batch, typed.

Data scientists hold their batches in pandas or Polars and save them as Parquet; an Arrow
stream is what those libraries write without a file. The columns are the CSV's
(:mod:`app.api.csv_batches`): ``score``, ``label``, optional ``weight``, or
``score_0..score_{k-1}``, ``label``. Each must be numbers (integers, floats or booleans) with
no nulls; errors name the column and the first bad row (1 = the first row), and a file
without rows is refused. pyarrow reads the columns straight into float64 arrays, so a
10^7-row batch never exists as text or Python objects.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from numpy.typing import NDArray

from app.errors import MalformedBody, PayloadTooLarge, invalid

from .csv_batches import batch_columns

PARQUET = "application/vnd.apache.parquet"
ARROW_STREAM = "application/vnd.apache.arrow.stream"
COLUMNAR_TYPES = (PARQUET, ARROW_STREAM)


def parse_columnar(
    data: bytes, kind: str, *, field: str = "body", max_rows: int
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64] | None]:
    """A Parquet file or an Arrow IPC stream (``kind``, a media type of
    :data:`COLUMNAR_TYPES`) → (scores, labels, weights), as :func:`parse_csv` gives them.
    Compressed columns can inflate far past the body's size, so the rows are counted before
    they are read: a Parquet file's from its footer, an Arrow stream's batch by batch (413
    past ``max_rows``); and the columns are checked first, from the schema."""
    table = _table(data, kind, field, max_rows)
    names = table.column_names
    columns = batch_columns(names, field)
    if table.num_rows == 0:
        raise invalid(("body", field), "has no rows")
    scores = np.column_stack([_numbers(table, names[i], field) for i in columns["scores"]])
    labels = _numbers(table, names[columns["label"][0]], field)
    weights = _numbers(table, "weight", field) if columns["weight"] else None
    return (scores[:, 0] if scores.shape[1] == 1 else scores), labels, weights


def _table(data: bytes, kind: str, field: str, max_rows: int) -> pa.Table:
    """The table in ``data``, of at most ``max_rows`` rows; 400 when it is no Parquet file or
    Arrow stream."""
    what = "a Parquet file" if kind == PARQUET else "an Arrow IPC stream"
    try:
        if kind == PARQUET:
            parquet = pq.ParquetFile(pa.BufferReader(data))
            batch_columns(parquet.schema_arrow.names, field)  # before anything is read
            _check_rows(parquet.metadata.num_rows, max_rows, field)
            return parquet.read()
        with ipc.open_stream(pa.BufferReader(data)) as reader:
            batch_columns(reader.schema.names, field)
            batches, rows = [], 0
            for batch in reader:
                rows += batch.num_rows
                _check_rows(rows, max_rows, field)
                batches.append(batch)
            return pa.Table.from_batches(batches, schema=reader.schema)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise MalformedBody(f"{field} is not {what}: {str(exc)[:200]}") from None


def _check_rows(rows: int, max_rows: int, field: str) -> None:
    if rows > max_rows:
        raise PayloadTooLarge(f"{field} has {rows} rows or more; the limit is {max_rows}")


def _numbers(table: pa.Table, name: str, field: str) -> NDArray[np.float64]:
    """Column ``name`` as float64: integers, floats or booleans, without nulls."""
    column = table.column(name)
    kind: Any = column.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
        raise invalid(("body", field, "column", name), f"is of type {kind}; expected numbers")
    if column.null_count:
        first = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise invalid(("body", field, "row", first + 1, name), "is null; expected a number")
    values: NDArray[np.float64] = column.to_numpy(zero_copy_only=False).astype(
        np.float64, copy=False
    )
    return values
