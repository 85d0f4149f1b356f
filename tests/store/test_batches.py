"""The stored fitting batch: exact round trips, old npz rows still read, damage refused."""

from __future__ import annotations

import contextlib
import io
import struct
import tracemalloc
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.typing import NDArray

from app.store import ArtifactError, StoredBatch, decode_batch, encode_batch

# The documented header, written out independently of the module: magic, format_version,
# flags, label width, 3 zero bytes, n, k, 4 zero bytes, the uniform weight.
HEADER = struct.Struct("<8sHHB3sQI4s8s")
MATRIX, UNIFORM = 1, 2


def old_encode_batch(scores: Any, labels: Any, weights: Any, out_of_fold: Any) -> bytes:
    """The encoder before format 1, as it was: every array in one ``np.savez_compressed``."""
    arrays = {
        "scores": np.asarray(scores, dtype=np.float64),
        "labels": np.asarray(labels).astype(np.int64),
        "weights": np.asarray(weights, dtype=np.float64),
        "out_of_fold": np.asarray(out_of_fold, dtype=np.float64),
    }
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def _batch(n: int, k: int | None, weights: str, seed: int = 0) -> tuple[NDArray[Any], ...]:
    rng = np.random.default_rng(seed)
    shape = (n,) if k is None else (n, k)
    scores = rng.normal(size=shape)
    labels = rng.integers(0, k or 2, size=n)
    w = {"ones": np.ones(n), "constant": np.full(n, 2.5), "varied": rng.uniform(size=n)}[weights]
    return scores, labels, w, rng.uniform(size=shape)


def _assert_bits_equal(batch: StoredBatch, scores: Any, labels: Any, w: Any, oof: Any) -> None:
    for got, want in ((batch.scores, scores), (batch.weights, w), (batch.out_of_fold, oof)):
        assert got.dtype == np.float64
        assert got.shape == np.shape(want)
        assert got.tobytes() == np.asarray(want, dtype=np.float64).tobytes()
    assert batch.labels.dtype == np.int64
    assert batch.labels.tolist() == np.asarray(labels).tolist()


@pytest.mark.parametrize("weights", ["ones", "constant", "varied"])
@pytest.mark.parametrize(("n", "k"), [(1, None), (1, 3), (1000, None), (1000, 3), (2000, 300)])
def test_batch_round_trips_bit_for_bit(n: int, k: int | None, weights: str) -> None:
    scores, labels, w, oof = _batch(n, k, weights)
    scores.flat[0] = -0.0
    oof.flat[-1] = np.nan
    _assert_bits_equal(decode_batch(encode_batch(scores, labels, w, oof)), scores, labels, w, oof)


def test_labels_may_come_as_whole_floats() -> None:
    scores, labels, w, oof = _batch(50, 3, "varied")
    batch = decode_batch(encode_batch(scores, labels.astype(np.float64), w, oof))
    _assert_bits_equal(batch, scores, labels, w, oof)


@pytest.mark.parametrize(
    ("k", "weights", "label_bytes", "weight_bytes"),
    [(None, "ones", 125, 0), (None, "constant", 125, 0), (None, "varied", 125, 8000),
     (3, "ones", 1000, 0), (300, "varied", 2000, 8000)],
)  # fmt: skip
def test_what_is_stored(k: int | None, weights: str, label_bytes: int, weight_bytes: int) -> None:
    """Binary labels as bits, up to 256 classes as bytes, no column for uniform weights."""
    scores, labels, w, oof = _batch(1000, k, weights)
    data = bytes(encode_batch(scores, labels, w, oof))
    assert len(data) == HEADER.size + 2 * scores.nbytes + weight_bytes + label_bytes
    magic, version, flags, _, _, n, columns, _, weight = HEADER.unpack_from(data)
    assert (magic, version, n, columns) == (b"\x89CSBATCH", 1, 1000, k or 1)
    assert bool(flags & UNIFORM) == (weight_bytes == 0)
    assert np.frombuffer(weight)[0] == (w[0] if weight_bytes == 0 else 0.0)


