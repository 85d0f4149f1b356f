"""A calibrator's day of the prediction log as a Parquet file: written from the rows as the
database streams them, patched with outcomes that came late, read back a row group at a time.

The columns are the log's (:data:`SCHEMA`): the client's id, the version, the time, the raw
score and probability of a binary version or the rows (``list<double>``) of a k-class one,
null for the other kind, and the outcome and its time once known. The name and the day are
in the file's key (:meth:`app.store.objects.BlobLocation.history_key`), hive-style, as
DuckDB, Spark, pyarrow and pandas read them. A file is written :data:`GROUP_ROWS` rows at a
time, each a row group, so neither writing nor reading holds more than that many rows in
memory, whatever the day's traffic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from app.errors import ObjectStoreUnavailable
from app.store.traffic.periods import EPOCH

TIME = pa.timestamp("us", tz="UTC")
ROW = pa.list_(pa.float64())
SCHEMA = pa.schema(
    [
        pa.field("client_id", pa.string(), nullable=False),
        pa.field("version", pa.int32(), nullable=False),
        pa.field("predicted_at", TIME, nullable=False),
        ("score", pa.float64()),
        ("probability", pa.float64()),
        ("scores_row", ROW),
        ("probabilities_row", ROW),
        ("label", pa.int32()),
        ("labelled_at", TIME),
    ]
)
"""The columns of a day's file, in the order the database's rows give them
(:meth:`app.store.traffic.exports.ExportOperations.day_rows`; times in microseconds)."""

GROUP_ROWS = 50_000
"""Rows fetched from the database, and written as one row group, at a time."""


@dataclass(frozen=True)
class DayFile:
    """A day's file as written: where, its sha256, and what it holds (its rows, its labelled
    rows, both by version, the last time an outcome labelled one of them)."""

    path: Path
    sha256: str
    rows: int
    labelled: int
    counts: dict[str, list[int]]
    last_labelled_at: datetime | None


def write_day(chunks: Iterable[Sequence[tuple[Any, ...]]], path: Path) -> DayFile:
    """Write the rows of ``chunks`` (the database's, in :data:`SCHEMA`'s order) to ``path``, a
    row group a chunk."""
    with _Writer(path) as writer:
        for chunk in chunks:
            writer.write(_batch(chunk))
    return writer.written


def patch_day(source: Path, late: Mapping[str, tuple[int, int]], path: Path) -> DayFile:
    """``source`` written again to ``path`` with the outcomes in ``late`` (client id → label,
    its time in microseconds) in place of those it holds: the rows of a day labelled after
    its file was read, whose rows have partly left the database."""
    ids = pa.array(list(late), pa.string())
    labels = pa.array([label for label, _ in late.values()], pa.int32())
    times = pa.array([at for _, at in late.values()], TIME)
    with _Writer(path) as writer:
        for table in read_day(source, str(source)):
            at = pc.index_in(table["client_id"], value_set=ids)
            found = pc.is_valid(at)
            table = table.set_column(
                7, "label", pc.if_else(found, pc.take(labels, at), table["label"])
            )
            table = table.set_column(
                8, "labelled_at", pc.if_else(found, pc.take(times, at), table["labelled_at"])
            )
            writer.write(table)
    return writer.written


def read_day(path: Path, shown: str, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
    """The row groups of the day's file at ``path`` (of ``columns``, default all), in order;
    a file that is not such a Parquet file is :class:`ObjectStoreUnavailable` naming it as
    ``shown``."""
    try:
        opened = pq.ParquetFile(path)
        if not opened.schema_arrow.equals(SCHEMA):
            raise pa.ArrowInvalid("its columns are not the prediction log's")
        groups = opened.num_row_groups
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(shown, exc) from None
    for group in range(groups):
        try:
            table = opened.read_row_group(group, columns=columns)
        except (pa.ArrowException, OSError) as exc:
            raise _unreadable(shown, exc) from None
        yield table


def file_sha256(path: Path) -> str:
    """The sha256 of the file at ``path`` in hex, read a megabyte at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def instant(microseconds: int) -> datetime:
    """The UTC time ``microseconds`` after the epoch, exactly."""
    return EPOCH + timedelta(microseconds=microseconds)


class _Writer:
    """A Parquet writer of :data:`SCHEMA` that counts what it writes."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._writer = pq.ParquetWriter(path, SCHEMA, compression="zstd")
        self._counts: dict[int, list[int]] = {}
        self._last: int | None = None

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, *failed: object) -> None:
        self._writer.close()
        if failed[0] is None:
            self.written = self._done()

    def write(self, table: pa.Table | pa.RecordBatch) -> None:
        self._writer.write(table)
        versions = table["version"].to_numpy()
        labelled = table["label"].is_valid().to_numpy(zero_copy_only=False)
        for v, n in zip(*np.unique(versions, return_counts=True), strict=True):
            self._counts.setdefault(int(v), [0, 0])[0] += int(n)
        for v, n in zip(*np.unique(versions[labelled], return_counts=True), strict=True):
            self._counts[int(v)][1] += int(n)
        last = pc.max(table["labelled_at"]).cast(pa.int64()).as_py()
        if last is not None and (self._last is None or last > self._last):
            self._last = last

    def _done(self) -> DayFile:
        return DayFile(
            self._path,
            file_sha256(self._path),
            sum(n for n, _ in self._counts.values()),
            sum(labelled for _, labelled in self._counts.values()),
            {str(v): counts for v, counts in sorted(self._counts.items())},
            None if self._last is None else instant(self._last),
        )


def _batch(rows: Sequence[tuple[Any, ...]]) -> pa.RecordBatch:
    """The database's rows as a record batch of :data:`SCHEMA`."""
    ids, versions, at, scores, probabilities, score_rows, rows_answered, labels, labelled = zip(
        *rows, strict=True
    )
    return pa.record_batch(
        [
            pa.array(ids, pa.string()),
            pa.array(versions, pa.int32()),
            pa.array(at, TIME),
            pa.array(scores, pa.float64()),
            pa.array(probabilities, pa.float64()),
            _rows(score_rows),
            _rows(rows_answered),
            pa.array(labels, pa.int32()),
            pa.array(labelled, TIME),
        ],
        schema=SCHEMA,
    )


def _rows(values: Sequence[bytes | None]) -> pa.Array:
    """Rows of little-endian float64 bytes (None for a binary version's row) as lists."""
    if all(value is None for value in values):
        return pa.nulls(len(values), ROW)
    lengths = np.fromiter((len(v) // 8 if v is not None else 0 for v in values), np.int32)
    offsets = np.concatenate([np.zeros(1, np.int32), np.cumsum(lengths, dtype=np.int32)])
    flat = np.frombuffer(b"".join(v for v in values if v is not None), dtype="<f8")
    missing = pa.array([value is None for value in values])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, pa.float64()), mask=missing)


def _unreadable(shown: str, exc: BaseException) -> ObjectStoreUnavailable:
    return ObjectStoreUnavailable(f"the traffic history file {shown} cannot be read: {exc}")
