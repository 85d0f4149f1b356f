"""Request bodies → numpy arrays: JSON (orjson), CSV and multipart CSV uploads.

Conversion is vectorised (``np.asarray`` over the parsed list); only on failure does a scan
find the first element that is not a number, so that the 4xx names it. Anything the body
cannot express (a string score, a ragged matrix, a non-object body) is a 422 or 400 here,
before the service sees it.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray

from app.errors import MalformedBody, UnsupportedMediaType, invalid

JSON_TYPES = ("application/json",)
CSV_TYPES = ("text/csv", "application/csv", "text/plain")
MULTIPART = "multipart/form-data"


def media_type(content_type: str | None) -> str:
    """The bare media type of a Content-Type header, lower-cased (``""`` when absent)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def parse_json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object; 400 when it is not JSON or not an object."""
    if not body.strip():
        raise MalformedBody("the request body is empty; expected a JSON object")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        # Python's json.dumps writes NaN, Infinity and 1e999 by default; read them, so that
        # validation can name the offending index (422) instead of rejecting the whole body.
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise MalformedBody(f"the body is not valid JSON: {exc}") from None
        try:
            orjson.dumps(data)  # json reads lone surrogates ("\ud800"), which nothing can encode
        except TypeError as unencodable:
            raise MalformedBody(f"the body is not valid JSON: {unencodable}") from None
    if not isinstance(data, dict):
        raise MalformedBody(f"the body must be a JSON object, not {type(data).__name__}")
    if b"\\u0000" in body and _ESCAPED_NUL.search(body):
        raise invalid(("body",), NO_NUL)
    return data


NO_NUL = "holds the character U+0000 (NUL), which no text may contain"
_ESCAPED_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
"""A ``\\u0000`` escape in JSON text (not an escaped backslash followed by ``u0000``)."""


def check_text(value: str, loc: tuple[str | int, ...]) -> None:
    """422 when ``value`` holds NUL, which PostgreSQL's text and jsonb cannot store."""
    if "\x00" in value:
        raise invalid(loc, NO_NUL)


def number_array(value: object, field: str, *, matrix: bool = False) -> NDArray[np.float64]:
    """A JSON array of numbers (or, with ``matrix``, of equal-length arrays) as float64."""
    if not isinstance(value, list):
        raise invalid(("body", field), f"must be an array, not {_json_type(value)}")
    try:
        array = np.asarray(value)
    except ValueError:
        array = np.asarray(value, dtype=object)  # ragged nested lists: scanned below
    if array.dtype.kind in "iub" or (array.dtype.kind == "f" and array.dtype.itemsize == 8):
        converted: NDArray[np.float64] = array.astype(np.float64, copy=False)
        if converted.ndim == 1 or (matrix and converted.ndim == 2 and converted.shape[0] > 0):
            return converted
        if converted.ndim == 2 and converted.shape[1] == 0:
            raise invalid(("body", field, 0), "is an empty array")
    _raise_first_bad(value, field, matrix=matrix)
    # Every element is a number, yet numpy chose no float dtype (e.g. integers beyond int64).
    try:
        return np.asarray(value, dtype=np.float64)
    except (ValueError, OverflowError):
        raise invalid(("body", field), "must be an array of finite numbers") from None


def _raise_first_bad(items: list[Any], field: str, *, matrix: bool) -> None:
    width: int | None = None
    for i, item in enumerate(items):
        if isinstance(item, list):
            if not matrix:
                raise invalid(("body", field, i), "is an array; expected a number")
            if width is None:
                width = len(item)
            if len(item) != width:
                raise invalid(
                    ("body", field, i), f"has {len(item)} values; row 0 has {width} (ragged)"
                )
            for j, cell in enumerate(item):
                if not _is_number(cell):
                    raise invalid(
                        ("body", field, i, j), f"is {_json_type(cell)}; expected a number"
                    )
        elif not _is_number(item):
            raise invalid(("body", field, i), f"is {_json_type(item)}; expected a number")
        elif width is not None:
            raise invalid(("body", field, i), "is a number but earlier rows are arrays")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float)  # booleans are ints: true/false read as 1/0


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return f"a string ({value[:20]!r})"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def optional_number_array(value: object, field: str) -> NDArray[np.float64] | None:
    return None if value is None else number_array(value, field)


