"""The persisted artifact (a JSON document), and the error of every stored format.

Loading never executes code: the artifact is parsed by orjson into plain numbers, strings,
lists and dicts. The reader checks what it got and raises :class:`ArtifactError` otherwise.
The fitting batch has its own binary format in :mod:`app.store.batches`.

Artifact format, version 1 (``format_version``)::

    {"format": "calibration-service.artifact", "format_version": 1,
     "method": "isotonic", "params": {...}, "state": {...}}

Keys are sorted and floats are written as the shortest text that reads back to the same bits.
JSON has no NaN or infinity, so a non-finite float is written as ``{"$float": "NaN"}``,
``{"$float": "Infinity"}`` or ``{"$float": "-Infinity"}``; ``"$float"`` is reserved as a key.

A newer format gets a new number and a new reader in :data:`_READERS`; the old readers stay,
so every artifact ever written keeps loading.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

ARTIFACT_FORMAT = "calibration-service.artifact"
ARTIFACT_FORMAT_VERSION = 1
"""The format version :func:`encode_artifact` writes."""

_FLOAT_KEY = "$float"
_NONFINITE_NAMES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class ArtifactError(ValueError):
    """A stored artifact or batch that cannot be read: altered, unknown, or malformed."""


@dataclass(frozen=True)
class Artifact:
    """A decoded artifact: enough to rebuild the fitted calibrator with ``from_state``."""

    method: str
    params: dict[str, Any]
    state: dict[str, Any]
    format_version: int


def sha256_hex(data: bytes) -> str:
    """The lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def encode_artifact(method: str, params: dict[str, Any], state: dict[str, Any]) -> bytes:
    """Write a fitted calibrator's method, parameters and state in the current format.

    numpy arrays and scalars are written as lists and numbers.
    """
    document = {
        "format": ARTIFACT_FORMAT,
        "format_version": ARTIFACT_FORMAT_VERSION,
        "method": method,
        "params": _tag_nonfinite(params),
        "state": _tag_nonfinite(state),
    }
    try:
        return orjson.dumps(document, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY)
    except TypeError as exc:
        raise ArtifactError(
            f"artifact of method '{method}' is not JSON-serialisable: {exc}"
        ) from exc


def decode_artifact(data: bytes, expected_sha256: str | None = None) -> Artifact:
    """Read an artifact of any supported format version, checking its hash when given.

    Raises
    ------
    ArtifactError
        On a hash mismatch, invalid JSON, an unknown format or format version, or fields of
        the wrong type.
    """
    if expected_sha256 is not None:
        actual = sha256_hex(data)
        if actual != expected_sha256.lower():
            raise ArtifactError(
                f"artifact sha256 mismatch: stored {expected_sha256}, computed {actual}; "
                "the artifact was altered or corrupted"
            )
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ArtifactError(f"artifact is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ArtifactError(f"artifact must be a JSON object, not {_json_type(document)}")
    if document.get("format") != ARTIFACT_FORMAT:
        raise ArtifactError(
            f"unknown artifact format {document.get('format')!r}; expected '{ARTIFACT_FORMAT}'"
        )
    version = document.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ArtifactError(
            f"artifact format_version must be an integer, not {_json_type(version)}"
        )
    reader = _READERS.get(version)
    if reader is None:
        if version > ARTIFACT_FORMAT_VERSION:
            raise ArtifactError(
                f"artifact format_version {version} is newer than this release reads "
                f"(up to {ARTIFACT_FORMAT_VERSION}); upgrade the service"
            )
        raise ArtifactError(
            f"unknown artifact format_version {version}; supported: {sorted(_READERS)}"
        )
    return reader(document, b'"$float"' in data)


def _read_v1(document: dict[str, Any], has_tagged_floats: bool) -> Artifact:
    method = document.get("method")
    if not isinstance(method, str) or not method:
        raise ArtifactError(f"artifact method must be a non-empty string, not {method!r}")
    fields = {}
    for field in ("params", "state"):
        value = document.get(field)
        if not isinstance(value, dict):
            raise ArtifactError(f"artifact {field} must be a JSON object, not {_json_type(value)}")
        fields[field] = _untag_nonfinite(value) if has_tagged_floats else value
    return Artifact(method, fields["params"], fields["state"], format_version=1)


_READERS: dict[int, Callable[[dict[str, Any], bool], Artifact]] = {1: _read_v1}
"""format_version → reader. Readers are never removed: version 1 loads in every release."""


def _tag_nonfinite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by its ``{"$float": ...}`` tag."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            return _tag_nonfinite(value.tolist())
        return value
    if isinstance(value, float | np.floating):
        number = float(value)
        if math.isfinite(number):
            return value
        if math.isnan(number):
            return {_FLOAT_KEY: "NaN"}
        return {_FLOAT_KEY: "Infinity" if number > 0 else "-Infinity"}
    if isinstance(value, dict):
        return {key: _tag_nonfinite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_tag_nonfinite(item) for item in value]
    return value


def _untag_nonfinite(value: Any) -> Any:
    """The inverse of :func:`_tag_nonfinite` on parsed JSON."""
    if isinstance(value, dict):
        if len(value) == 1 and _FLOAT_KEY in value:
            name = value[_FLOAT_KEY]
            if name not in _NONFINITE_NAMES:
                raise ArtifactError(f"unknown non-finite float {name!r} in artifact")
            return _NONFINITE_NAMES[name]
        return {key: _untag_nonfinite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_untag_nonfinite(item) for item in value]
    return value


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"the number {value!r}"
    return names.get(type(value), type(value).__name__)