@pytest.mark.parametrize("weights", ["ones", "varied"])
def test_reading_copies_only_the_labels(weights: str) -> None:
    """Floats are views of the blob and uniform weights a broadcast of the header's one; the
    labels alone are widened into a new int64 array (after unpacking, bits to bytes)."""
    n = 200_000
    scores, labels, w, oof = _batch(n, None, weights)
    data = bytes(encode_batch(scores, labels, w, oof))
    tracemalloc.start()
    try:
        batch = decode_batch(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 9 * n + 10_000  # int64 labels and the unpacked bits
    for array in (batch.scores, batch.out_of_fold, batch.weights):
        assert not array.flags.writeable
    assert batch.weights.strides == ((0,) if weights == "ones" else (8,))
    _assert_bits_equal(batch, scores, labels, w, oof)


def test_strided_and_fortran_arrays_are_written_in_row_order() -> None:
    scores, labels, w, oof = _batch(40, 3, "varied")
    batch = decode_batch(encode_batch(np.asfortranarray(scores), labels[::-1], w[::-1], oof))
    _assert_bits_equal(batch, scores, labels[::-1], w[::-1], oof)


def test_a_scalar_is_not_a_batch() -> None:
    with pytest.raises(ArtifactError, match="scores must have 1 or 2 dimensions, not 0"):
        encode_batch(0.5, 1, 1.0, 0.5)


def test_labels_past_65535_take_four_bytes() -> None:
    scores = np.zeros((2, 70_000))
    data = bytes(encode_batch(scores, [69_999, 0], np.ones(2), scores))
    assert (HEADER.unpack_from(data)[3], len(data)) == (4, HEADER.size + 2 * scores.nbytes + 8)
    assert decode_batch(data).labels.tolist() == [69_999, 0]


@pytest.mark.parametrize(("n", "k"), [(1, None), (40, None), (40, 4)])
def test_old_npz_rows_still_read(n: int, k: int | None) -> None:
    scores, labels, w, oof = _batch(n, k, "varied")
    data = old_encode_batch(scores, labels, w, oof)
    assert data[:4] == b"PK\x03\x04"
    _assert_bits_equal(decode_batch(data), scores, labels, w, oof)


def _npz(**arrays: NDArray[Any]) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


GOOD = {
    "scores": np.zeros(3),
    "labels": np.zeros(3, dtype=np.int64),
    "weights": np.ones(3),
    "out_of_fold": np.zeros(3),
}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_npz(**{**GOOD, "labels": np.array([0, "x", None], dtype=object)}), "cannot be read"),
        (_npz(**{**GOOD, "extra": np.zeros(3)}), "stored batch holds arrays"),
        (_npz(**{**GOOD, "labels": np.zeros(3)}), "batch labels must be int64, not float64"),
        (_npz(**{**GOOD, "labels": np.array([0, -1, 1])}), r"labels must lie in 0\.\.1"),
        (_npz(**{**GOOD, "weights": np.ones(4)}), "batch weights has 4 rows; scores have 3"),
        (_npz(**{**GOOD, "scores": np.zeros((3, 2, 2))}), "scores must have 1 or 2 dimensions"),
        (_npz(**{**GOOD, "scores": np.zeros((3, 3))}), "out_of_fold has shape"),
        (b"PK\x03\x04 not really a zip", "cannot be read"),
        (b"\x80\x04K\x01.", "cannot be read"),  # a pickle
        (b"", "cannot be read"),
        (b"\x89CSBATCH\x01\x00", "truncated: 10 bytes, shorter than its header"),
    ],
)
def test_unreadable_batches_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(ArtifactError, match=message):
        decode_batch(data)


def _reheader(data: bytes, **fields: Any) -> bytes:
    names = ("magic", "version", "flags", "width", "zero3", "n", "k", "zero4", "weight")
    values = dict(zip(names, HEADER.unpack_from(data), strict=True))
    return HEADER.pack(*{**values, **fields}.values()) + data[HEADER.size :]


