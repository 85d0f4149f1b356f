"""The fitting batch of a version: a fixed header, then raw little-endian arrays.

Format version 1 (integers little-endian; every float section starts 8-byte aligned)::

    offset size  field
         0    8  magic b"\\x89CSBATCH" (an old npz row begins b"PK\\x03\\x04")
         8    2  format_version, uint16
        10    2  flags, uint16: bit 0 MATRIX (scores and out_of_fold are (n, k), else (n,)),
                 bit 1 UNIFORM_WEIGHTS (no weights section: every weight is the header's)
        12    1  label width: 0 = bits (np.packbits, little bit order), or 1, 2, 4 bytes
        13    3  zero
        16    8  n, uint64: rows
        24    4  k, uint32: columns of scores and out_of_fold; 1 for vectors
        28    4  zero
        32    8  weight, float64: every row's weight when UNIFORM_WEIGHTS, else zero
        40       scores (n*k float64), out_of_fold (n*k float64), weights (n float64, unless
                 UNIFORM_WEIGHTS), labels (ceil(n/8) bytes as bits, else n unsigned integers)

Labels are bits when all are 0 or 1, else the narrowest unsigned width that holds the largest
(one byte up to 256 classes). Floats are read by ``np.frombuffer`` as read-only views of the
blob, without a copy, and uniform weights as a read-only broadcast of the header's weight;
labels are checked in their stored width, then widened to int64 (the one n-sized copy).

No codec, because none pays at n = 10^6 (normal scores, their sigmoid): zlib level 1 saves 4-5 %
of a float64 column for 225-250 ms, zstd level 1 (``zstandard``) 4-6 % for 7 ms written and 5 ms
read, against under 1 ms to copy the column, and neither output can be viewed without a copy.
Binary labels as bits take 0.31 ms to write and 0.37 ms to read (as bytes: 0.17 and 0.30 ms) in
an eighth of the room, and zlib does not shrink them (125 000 → 125 046 B when balanced).

A whole binary batch (distinct scores), old npz (``np.savez_compressed``) → format 1, best of
3-5 runs on a 2-core machine. Reading format 1 copies no float (uniform weights are a broadcast);
it is 4-5 % larger, what zlib took off the floats:

====  =======  ===========  ===========  ===============
n     weights  write, ms    read, ms     bytes
====  =======  ===========  ===========  ===============
10^6  all 1    574 → 2.4    68 → 0.8     15.5 → 16.1 MB
10^6  varied   784 → 2.6    89 → 0.3     23.0 → 24.1 MB
10^7  all 1    6077 → 93    1039 → 7     155 → 161 MB
10^7  varied   8082 → 129   922 → 8      230 → 241 MB
====  =======  ===========  ===========  ===============
"""

from __future__ import annotations

import math
import struct

import numpy as np
from numpy.typing import ArrayLike, NDArray

from app.store.artifacts import ArtifactError
from app.store.batch_checks import StoredBatch, check_batch, check_labels
from app.store.batches_npz import NPZ_MAGIC, decode_npz

BATCH_MAGIC = b"\x89CSBATCH"
BATCH_FORMAT_VERSION = 1
"""The format version :func:`encode_batch` writes."""

_HEADER = struct.Struct("<8sHHB3sQI4s8s")
_MATRIX = 1
_UNIFORM_WEIGHTS = 2
_LABEL_WIDTHS = (0, 1, 2, 4)  # k < 2**32 bounds the labels
_FLOAT = np.dtype("<f8")


def encode_batch(
    scores: ArrayLike, labels: ArrayLike, weights: ArrayLike, out_of_fold: ArrayLike
) -> memoryview:
    """Write a batch in the current format: its bytes, as a view of one numpy buffer.

    Raises
    ------
    ArtifactError
        When labels are not whole numbers in 0..k-1 (0 or 1 for vectors), or the arrays
        disagree in dtype, dimensions or length.
    """
    label_array = np.asarray(labels)
    with np.errstate(invalid="ignore"):  # NaN or huge labels cast to garbage, refused below
        as_int = label_array.astype(np.int64, copy=False)
    if not np.array_equal(as_int, label_array):
        raise ArtifactError("batch labels must be whole numbers")
    arrays = {
        "scores": np.asarray(scores, dtype=_FLOAT),
        "labels": as_int,
        "weights": np.asarray(weights, dtype=_FLOAT),
        "out_of_fold": np.asarray(out_of_fold, dtype=_FLOAT),
    }
    check_batch(arrays)
    scores_array, weight_array = arrays["scores"], arrays["weights"]
    n = len(scores_array)
    matrix = scores_array.ndim == 2
    bits = weight_array.view(np.uint64)  # bit-equal, so -0.0 and NaN payloads survive
    uniform = n > 0 and bool((bits == bits[0]).all())
    width, packed = _pack_labels(as_int)
    flags = (_MATRIX if matrix else 0) | (_UNIFORM_WEIGHTS if uniform else 0)
    k = scores_array.shape[1] if matrix else 1
    weight = weight_array[:1].tobytes() if uniform else bytes(8)
    header = _HEADER.pack(
        BATCH_MAGIC, BATCH_FORMAT_VERSION, flags, width, bytes(3), n, k, bytes(4), weight
    )
    sections = [scores_array, arrays["out_of_fold"]] + ([] if uniform else [weight_array])
    pieces = [np.frombuffer(header, np.uint8)]
    pieces += [np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in sections]
    pieces.append(np.frombuffer(packed, np.uint8))
    # numpy's copies leave the GIL to other threads; b"".join held it for 76 ms at 10^7 rows,
    # stalling the event loop past its 100 ms bound (tests/server/test_responsiveness.py)
    blob = np.empty(sum(piece.size for piece in pieces), np.uint8)
    np.concatenate(pieces, out=blob)
    return blob.data


