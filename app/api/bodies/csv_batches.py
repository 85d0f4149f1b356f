"""CSV batches → numpy arrays, a piece at a time.

Header ``score,label[,weight]`` (binary) or ``score_0,...,score_{k-1},label[,weight]``
(multiclass), columns in any order. A C call holds the GIL from start to end (``np.loadtxt``
over a million rows ~200 ms), so the body is read :data:`CSV_PIECE_BYTES` at a time, with a
:func:`~app.calibration.kernels.budget.checkpoint` between pieces; only a piece that is not plain
numbers goes through the csv module, which names the row and column of what fails.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Mapping

import numpy as np
from numpy.typing import NDArray

from app.api.bodies.csv_columns import Columns
from app.api.places import invalid
from app.calibration import checkpoint
from app.errors import InvalidInput, MalformedBody

CSV_PIECE_BYTES = 256 * 1024
"""Bytes of CSV per ``np.loadtxt`` call (some 20,000 rows, ~3 ms with the GIL held)."""

COUNT_STEP = 1 << 20
"""Bytes per ``bytes.count`` call when counting a CSV's lines (one over 100 MB takes 50 ms)."""

CSV_BLOCK_ROWS = 4096
"""Rows read by the csv module (quoted cells) between two stores into the columns."""


def parse_csv(
    data: bytes, *, field: str = "file"
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64] | None]:
    """A CSV batch → (scores, labels, weights).

    Header ``score,label[,weight]`` (binary) or ``score_0,...,score_{k-1},label[,weight]``
    (multiclass); columns may come in any order. Errors name the data row (1 = first row
    after the header, blank lines not counted) and the column.
    """
    pieces = _Utf8Pieces(data, field)
    try:
        return _read_csv(pieces, data, field)
    except InvalidInput as exc:
        error = exc
    pieces.check_rest()  # bytes that are not UTF-8 anywhere are the 400, before any 422
    raise error


class _Utf8Pieces(Iterator[str]):
    """``data`` decoded :data:`CSV_PIECE_BYTES` at a time, each piece cut just after a line
    end, so that a line never straddles two pieces and ``piece.splitlines()`` gives the lines
    that splitting the whole text gives. (A cut between ``\\r`` and ``\\n`` only adds a blank
    line, which the reader skips.) A cut falls after an ASCII byte, so decoding piece by piece
    finds the first bad byte, and the same reason, as decoding the whole."""

    def __init__(self, data: bytes, field: str) -> None:
        self._data = data
        self._field = field
        self._start = 0
        self._newlines = True  # False once no b"\n" is left past the cut

    def __next__(self) -> str:
        start = self._start
        if start >= len(self._data):
            raise StopIteration
        self._start = end = self._cut(start + CSV_PIECE_BYTES)
        try:
            return self._data[start:end].decode("utf-8-sig" if start == 0 else "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedBody(f"{self._field}: the CSV is not UTF-8 ({exc.reason})") from None

    def _cut(self, at: int) -> int:
        data = self._data
        if at >= len(data):
            return len(data)
        end = data.find(b"\n", at) if self._newlines else -1
        if end < 0:
            self._newlines = False
            end = data.find(b"\r", at)  # old Mac line ends; else the rest is one piece
        return len(data) if end < 0 else end + 1

    def check_rest(self) -> None:
        """Decode the pieces not read yet (:class:`MalformedBody` at the first bad byte)."""
        for _ in self:
            pass


def _read_csv(
    pieces: _Utf8Pieces, data: bytes, field: str
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64] | None]:
    lines = next(pieces, "").splitlines()
    if not lines or not lines[0].strip():
        raise invalid(("body", field), "is empty; expected a header row 'score,label'")
    header = [h.strip().lower() for h in next(_csv_records(lines[:1], field, first=0))]
    columns = Columns(batch_columns(header, field), capacity=_line_ends(data) + 1)
    rows = lines[1:]
    while True:
        table = _plain_table(rows, len(header))
        if table is None and (rows := _nonblank(rows)):  # blank lines of spaces, or worse
            table = _plain_table(rows, len(header))
            if table is None:  # quoted cells, a ragged row, a word: the csv module reads on
                _read_cells(_rows_from(rows, pieces), columns, header, field)
                break
        if table is not None:
            columns.add(table)
        checkpoint()
        piece = next(pieces, None)
        if piece is None:
            break
        rows = piece.splitlines()
    if columns.rows == 0:
        raise invalid(("body", field), "has a header but no data rows")
    return columns.arrays()