BINARY = bytes(encode_batch([0.1, 0.7, 0.4], [0, 1, 1], [1.0, 2.0, 1.0], [0.2, 0.6, 0.5]))
MULTICLASS = bytes(encode_batch(np.eye(3), [0, 2, 1], np.ones(3), np.eye(3)))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_reheader(BINARY, version=2), "format_version 2 is newer than this release reads"),
        (_reheader(BINARY, version=0), "format_version 0 is unknown"),
        (_reheader(BINARY, flags=4), "unknown flags"),
        (_reheader(BINARY, zero3=b"\x00\x01\x00"), "unknown flags or fields"),
        (_reheader(BINARY, width=3), "label width 3"),
        (_reheader(BINARY, k=2), "k = 2 columns"),
        (_reheader(MULTICLASS, k=0), "k = 0 columns"),
        (_reheader(BINARY, weight=b"\x00" * 7 + b"\x3f"), "uniform weight without its flag"),
        (_reheader(BINARY, n=4), r"holds 113 bytes; its header \(n = 4, k = 1\) needs 137"),
        (_reheader(BINARY, n=2**63), "truncated or corrupted"),
        (_reheader(BINARY, flags=UNIFORM), "truncated or corrupted"),
        (BINARY[:-1], "truncated or corrupted"),
        (BINARY + b"\x00", "truncated or corrupted"),
        (BINARY[:-1] + b"\x0e", "bits set past the last row"),
        (MULTICLASS[:-1] + b"\x03", r"labels must lie in 0\.\.2, not 0\.\.3"),
    ],
)
def test_damaged_batches_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(ArtifactError, match=message):
        decode_batch(data)


def test_every_truncation_is_refused() -> None:
    for end in range(len(MULTICLASS)):
        with pytest.raises(ArtifactError):
            decode_batch(MULTICLASS[:end])


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ([0.0, 0.5], "whole numbers"),
        ([0.0, np.nan], "whole numbers"),
        ([0, -1], r"labels must lie in 0\.\.1, not -1\.\.0"),
        ([0, 2], r"labels must lie in 0\.\.1, not 0\.\.2"),
    ],
)
def test_labels_that_are_not_classes_are_refused_when_written(
    labels: list[float], message: str
) -> None:
    with pytest.raises(ArtifactError, match=message):
        encode_batch([0.1, 0.2], labels, [1.0, 1.0], [0.1, 0.2])


def test_mismatched_arrays_are_refused_when_written() -> None:
    with pytest.raises(ArtifactError, match="out_of_fold has shape"):
        encode_batch(np.eye(3), [0, 1, 2], np.ones(3), np.ones(3))
    with pytest.raises(ArtifactError, match="weights has 2 rows"):
        encode_batch([0.1, 0.2, 0.3], [0, 1, 1], [1.0, 1.0], [0.1, 0.2, 0.3])


@st.composite
def batches(draw: st.DrawFn) -> tuple[NDArray[Any], ...]:
    n = draw(st.integers(1, 40))
    k = draw(st.one_of(st.none(), st.integers(1, 5), st.just(300)))
    shape = (n,) if k is None else (n, k)
    floats = hnp.arrays(np.float64, shape, elements=st.floats(width=64))
    labels = hnp.arrays(np.int64, n, elements=st.integers(0, (k or 2) - 1))
    weights = st.one_of(
        st.floats(width=64).map(lambda value: np.full(n, value)),
        hnp.arrays(np.float64, n, elements=st.floats(width=64)),
    )
    return draw(floats), draw(labels), draw(weights), draw(floats)


@settings(max_examples=200, deadline=None)
@given(batch=batches())
def test_any_batch_round_trips_bit_for_bit(batch: tuple[NDArray[Any], ...]) -> None:
    _assert_bits_equal(decode_batch(encode_batch(*batch)), *batch)


@settings(max_examples=300, deadline=None)
@given(
    data=st.sampled_from([BINARY, MULTICLASS]),
    position=st.integers(0, 200),
    byte=st.integers(0, 255),
)
def test_a_damaged_byte_is_read_or_refused_never_crashes(
    data: bytes, position: int, byte: int
) -> None:
    damaged = bytearray(data)
    damaged[position % len(data)] = byte
    with contextlib.suppress(ArtifactError):  # anything else fails the test
        decode_batch(bytes(damaged))