def decode_batch(data: bytes | memoryview) -> StoredBatch:
    """Read a batch of the current format, or an old npz row as before, refusing anything else.

    An npz is read by ``np.load(..., allow_pickle=False)``: nothing is ever unpickled. Everything
    read is checked, so a damaged blob is an :class:`ArtifactError`, never another exception.

    Raises
    ------
    ArtifactError
        On an unknown magic or format version, a byte count that disagrees with the header,
        bad dtypes or shapes, or labels outside 0..k-1.
    """
    if data[:4] == NPZ_MAGIC:
        return decode_npz(data)
    if data[: len(BATCH_MAGIC)] != BATCH_MAGIC:
        raise ArtifactError(
            f"stored batch cannot be read: it begins {bytes(data[:8])!r}, "
            "neither a batch header nor an npz archive"
        )
    if len(data) < _HEADER.size:
        raise ArtifactError(
            f"stored batch is truncated: {len(data)} bytes, shorter than its header"
        )
    _, version, flags, width, zero3, n, k, zero4, weight = _HEADER.unpack_from(data)
    if version != BATCH_FORMAT_VERSION:
        newer = " is newer than this release reads; upgrade the service"
        raise ArtifactError(
            f"stored batch format_version {version}"
            + (newer if version > BATCH_FORMAT_VERSION else " is unknown; supported: 1")
        )
    matrix, uniform = bool(flags & _MATRIX), bool(flags & _UNIFORM_WEIGHTS)
    if flags & ~(_MATRIX | _UNIFORM_WEIGHTS) or zero3 != bytes(3) or zero4 != bytes(4):
        raise ArtifactError(f"stored batch header has unknown flags or fields (flags {flags})")
    if width not in _LABEL_WIDTHS:
        raise ArtifactError(f"stored batch label width {width} is not one of {_LABEL_WIDTHS}")
    if (not matrix and k != 1) or (matrix and k < 1):
        raise ArtifactError(f"stored batch has k = {k} columns with flags {flags}")
    if not uniform and weight != bytes(8):
        raise ArtifactError("stored batch carries a uniform weight without its flag")
    label_bytes = (n + 7) // 8 if width == 0 else n * width
    expected = _HEADER.size + 8 * n * (2 * k + (0 if uniform else 1)) + label_bytes
    if len(data) != expected:
        raise ArtifactError(
            f"stored batch holds {len(data)} bytes; its header (n = {n}, k = {k}) needs "
            f"{expected}: it is truncated or corrupted"
        )
    shape = (n, k) if matrix else (n,)
    offset = _HEADER.size
    scores = _floats(data, offset, shape)
    out_of_fold = _floats(data, offset + 8 * n * k, shape)
    offset += 16 * n * k
    if uniform:
        # every row's weight is the header's: a read-only view of one float, not n copies
        weights = np.broadcast_to(np.frombuffer(weight, dtype=_FLOAT).astype(np.float64), (n,))
    else:
        weights = _floats(data, offset, (n,))
        offset += 8 * n
    labels = _unpack_labels(data, offset, n, width)
    check_labels(labels, k if matrix else 2)
    return StoredBatch(scores, labels.astype(np.int64), weights, out_of_fold)


def _floats(data: bytes | memoryview, offset: int, shape: tuple[int, ...]) -> NDArray[np.float64]:
    """A read-only float64 view of ``data`` (a copy only on a big-endian machine)."""
    view = np.frombuffer(data, dtype=_FLOAT, count=math.prod(shape), offset=offset)
    return view.reshape(shape).astype(np.float64, copy=False)


def _pack_labels(labels: NDArray[np.int64]) -> tuple[int, bytes]:
    """Labels (checked non-negative) as ``(width, bytes)``: bits when all are 0 or 1."""
    top = int(labels.max()) if labels.size else 0
    if top <= 1:
        return 0, np.packbits(labels.astype(np.uint8), bitorder="little").tobytes()
    width = next(w for w in _LABEL_WIDTHS[1:] if top < 1 << (8 * w))
    return width, labels.astype(f"<u{width}").tobytes()


def _unpack_labels(
    data: bytes | memoryview, offset: int, n: int, width: int
) -> NDArray[np.unsignedinteger]:
    if width > 0:
        return np.frombuffer(data, dtype=f"<u{width}", count=n, offset=offset)
    packed = np.frombuffer(data, dtype=np.uint8, offset=offset)
    if n % 8 and packed[-1] >> (n % 8):
        raise ArtifactError("stored batch labels have bits set past the last row")
    return np.unpackbits(packed, count=n, bitorder="little")
