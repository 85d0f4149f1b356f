"""Open Inference Protocol bodies: an infer request's tensors in, its outputs out.

The protocol (KServe's V2 REST, Triton's HTTP API) sends tensors as JSON, ``{"name",
"datatype", "shape", "data"}`` with the data flat or nested in row-major order, or with the
*binary tensor data extension*: the JSON header comes first, its length in the
``Inference-Header-Content-Length`` header, and each binary tensor's raw little-endian bytes
follow it in input order, ``parameters.binary_data_size`` bytes each. Answers go the same
way: an output is binary when its ``parameters.binary_data`` is true, or when the request's
``parameters.binary_data_output`` is and the output does not say otherwise.

This module only converts; :mod:`app.api.routes.inference` runs the request. Errors are 400s that
name the field (an :class:`~app.errors.InvalidInput` located in the header, e.g.
``inputs[0].shape``), which the routes answer in the protocol's ``{"error": ...}`` shape.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray

from app.api.bodies.fields import MAX_CLIENT_ID
from app.api.bodies.media import check_ids
from app.api.bodies.payloads import byte_count, check_text, first_boolean
from app.api.places import invalid
from app.calibration import MAX_CLASSES
from app.errors import MalformedBody, PayloadTooLarge, UnsupportedMediaType

HEADER_LENGTH = "inference-header-content-length"
DATATYPES: dict[str, np.dtype[Any]] = {"FP64": np.dtype("<f8"), "FP32": np.dtype("<f4")}
"""The input datatypes accepted, as their little-endian numpy types."""
INPUT = "scores"
OUTPUTS = ("probabilities", "p0", "p1")


@dataclass(frozen=True)
class InferRequest:
    """An infer request, checked: its id, the scores (float64; a vector when the tensor was
    [n] or [n, 1], else n x k), the tensor's shape, the outputs asked for with whether each
    goes binary (None: all the model's, binary when ``binary_default``), and the client's
    ids to log the predictions under."""

    id: str | None
    scores: NDArray[np.float64]
    shape: tuple[int, ...]
    outputs: dict[str, bool | None] | None
    binary_default: bool
    ids: list[str] | None


def is_compressed(encoding: str | None) -> bool:
    """Whether a ``Content-Encoding`` says the body is compressed (anything but identity)."""
    return encoding is not None and encoding.strip().lower() not in ("", "identity")


MAX_MEMBERS = 64
"""The most gzip members one body may hold (each costs an inflater)."""


def decompressed(body: bytes, encoding: str | None, limit: int) -> bytes:
    """``body`` as sent with ``Content-Encoding: encoding`` (gzip or deflate, which
    tritonclient's ``request_compression_algorithm`` uses), inflated to at most ``limit``
    bytes (413 past it: a small body must not inflate without bound). A gzip body may be
    several members one after another (RFC 1952 2.2: ``cat a.gz b.gz``, pigz); bytes after
    the last that are not a member are refused, not dropped."""
    if encoding is None or not is_compressed(encoding):
        return body
    kind = encoding.strip().lower()
    if kind not in ("gzip", "deflate"):
        raise UnsupportedMediaType(
            f"Content-Encoding {encoding[:32]!r}: send gzip, deflate or none"
        )
    parts: list[bytes] = []
    size, rest = 0, body
    while rest or not parts:  # a loop over gzip members, at most MAX_MEMBERS
        if len(parts) == MAX_MEMBERS:
            raise MalformedBody(f"the body has more than {MAX_MEMBERS} gzip members")
        inflater = zlib.decompressobj(zlib.MAX_WBITS | (16 if kind == "gzip" else 0))
        try:
            data = inflater.decompress(rest, limit - size + 1)
        except zlib.error as exc:
            raise MalformedBody(f"the body is not {kind} data: {exc}") from None
        size += len(data)
        if size > limit or inflater.unconsumed_tail:
            raise PayloadTooLarge(f"the body inflates past {limit} bytes")
        if not inflater.eof:
            raise MalformedBody(f"the {kind} data ends early")
        parts.append(data)
        rest = inflater.unused_data
        if rest and kind == "deflate":
            raise MalformedBody("the deflate data is followed by other bytes")
    return b"".join(parts)


def parse_infer(body: bytes, header_length: str | None, max_rows: int) -> InferRequest:
    """The request in ``body`` (JSON, or a JSON header of ``header_length`` bytes and binary
    tensors after it), with at most ``max_rows`` rows."""
    header, binary = _split(body, header_length)
    try:
        document = orjson.loads(header)
    except orjson.JSONDecodeError as exc:
        raise MalformedBody(f"the inference header is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise invalid(("header",), "must be a JSON object")
    inputs = document.get("inputs")
    if not isinstance(inputs, list) or len(inputs) != 1 or not isinstance(inputs[0], dict):
        raise invalid(("inputs",), f"must hold one tensor, named {INPUT!r}")
    tensor = inputs[0]
    if tensor.get("name") != INPUT:
        raise invalid(("inputs", 0, "name"), f"is {tensor.get('name')!r}; expected {INPUT!r}")
    shape = _shape(tensor.get("shape"), max_rows)
    scores = _tensor_data(tensor, shape, binary)
    parameters = _object(document.get("parameters"), ("parameters",))
    return InferRequest(
        id=_request_id(document.get("id")),
        scores=scores.reshape(shape[0]) if len(shape) == 1 or shape[1] == 1 else scores,
        shape=shape,
        outputs=_outputs(document.get("outputs")),
        binary_default=parameters.get("binary_data_output") is True,
        ids=_ids(parameters.get("ids"), shape[0]),
    )


def encode_infer(
    header: dict[str, Any], outputs: list[tuple[str, NDArray[np.float64], bool]]
) -> tuple[bytes, dict[str, str], str]:
    """The answer's body, extra headers and media type: ``header`` with an ``outputs`` entry
    per (name, FP64 array, binary) output, the binary ones' bytes after the JSON."""
    described: list[dict[str, Any]] = []
    blobs: list[bytes] = []
    for name, array, binary in outputs:
        entry: dict[str, Any] = {"name": name, "datatype": "FP64", "shape": list(array.shape)}
        if binary:
            data = np.ascontiguousarray(array, dtype="<f8").tobytes()
            entry["parameters"] = {"binary_data_size": len(data)}
            blobs.append(data)
        else:
            entry["data"] = np.ascontiguousarray(array).reshape(-1)
        described.append(entry)
    document = orjson.dumps({**header, "outputs": described}, option=orjson.OPT_SERIALIZE_NUMPY)
    if not blobs:
        return document, {}, "application/json"
    headers = {"Inference-Header-Content-Length": str(len(document))}
    return b"".join([document, *blobs]), headers, "application/octet-stream"


def _split(body: bytes, header_length: str | None) -> tuple[bytes, memoryview]:
    """The JSON header and the binary data after it."""
    if header_length is None:
        return body, memoryview(b"")
    length = byte_count(header_length)
    if length is None or length > len(body):
        raise invalid(
            ("header", "Inference-Header-Content-Length"),
            f"is {header_length[:32]!r}; expected the JSON header's length in bytes, at most "
            f"the body's {len(body)}",
        )
    return body[:length], memoryview(body)[length:]


def _shape(value: object, max_rows: int) -> tuple[int, ...]:
    """A tensor shape of scores: [n], [n, 1] or [n, k], n >= 1 and at most ``max_rows``."""
    where = ("inputs", 0, "shape")
    if (
        not isinstance(value, list)
        or len(value) not in (1, 2)
        or not all(isinstance(d, int) and not isinstance(d, bool) for d in value)
    ):
        raise invalid(where, "must be [n], [n, 1] or [n, k]: one or two integers")
    if any(d < 1 for d in value):
        raise invalid(where, f"is {value}; every dimension must be at least 1")
    if value[0] > max_rows:
        raise PayloadTooLarge(f"inputs[0].shape has {value[0]} rows; the limit is {max_rows}")
    if len(value) == 2 and value[1] > MAX_CLASSES:
        raise invalid(where, f"has {value[1]} classes; at most {MAX_CLASSES}")
    return tuple(value)


def _tensor_data(
    tensor: dict[str, Any], shape: tuple[int, ...], binary: memoryview
) -> NDArray[np.float64]:
    """The scores of ``tensor``, from its JSON ``data`` or its binary bytes, as float64 of
    ``shape``."""
    datatype = tensor.get("datatype")
    if not isinstance(datatype, str) or datatype not in DATATYPES:
        raise invalid(
            ("inputs", 0, "datatype"), f"is {datatype!r}; expected {' or '.join(DATATYPES)}"
        )
    dtype = DATATYPES[datatype]
    count = int(np.prod(shape))
    parameters = _object(tensor.get("parameters"), ("inputs", 0, "parameters"))
    size = parameters.get("binary_data_size")
    if size is not None:
        expected = count * dtype.itemsize
        if size != expected or isinstance(size, bool):
            raise invalid(
                ("inputs", 0, "parameters", "binary_data_size"),
                f"is {size!r}; a {datatype} tensor of shape {list(shape)} has {expected} bytes",
            )
        if len(binary) != expected:
            raise invalid(
                ("inputs", 0, "parameters", "binary_data_size"),
                f"is {size}, but {len(binary)} bytes follow the header",
            )
        values = np.frombuffer(binary, dtype=dtype).astype(np.float64, copy=False)
    else:
        if len(binary):
            raise invalid(
                ("inputs", 0, "data"),
                "binary data follows the header but no input declares parameters.binary_data_size",
            )
        values = _json_data(tensor.get("data"), dtype, count)
    shaped: NDArray[np.float64] = values.reshape(shape)
    return shaped


def _json_data(data: object, dtype: np.dtype[Any], count: int) -> NDArray[np.float64]:
    """A tensor's JSON data, flat or nested in row-major order, of ``count`` numbers."""
    where = ("inputs", 0, "data")
    if not isinstance(data, list):
        raise invalid(
            where, "must be an array of numbers (or binary data, with parameters.binary_data_size)"
        )
    if (at := first_boolean(data)) is not None:  # numpy would read [0.5, true] as [0.5, 1.0]
        raise invalid((*where, *at), "is a boolean; scores must be numbers")
    try:
        array = np.asarray(data)
    except ValueError:
        raise invalid(where, "must be an array of numbers, nested evenly") from None
    if array.dtype.kind not in "iuf":
        raise invalid(where, "must hold numbers only")
    if array.size != count:
        raise invalid(where, f"has {array.size} values; the shape asks for {count}")
    return array.reshape(-1).astype(dtype).astype(np.float64)


def _object(value: object, loc: tuple[str | int, ...]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid(loc, "must be a JSON object")
    return value


def _request_id(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise invalid(("id",), "must be a string")


def _outputs(value: object) -> dict[str, bool | None] | None:
    """The outputs asked for, each with its ``binary_data`` (None: not said); None when the
    request names none (all of the model's)."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(o, dict) for o in value):
        raise invalid(("outputs",), 'must be an array of {"name": ...} objects')
    asked: dict[str, bool | None] = {}
    for i, output in enumerate(value):
        name = output.get("name")
        if name not in OUTPUTS:
            raise invalid(("outputs", i, "name"), f"is {name!r}; expected one of {OUTPUTS}")
        binary = _object(output.get("parameters"), ("outputs", i, "parameters")).get("binary_data")
        asked[name] = binary if isinstance(binary, bool) else None
    return asked


def _ids(value: object, rows: int) -> list[str] | None:
    """The client's ids (``parameters.ids``), as ``/v1`` predict takes them: one per row,
    each a non-empty string of at most :data:`MAX_CLIENT_ID` characters without NUL, each
    once."""
    where: tuple[str | int, ...] = ("parameters", "ids")
    if value is None:
        return None
    if not isinstance(value, list):
        raise invalid(where, "must be an array of strings, one per row")
    for i, client_id in enumerate(value):
        if not isinstance(client_id, str) or not 1 <= len(client_id) <= MAX_CLIENT_ID:
            raise invalid((*where, i), f"must be a string of 1 to {MAX_CLIENT_ID} characters")
        check_text(client_id, (*where, i))
    check_ids(value, rows, "inputs[0]", at=where)
    return value
