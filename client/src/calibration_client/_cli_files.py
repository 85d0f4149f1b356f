"""The files ``calibration predict`` reads: CSV or Parquet with a ``score`` column (or
``score_0..score_{k-1}``) beside any others, which are passed through to its output as read."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from calibration_client._batches import PARQUET_MAGIC


class UnreadableFile(Exception):
    """A file that is missing, unreadable, or not a table of scores (a usage error: exit 2)."""


@dataclass(frozen=True)
class ScoresFile:
    """A table read from a file: its header, every cell as text (rows x columns), and its
    scores, (n,) from ``score`` or (n, k) from ``score_0..score_{k-1}``."""

    header: list[str]
    cells: NDArray[np.str_]
    scores: NDArray[np.float64]


def file_size(path: Path) -> int:
    """The size of the file at ``path`` in bytes (UnreadableFile when it is not a file)."""
    try:
        if not path.exists():
            raise UnreadableFile(f"{path}: no such file")
        if not path.is_file():
            raise UnreadableFile(f"{path}: not a regular file (a CSV or Parquet file is needed)")
        return path.stat().st_size
    except OSError as error:
        raise UnreadableFile(f"{path}: {error.strerror or error}") from None


def is_parquet(path: Path) -> bool:
    """Whether the file starts as Parquet does (else it is read as CSV)."""
    try:
        with path.open("rb") as head:
            return head.read(len(PARQUET_MAGIC)) == PARQUET_MAGIC
    except OSError as error:
        raise UnreadableFile(f"{path}: {error.strerror or error}") from None


def read_scores(path: Path) -> ScoresFile:
    """The table in ``path``, CSV or Parquet (UnreadableFile with the reason otherwise)."""
    file_size(path)
    header, cells = _parquet_cells(path) if is_parquet(path) else _csv_cells(path)
    columns = _score_columns(path, header)
    try:
        scores = cells[:, columns].astype(np.float64)
    except ValueError as error:
        raise UnreadableFile(f"{path}: a score is not a number ({error})") from None
    return ScoresFile(header, cells, scores[:, 0] if header[columns[0]] == "score" else scores)


def _csv_cells(path: Path) -> tuple[list[str], NDArray[np.str_]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise UnreadableFile(f"{path}: not a UTF-8 CSV file ({error})") from None
    rows = [row for row in csv.reader(io.StringIO(text)) if row]  # blank lines hold nothing
    if not rows:
        raise UnreadableFile(f"{path}: empty; expected a header row (score,...)")
    header, body = rows[0], rows[1:]
    try:
        cells = np.array(body, dtype=str).reshape(len(body), len(header))
    except ValueError:
        raise UnreadableFile(
            f"{path}: rows have different numbers of fields; the header has {len(header)}"
        ) from None
    return header, cells


def _parquet_cells(path: Path) -> tuple[list[str], NDArray[np.str_]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UnreadableFile(
            f"{path}: reading Parquet needs pyarrow (pip install 'calibration-client[arrow]')"
        ) from None
    try:
        table = pq.read_table(path)
    except Exception as error:  # pyarrow's errors have no common base but Exception
        raise UnreadableFile(f"{path}: not a readable Parquet file ({error})") from None
    columns = [_as_text(column) for column in table.columns]
    cells = np.column_stack(columns) if columns else np.empty((0, 0), dtype=str)
    return list(table.column_names), cells.reshape(table.num_rows, len(columns))


def _as_text(column: Any) -> NDArray[np.str_]:
    """A Parquet column as CSV text: numbers as numpy writes them (floats: the shortest text
    that reads back the same), other values as Arrow casts them, missing values empty."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        values: NDArray[Any] = column.to_numpy(zero_copy_only=False)
        return values.astype(str)
    text = pc.fill_null(pc.cast(column, pa.string()), "")
    return np.asarray(text.to_numpy(zero_copy_only=False)).astype(str)


def _score_columns(path: Path, header: list[str]) -> list[int]:
    """The indices of ``score``, else of ``score_0..score_{k-1}`` in order."""
    if "score" in header:
        return [header.index("score")]
    numbered: list[int] = []
    while f"score_{len(numbered)}" in header:
        numbered.append(header.index(f"score_{len(numbered)}"))
    if len(numbered) < 2:
        raise UnreadableFile(
            f"{path}: no score column; expected 'score', or 'score_0'..'score_{{k-1}}' "
            f"(found {', '.join(header) or 'no columns'})"
        )
    return numbered
