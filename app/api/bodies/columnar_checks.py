"""What a Parquet file or an Arrow stream may hold, checked from what it really holds.

A columnar body's metadata is the client's word: a Parquet footer or row group may declare 1
row over pages of 10^8 values, an Arrow record batch 1 row over buffers that decompress to
800 MB. The readers (:mod:`app.api.bodies.parquet_body`, :mod:`app.api.bodies.arrow_body`)
therefore check the sizes the decoder will allocate (each Parquet page's header, each Arrow
buffer's length) against the rows declared, before anything is decompressed, and the rows
decoded against the rows declared after; a body whose parts disagree is 422. Rows past
:attr:`Limits.max_rows`, or numbers past :attr:`Limits.max_numbers`, are 413.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from app.api.bodies.column_names import batch_columns
from app.api.places import invalid
from app.errors import InvalidInput, PayloadTooLarge

MIN_DECODED_BYTES = 256 * 1024 * 1024
"""The float64 arrays a columnar body may decode to, at least: 2^25 numbers, which is what the
largest CSV body of the default 64 MiB holds at most (a digit and a comma a number)."""


@dataclass(frozen=True)
class Limits:
    """What one columnar body may hold: ``max_rows`` rows (the settings' row limit) and, over
    all its columns, :attr:`max_numbers` numbers."""

    max_rows: int

    @property
    def max_decoded_bytes(self) -> int:
        """The larger of :data:`MIN_DECODED_BYTES` and the arrays of a binary batch with weights
        at the row limit (3 float64 columns): the batch's arrays as the service holds them."""
        return max(MIN_DECODED_BYTES, 3 * 8 * self.max_rows)

    @property
    def max_numbers(self) -> int:
        """Rows times columns, at most (each becomes a float64)."""
        return self.max_decoded_bytes // 8

    def check(self, rows: int, columns: int, field: str) -> None:
        """413 when ``rows`` of ``columns`` columns pass either limit."""
        if rows > self.max_rows:
            raise PayloadTooLarge(f"{field} has {rows} rows or more; the limit is {self.max_rows}")
        if rows * columns > self.max_numbers:
            raise PayloadTooLarge(
                f"{field} has {rows} rows of {columns} columns or more, "
                f"{rows * columns * 8} bytes as numbers; the limit is {self.max_decoded_bytes}"
            )


def disagrees(field: str, what: str) -> InvalidInput:
    """The 422 of a body whose parts disagree (a row group's pages hold more rows than the row
    group declares; a record batch's buffers are larger than its length needs)."""
    return invalid(("body", field), f"is malformed: {what}")


def checked_columns(schema: pa.Schema, field: str) -> list[str]:
    """The batch's columns in ``schema`` (422 for a missing or unknown one, or one that does
    not hold numbers), by name: the scores first, then the label and the weight."""
    names = schema.names
    columns = batch_columns(names, field)
    scores = [names[i] for i in columns["scores"]]
    for name in scores:
        check_type(schema.field(name).type, name, field, booleans=False)
    others = [names[i] for i in (*columns["label"], *columns["weight"])]
    for name in others:
        check_type(schema.field(name).type, name, field)
    return scores + others


def check_type(kind: Any, name: str, field: str, *, booleans: bool = True) -> None:
    """422 unless column ``name`` holds numbers (or, with ``booleans``, booleans as 0/1)."""
    if pa.types.is_boolean(kind) and not booleans:
        raise invalid(
            ("body", field, "column", name), "is a boolean column; scores must be numbers"
        )
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
        raise invalid(("body", field, "column", name), f"is of type {kind}; expected numbers")