def parse_csv(
    data: bytes, *, field: str = "file"
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64] | None]:
    """A CSV batch → (scores, labels, weights).

    Header ``score,label[,weight]`` (binary) or ``score_0,...,score_{k-1},label[,weight]``
    (multiclass); columns may come in any order. Errors name the data row (1 = first row
    after the header) and the column.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MalformedBody(f"{field}: the CSV is not UTF-8 ({exc.reason})") from None
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise invalid(("body", field), "is empty; expected a header row 'score,label'")
    header = [h.strip().lower() for h in _csv_rows([lines[0]], field, first=0)[0]]
    columns = _csv_columns(header, field)
    rows = [line for line in lines[1:] if line.strip()]
    if not rows:
        raise invalid(("body", field), "has a header but no data rows")
    table = _csv_table(rows, len(header), header, field)
    score_cols = columns["scores"]
    scores = table[:, score_cols[0]] if len(score_cols) == 1 else table[:, score_cols]
    labels = table[:, columns["label"][0]]
    weights = table[:, columns["weight"][0]] if columns["weight"] else None
    return np.ascontiguousarray(scores), np.ascontiguousarray(labels), weights


def _csv_columns(header: list[str], field: str) -> Mapping[str, list[int]]:
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
    """j for a column named ``score_j`` (j of at most 6 digits: more classes are refused
    anyway, and a longer run of digits is not worth converting), else None."""
    digits = name.removeprefix("score_")
    if digits == name or not digits.isdigit() or len(digits) > 6:
        return None
    return int(digits)


def _csv_table(rows: list[str], width: int, header: list[str], field: str) -> NDArray[np.float64]:
    try:
        table = np.loadtxt(
            io.StringIO("\n".join(rows)), delimiter=",", dtype=np.float64, ndmin=2, comments=None
        )
        if table.shape[1] == width:
            return table
    except ValueError:
        pass
    # Not plain numbers (quoted cells, a ragged row, a word): read it as CSV, name what fails.
    values = np.empty((len(rows), width))
    for r, row in enumerate(_csv_rows(rows, field, first=1)):
        if len(row) != width:
            raise invalid(
                ("body", field, "row", r + 1), f"has {len(row)} fields; the header has {width}"
            )
        for c, cell in enumerate(row):
            try:
                values[r, c] = float(cell)
            except ValueError:
                shown = cell.strip() if len(cell) <= 40 else f"{cell.strip()[:40]}..."
                raise invalid(
                    ("body", field, "row", r + 1, header[c]), f"is {shown!r}, not a number"
                ) from None
    return values


def _csv_rows(lines: list[str], field: str, *, first: int) -> list[list[str]]:
    """The cells of CSV ``lines`` (row numbers from ``first`` in errors: 0 is the header)."""
    rows: list[list[str]] = []
    reader = csv.reader(lines)
    while True:
        try:
            row = next(reader, None)
        except csv.Error as exc:  # e.g. a field over the csv module's 131072-character limit
            number = first + len(rows)
            where = ("header",) if number == 0 else ("row", number)
            raise invalid(("body", field, *where), f"cannot be read as CSV: {exc}") from None
        if row is None:
            return rows
        rows.append(row)


def require_media_type(content_type: str | None, allowed: tuple[str, ...]) -> str:
    kind = media_type(content_type)
    if kind not in allowed:
        shown = kind or "none"
        raise UnsupportedMediaType(
            f"Content-Type {shown} is not supported here; send one of {', '.join(allowed)}"
        )
    return kind
