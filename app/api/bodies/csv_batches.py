"""CSV batches → numpy arrays, a piece at a time.

Header ``score,label[,weight]`` (binary) or ``score_0,...,score_{k-1},label[,weight]``
(multiclass), columns in any order (:mod:`app.api.bodies.column_names` answers any other); a
label or a weight may be ``true``/``false`` as in JSON
(:data:`~app.api.bodies.csv_columns.BOOLEAN_CELLS`). A C call holds the GIL from start to end
(``np.loadtxt`` over a million rows ~200 ms), so the body is read :data:`CSV_PIECE_BYTES` at a
time, with a :func:`~app.calibration.kernels.budget.checkpoint` between pieces; a piece that is
not plain numbers is read again with booleans in the label's and weight's columns, and only
one that is not that either goes through the csv module, which names the row and column of
what fails.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator, Mapping

import numpy as np
from numpy.typing import NDArray

from app.api.bodies.column_names import BATCH_COLUMNS, batch_columns, shown
from app.api.bodies.csv_columns import BOOLEAN_CELLS, Columns, boolean_or_number
from app.api.places import invalid
from app.calibration import checkpoint
from app.errors import InvalidInput, MalformedBody

CSV_PIECE_BYTES = 256 * 1024
"""Bytes of CSV per ``np.loadtxt`` call (some 20,000 rows, ~3 ms with the GIL held)."""

COUNT_STEP = 1 << 20
"""Bytes per ``bytes.count`` call when counting a CSV's lines (one over 100 MB takes 50 ms)."""

Converters = Mapping[int | str, Callable[[str], float]]
"""np.loadtxt's readers of some columns' cells, by position."""

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
        raise invalid(("body", field), f"is empty; expected the header {BATCH_COLUMNS}")
    written = [h.strip() for h in next(_csv_records(lines[:1], field, first=0))]
    header = [h.lower() for h in written]
    columns = Columns(batch_columns(header, field, written=written), capacity=_line_ends(data) + 1)
    booleans: Converters = dict.fromkeys(columns.boolean_columns, boolean_or_number)
    rows = lines[1:]
    while True:
        table = _plain_table(rows, len(header))
        if table is None and (rows := _nonblank(rows)):  # blank lines of spaces, booleans, worse
            table = _plain_table(rows, len(header), booleans)
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


def _line_ends(data: bytes) -> int:
    return sum(data.count(b"\n", i, i + COUNT_STEP) for i in range(0, len(data), COUNT_STEP))


def _nonblank(lines: list[str]) -> list[str]:
    return [line for line in lines if line.strip()]


def _rows_from(rows: list[str], pieces: Iterator[str]) -> Iterator[str]:
    yield from rows
    for piece in pieces:
        yield from _nonblank(piece.splitlines())


def _plain_table(
    lines: list[str], width: int, converters: Converters | None = None
) -> NDArray[np.float64] | None:
    """The numbers of ``lines``, a row per line but the empty ones (np.loadtxt skips those
    and refuses lines of spaces), or None when they are not plain numbers, ``width`` a row.
    ``converters`` read the cells of some columns (booleans in a label's): a Python call a
    cell, so a piece is first tried without."""
    empty = lines.count("")
    if empty == len(lines):
        return None
    try:
        table = np.loadtxt(
            lines, delimiter=",", dtype=np.float64, ndmin=2, comments=None, converters=converters
        )
    except ValueError:
        return None
    return table if table.shape == (len(lines) - empty, width) else None


def _read_cells(lines: Iterable[str], columns: Columns, header: list[str], field: str) -> None:
    """Read ``lines`` (the data rows from the first that is not plain numbers) with the csv
    module into ``columns``. The first row the csv module refuses is the error wherever it
    is; else the first row of the wrong width or with a cell that is not a number."""
    width = len(header)
    booleans = columns.boolean_columns
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
                values.append(boolean_or_number(cell) if c in booleans else float(cell))
            except ValueError:
                text = cell.strip()
                what = (
                    "a boolean; scores must be numbers" if text in BOOLEAN_CELLS else "not a number"
                )
                error = invalid(
                    ("body", field, "row", number, header[c]), f"is {shown(text)}, {what}"
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