def batch_columns(header: list[str], field: str) -> Mapping[str, list[int]]:
    """The positions of a batch's columns by role (``scores``, ``label``, ``weight``), from
    its column names (a CSV header, a Parquet or Arrow schema); 422 naming the problem."""
    known = {"score", "label", "weight"}
    multi = sorted(
        (index, i) for i, h in enumerate(header) if (index := _class_column(h)) is not None
    )
    for i, name in enumerate(header):
        if name not in known and _class_column(name) is None:
            shown = name if len(name) <= 40 else f"{name[:40]}..."
            raise invalid(("body", field, "header", i), f"unknown column {shown!r}")
    if len(set(header)) != len(header):
        raise invalid(("body", field, "header"), "repeats a column name")
    if "label" not in header:
        raise invalid(("body", field, "header"), "has no 'label' column")
    if "score" in header and multi:
        raise invalid(("body", field, "header"), "mixes 'score' with 'score_0..'")
    if multi:
        if [j for j, _ in multi] != list(range(len(multi))):
            raise invalid(
                ("body", field, "header"), "multiclass columns must be score_0..score_{k-1}"
            )
        score_cols = [i for _, i in multi]
    elif "score" in header:
        score_cols = [header.index("score")]
    else:
        raise invalid(("body", field, "header"), "has no 'score' column")
    weight = [header.index("weight")] if "weight" in header else []
    return {"scores": score_cols, "label": [header.index("label")], "weight": weight}


def _class_column(name: str) -> int | None:
    """j for a column named ``score_j`` (j of at most 6 ASCII digits: more classes are refused
    anyway, and "²" is a digit to ``str.isdigit``, not to ``int``), else None."""
    digits = name.removeprefix("score_")
    if digits == name or not (digits.isascii() and digits.isdigit()) or len(digits) > 6:
        return None
    return int(digits)


def _line_ends(data: bytes) -> int:
    return sum(data.count(b"\n", i, i + COUNT_STEP) for i in range(0, len(data), COUNT_STEP))


def _nonblank(lines: list[str]) -> list[str]:
    return [line for line in lines if line.strip()]


def _rows_from(rows: list[str], pieces: Iterator[str]) -> Iterator[str]:
    yield from rows
    for piece in pieces:
        yield from _nonblank(piece.splitlines())


def _plain_table(lines: list[str], width: int) -> NDArray[np.float64] | None:
    """The numbers of ``lines``, a row per line but the empty ones (np.loadtxt skips those
    and refuses lines of spaces), or None when they are not plain numbers, ``width`` a row."""
    empty = lines.count("")
    if empty == len(lines):
        return None
    try:
        table = np.loadtxt(lines, delimiter=",", dtype=np.float64, ndmin=2, comments=None)
    except ValueError:
        return None
    return table if table.shape == (len(lines) - empty, width) else None


def _read_cells(lines: Iterable[str], columns: Columns, header: list[str], field: str) -> None:
    """Read ``lines`` (the data rows from the first that is not plain numbers) with the csv
    module into ``columns``. The first row the csv module refuses is the error wherever it
    is; else the first row of the wrong width or with a cell that is not a number."""
    width = len(header)
    error: InvalidInput | None = None
    block: list[list[float]] = []
    first = columns.rows + 1
    for number, row in enumerate(_csv_records(lines, field, first=first), start=first):
        if (number - first) % CSV_BLOCK_ROWS == CSV_BLOCK_ROWS - 1:
            checkpoint()
        if error is not None:
            continue
        if len(block) == CSV_BLOCK_ROWS:
            columns.add(np.array(block))
            block.clear()
        if len(row) != width:
            error = invalid(
                ("body", field, "row", number), f"has {len(row)} fields; the header has {width}"
            )
            continue
        values: list[float] = []
        for c, cell in enumerate(row):
            try:
                values.append(float(cell))
            except ValueError:
                shown = cell.strip() if len(cell) <= 40 else f"{cell.strip()[:40]}..."
                error = invalid(
                    ("body", field, "row", number, header[c]), f"is {shown!r}, not a number"
                )
                break
        else:
            block.append(values)
    if error is not None:
        raise error
    if block:
        columns.add(np.array(block))


def _csv_records(lines: Iterable[str], field: str, *, first: int) -> Iterator[list[str]]:
    """The cells of CSV ``lines`` (row numbers from ``first`` in errors: 0 is the header)."""
    reader = csv.reader(lines)
    number = first
    while True:
        try:
            row = next(reader, None)
        except csv.Error as exc:  # e.g. a field over the csv module's 131072-character limit
            where = ("header",) if number == 0 else ("row", number)
            raise invalid(("body", field, *where), f"cannot be read as CSV: {exc}") from None
        if row is None:
            return
        yield row
        number += 1
