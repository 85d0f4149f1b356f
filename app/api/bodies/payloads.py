"""Request bodies → numpy arrays: JSON (orjson); CSV in :mod:`app.api.bodies.csv_batches`.

Conversion is vectorised (``np.asarray`` over the parsed list); only on failure does a scan
find the first element that is not a number, so that the 4xx names it. Anything the body
cannot express (a string score, a ragged matrix, a non-object body) is a 422 or 400 here,
before the service sees it.

Parsing runs in a worker thread (:mod:`app.service.work`), yet a thread frees the event loop only
while it does not hold the GIL, and a C call holds it from start to end: ``np.loadtxt`` over a
million rows ~200 ms, ``np.asarray`` of a million-element list ~50 ms. So no call here is
given more than a slice of a big body: a CSV is read :data:`CSV_PIECE_BYTES` at a time, a
list converted :data:`LIST_SLICE` elements at a time, and a big JSON body is parsed in
another process (:mod:`app.api.bodies.json_process`, which runs :func:`read_json_arrays`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray

from app.api.places import invalid
from app.errors import InvalidInput, MalformedBody, UnsupportedMediaType

JSON_TYPES = ("application/json",)
CSV_TYPES = ("text/csv", "application/csv", "text/plain")
MULTIPART = "multipart/form-data"

LIST_SLICE = 65_536
"""Elements per ``np.asarray`` call (~3 ms with the GIL held)."""


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


BATCH_ARRAYS: Mapping[str, bool] = {"scores": True, "labels": False, "sample_weight": False}
"""The big arrays of a labelled batch body, and whether each is a matrix (scores may be)."""

NUMBERS_ONLY = frozenset({"scores"})
"""The arrays where a boolean is refused: a score is a number (labels take booleans, 0/1)."""


@dataclass(frozen=True)
class ParsedArray:
    """A JSON array converted where its body was parsed (another process, for a big body):
    the float64 array, or the 422 that converting it gave, which :func:`number_array` raises
    when the caller asks for the field, so errors come in the order they always came."""

    rows: int
    """The array's length in the body."""
    matrix: bool
    array: NDArray[np.float64] | None = None
    error: InvalidInput | None = None

    def __len__(self) -> int:
        return self.rows

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as bytes: unpickling an ndarray copies it twice with the GIL held, bytes
        # once (the copy in _numbers_from_bytes lets the GIL go).
        if self.array is None:
            return (ParsedArray, (self.rows, self.matrix, None, self.error))
        data = self.array.tobytes()
        return (_numbers_from_bytes, (self.rows, self.matrix, data, self.array.shape))


def _numbers_from_bytes(
    rows: int, matrix: bool, data: bytes, shape: tuple[int, ...]
) -> ParsedArray:
    return ParsedArray(rows, matrix, np.frombuffer(data).reshape(shape).copy())


def read_json_arrays(body: bytes, arrays: Mapping[str, bool]) -> dict[str, Any]:
    """The body as a JSON object, each field of ``arrays`` that is a list converted to a
    :class:`ParsedArray` (the mapping says which are matrices). What the JSON process runs."""
    data = parse_json_object(body)
    literal = b"true" in body or b"false" in body  # else no array holds a boolean: no scan
    for name, matrix in arrays.items():
        value = data.get(name)
        if isinstance(value, list):
            booleans = name not in NUMBERS_ONLY or not literal
            try:
                array = number_array(value, name, matrix=matrix, booleans=booleans)
            except InvalidInput as exc:
                data[name] = ParsedArray(len(value), matrix, error=exc)
            else:
                data[name] = ParsedArray(len(value), matrix, array)
    return data


def check_text(value: str, loc: tuple[str | int, ...]) -> None:
    """422 when ``value`` holds NUL, which PostgreSQL's text and jsonb cannot store."""
    if "\x00" in value:
        raise invalid(loc, NO_NUL)


def number_array(
    value: object, field: str, *, matrix: bool = False, booleans: bool = True
) -> NDArray[np.float64]:
    """A JSON array of numbers (or, with ``matrix``, of equal-length arrays) as float64;
    ``true`` and ``false`` read as 1 and 0, or without ``booleans`` are refused (scores)."""
    if isinstance(value, ParsedArray):
        if value.matrix != matrix:
            raise TypeError(f"{field} was converted with matrix={value.matrix}, not {matrix}")
        if value.error is not None:
            raise value.error
        assert value.array is not None
        return value.array
    if not isinstance(value, list):
        raise invalid(("body", field), f"must be an array, not {_json_type(value)}")
    if not booleans and (where := first_boolean(value)) is not None:
        raise invalid(("body", field, *where), f"is a boolean; {field} must be numbers")
    if len(value) > LIST_SLICE and (sliced := _sliced_array(value, matrix)) is not None:
        return sliced
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


def _sliced_array(items: list[Any], matrix: bool) -> NDArray[np.float64] | None:
    """``items`` as float64, :data:`LIST_SLICE` at a time, when every slice is plainly numbers
    (or rows of numbers) of one shape; None for anything else, which the whole-list path
    judges. Slices of booleans, int64 or float64 give the values the whole list gives."""
    out: NDArray[np.float64] | None = None
    for start in range(0, len(items), LIST_SLICE):
        try:
            part = np.asarray(items[start : start + LIST_SLICE])
        except (ValueError, OverflowError):
            return None
        if part.dtype not in (np.bool_, np.int64, np.float64):
            return None
        if out is None:
            if part.ndim != 1 and not (matrix and part.ndim == 2):
                return None
            out = np.empty((len(items), *part.shape[1:]))
        elif part.shape[1:] != out.shape[1:]:
            return None
        out[start : start + len(part)] = part
    return out


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


def first_boolean(items: list[Any]) -> tuple[int, ...] | None:
    """Where a JSON array, nested to any depth, first holds ``true`` or ``false`` (None: it
    holds none). Asking costs one pass over the types per level of nesting, at C speed (numpy
    reads ``[0.5, true]`` as ``[0.5, 1.0]``, so its dtype cannot tell); only an array known to
    hold one is walked in Python, to name the index."""
    level = items
    while level:
        kinds = set(map(type, level))
        if bool in kinds:
            break
        if list not in kinds:
            return None
        rows = level if len(kinds) == 1 else [row for row in level if type(row) is list]
        level = list(chain.from_iterable(rows))
    else:
        return None
    stack: list[tuple[list[Any], int]] = [(items, 0)]  # (array, next index): no recursion
    while stack:
        current, start = stack.pop()
        for i in range(start, len(current)):
            item = current[i]
            if type(item) is bool:
                return (*(at - 1 for _, at in stack), i)
            if type(item) is list:
                stack += [(current, i + 1), (item, 0)]
                break
    return None


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
    """:func:`number_array` of a field that may be absent."""
    return None if value is None else number_array(value, field)


def require_media_type(content_type: str | None, allowed: tuple[str, ...]) -> str:
    """The media type of ``Content-Type`` if it is one of ``allowed``, else 415."""
    kind = media_type(content_type)
    if kind not in allowed:
        shown = kind or "none"
        raise UnsupportedMediaType(
            f"Content-Type {shown} is not supported here; send one of {', '.join(allowed)}"
        )
    return kind


def byte_count(text: str | bytes | None) -> int | None:
    """A header's count of bytes (Content-Length, Inference-Header-Content-Length): ASCII
    digits only, at most 18 of them ("²" is a digit to ``str.isdigit`` and not to ``int``;
    ``int`` refuses more than 4300 digits), else None."""
    if text is None or not 0 < len(text) <= 18 or not text.isascii() or not text.isdigit():
        return None
    return int(text)
