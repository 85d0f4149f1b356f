"""Outcomes as CSV: a header ``id,label`` (either order), then one outcome per row."""

from __future__ import annotations

import csv
import io

from app.api.bodies.fields import MAX_CLIENT_ID
from app.api.places import invalid
from app.errors import MalformedBody


def outcomes_csv(data: bytes) -> tuple[list[str], list[int]]:
    """The ids and labels of a CSV body; errors name the row (1 = the first after the
    header) and the column."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MalformedBody(f"body: the CSV is not UTF-8 ({exc.reason})") from None
    rows = csv.reader(io.StringIO(text))
    try:
        header = [cell.strip().lower() for cell in next(rows, [])]
        if sorted(header) != ["id", "label"]:
            raise invalid(("body", "header"), f"is {header}; expected the columns id,label")
        id_at, label_at = header.index("id"), header.index("label")
        ids: list[str] = []
        labels: list[int] = []
        for number, row in enumerate((r for r in rows if any(c.strip() for c in r)), 1):
            if len(row) != 2:
                raise invalid(("body", "row", number), f"has {len(row)} fields; expected 2")
            client_id, label = row[id_at], row[label_at].strip()  # an id is exact, as in JSON
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
