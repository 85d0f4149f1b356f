"""A Parquet body read row group by row group, each checked from its pages before it is read.

A footer's row count is the client's word, and pyarrow trusts it: it reads as many rows of a
row group as the row group declares, decompressing each page to the size its header gives.
So before any row group is read, for each column that will be read, the headers of the pages
pyarrow will decompress (:func:`~app.api.bodies.parquet_pages.pages`) are checked: their
values must add up to the row group's rows, a dictionary may not hold more values than that,
and no page may decompress to more than its values need (:func:`page_allowance`). The rows
declared count against the limits (:class:`~app.api.bodies.columnar_checks.Limits`) before
anything is decompressed, the rows read against those declared after each row group, with a
:func:`~app.calibration.checkpoint` between row groups.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from app.api.bodies.columnar_checks import Limits, checked_columns, disagrees
from app.api.bodies.parquet_pages import DATA_PAGE, DATA_PAGE_V2, DICTIONARY_PAGE, pages
from app.api.places import invalid
from app.calibration import checkpoint

PAGE_SLACK = 1024
"""Bytes a page may decompress to beyond its values: levels' and encodings' headers."""
CHUNK_SLACK = 64 * 1024
"""Bytes a column chunk may decompress to beyond its values: its pages' headers."""
PAGES_PER_CHECKPOINT = 1024

_BITS = {"BOOLEAN": 1, "INT32": 32, "FLOAT": 32, "INT64": 64, "DOUBLE": 64, "INT96": 96}
"""Bits a value of each physical type takes (FIXED_LEN_BYTE_ARRAY: its length in bytes)."""


def read_parquet(data: bytes, field: str, limits: Limits) -> pa.Table:
    """The batch's columns of the Parquet file ``data``: 422 for a file whose row groups hold
    other numbers of rows than they declare, 413 past ``limits``."""
    parquet = pq.ParquetFile(pa.BufferReader(data))
    needed = checked_columns(parquet.schema_arrow, field)
    metadata = parquet.metadata
    leaves = _leaves(parquet, needed, field)
    rows = 0
    for group in range(metadata.num_row_groups):  # all checked before any is decompressed
        checkpoint()
        declared = metadata.row_group(group).num_rows
        if declared < 0:
            raise disagrees(field, f"row group {group} declares {declared} rows")
        rows += declared
        limits.check(rows, len(needed), field)
        for name, (leaf, bits) in zip(needed, leaves, strict=True):
            _check_chunk(data, metadata.row_group(group).column(leaf), declared, bits, field, name)
    if rows != metadata.num_rows:
        raise disagrees(
            field, f"its footer declares {metadata.num_rows} rows, its row groups {rows}"
        )
    tables = []
    for group in range(metadata.num_row_groups):
        checkpoint()
        declared = metadata.row_group(group).num_rows
        table = parquet.read_row_group(group, columns=needed)
        if table.num_rows != declared:
            raise disagrees(
                field, f"row group {group} declares {declared} rows and holds {table.num_rows}"
            )
        tables.append(table)
    if not tables:
        return parquet.schema_arrow.empty_table().select(needed)
    return pa.concat_tables(tables)


def page_allowance(values: int, bits: int) -> int:
    """The most a page of ``values`` values of ``bits`` bits may decompress to: the values, a
    byte each for their levels and encoding (RLE runs, delta blocks, dictionary indices no
    wider than the values), and :data:`PAGE_SLACK`."""
    return (values * (bits + 8) + 7) // 8 + PAGE_SLACK


def chunk_allowance(rows: int, bits: int) -> int:
    """The most a column chunk of ``rows`` rows may decompress to, headers included: its
    dictionary (at most a value a row), its data pages, and :data:`CHUNK_SLACK`."""
    return (rows * (2 * bits + 8) + 7) // 8 + CHUNK_SLACK


def _leaves(parquet: pq.ParquetFile, names: list[str], field: str) -> list[tuple[int, int]]:
    """The leaf column (its index in each row group) and its bits, of each of ``names``."""
    schema = parquet.schema
    index = {schema.column(j).path: j for j in range(len(schema))}
    leaves = []
    for name in names:
        if name not in index:
            raise invalid(("body", field, "column", name), "is nested; expected numbers")
        column = schema.column(index[name])
        physical = column.physical_type
        bits = 8 * column.length if physical == "FIXED_LEN_BYTE_ARRAY" else _BITS.get(physical)
        if not bits:
            raise invalid(("body", field, "column", name), f"is stored as {physical}")
        leaves.append((index[name], bits))
    return leaves


def _check_chunk(data: bytes, chunk: Any, rows: int, bits: int, field: str, name: str) -> None:
    """422 unless column ``name``'s chunk holds ``rows`` values in pages no larger than their
    values need (:func:`page_allowance`, :func:`chunk_allowance`), from its metadata and then
    from the headers of the pages pyarrow reads: up to the page where ``rows`` values are
    reached, as pyarrow stops there. Nothing is decompressed."""
    where = f"column {name} of a row group of {rows} rows"
    allowed = chunk_allowance(rows, bits)
    if chunk.num_values != rows:
        raise disagrees(field, f"{where} declares {chunk.num_values} values")
    if chunk.total_uncompressed_size > allowed:
        raise disagrees(
            field, f"{where} declares {chunk.total_uncompressed_size} bytes (at most {allowed})"
        )
    if rows == 0:
        return
    start = chunk.data_page_offset
    if chunk.has_dictionary_page and 0 < chunk.dictionary_page_offset < start:
        start = chunk.dictionary_page_offset  # pyarrow's column chunk range, the same way
    end = start + chunk.total_compressed_size
    if start < 0 or chunk.total_compressed_size < 0 or end > len(data):
        raise ValueError(f"column {name}'s chunk lies outside the file")
    values = total = 0
    for count, page in enumerate(pages(data, start, end), start=1):
        if count % PAGES_PER_CHECKPOINT == 0:
            checkpoint()
        if count > rows + 2:  # a dictionary, an index page: the walk is bounded by the rows
            raise disagrees(field, f"{where} holds more pages than rows")
        if page.kind not in (DATA_PAGE, DATA_PAGE_V2, DICTIONARY_PAGE):
            continue  # pyarrow skips other pages (index pages) undecompressed
        total += page.header + page.uncompressed  # as total_uncompressed_size counts
        if page.kind != DICTIONARY_PAGE:
            values += page.values
        if values > rows or page.values > rows:
            raise disagrees(field, f"{where} holds pages of more values than that")
        most = page_allowance(page.values, bits)
        if page.uncompressed > most:
            raise disagrees(
                field,
                f"{where} holds a page of {page.values} values that decompresses to "
                f"{page.uncompressed} bytes (at most {most})",
            )
        if total > allowed:
            raise disagrees(field, f"{where} holds pages of {total} bytes (at most {allowed})")
        if values == rows:
            return
    raise disagrees(field, f"{where} holds pages of {values} values")
