"""Outcomes as CSV: a header ``id,label`` (either order), then one outcome per row; a label is
a class index, or ``true``/``false`` as in a batch's CSV
(:data:`~app.api.bodies.csv_columns.BOOLEAN_CELLS`)."""

from __future__ import annotations

import csv
import io

from app.api.bodies.column_names import OUTCOME_COLUMNS, check_pandas_mistakes, shown, wrong_header
from app.api.bodies.csv_columns import BOOLEAN_CELLS
from app.api.bodies.fields import MAX_CLIENT_ID
from app.api.places import invalid
from app.errors import MalformedBody

_BOOLEAN_LABELS = {cell: str(int(value)) for cell, value in BOOLEAN_CELLS.items()}


def outcomes_csv(data: bytes) -> tuple[list[str], list[int]]:
    """The ids and labels of a CSV body; errors name the row (1 = the first after the
    header) and the column."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MalformedBody(f"body: the CSV is not UTF-8 ({exc.reason})") from None
    rows = csv.reader(io.StringIO(text))
    try:
        id_at, label_at = _columns([cell.strip() for cell in next(rows, [])])
        ids: list[str] = []
        labels: list[int] = []
        for number, row in enumerate((r for r in rows if any(c.strip() for c in r)), 1):
            if len(row) != 2:
                raise invalid(("body", "row", number), f"has {len(row)} fields; expected 2")
            client_id, label = row[id_at], row[label_at].strip()  # an id is exact, as in JSON
            label = _BOOLEAN_LABELS.get(label, label)
            if not 1 <= len(client_id) <= MAX_CLIENT_ID or "\x00" in client_id:
                raise invalid(
                    ("body", "row", number, "id"),
                    f"must be 1 to {MAX_CLIENT_ID} characters, without NUL",
                )
            if not (label.isascii() and label.isdigit()) or len(label) > 9:  # isdigit takes "²"
                raise invalid(
                    ("body", "row", number, "label"), f"is {label[:40]!r}, not a class index"
                )
            ids.append(client_id)
            labels.append(int(label))
    except csv.Error as exc:
        raise invalid(("body",), f"cannot be read as CSV: {exc}") from None
    if not ids:
        raise invalid(("body",), "holds no outcomes")
    return ids, labels


def _columns(written: list[str]) -> tuple[int, int]:
    """The positions of ``id`` and ``label`` in a header (its cells ``written`` as they are);
    422 at ``header`` naming the problem, the header expected and the one found."""
    loc: tuple[str | int, ...] = ("body", "header")
    if not any(written):
        raise invalid(loc, f"is missing; expected the header {OUTCOME_COLUMNS}")
    check_pandas_mistakes(written, loc, OUTCOME_COLUMNS)
    header = [cell.lower() for cell in written]
    for i, name in enumerate(header):
        if name not in ("id", "label"):
            why = f"is the unknown column {shown(written[i])}"
            raise wrong_header(written, (*loc, i), why, OUTCOME_COLUMNS)
    if sorted(header) != ["id", "label"]:
        raise wrong_header(written, loc, "must name id and label once each", OUTCOME_COLUMNS)
    return header.index("id"), header.index("label")
