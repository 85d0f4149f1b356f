"""The prediction log's reads over days exported to object storage (:mod:`app.store.history`).

:class:`HistoryReads` keeps :class:`~app.store.traffic.reads.TrafficReads`' reads and their
answers: a range is cut, in time order, into exported days, each read from its Parquet file
(downloaded, checked against its sha256, filtered to the range, the version and the rows
asked for, a row group at a time), and stretches without one, read from the database as
before. A range that reaches no exported day is one such stretch, after one look at
``exported_days`` by its key. Exported days are the oldest, so the files come first, then
the database. Counts over a whole exported day are the ones recorded with it; a missing or
corrupt file is :class:`~app.errors.ObjectStoreUnavailable` (503), as a blob's is.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from app.errors import ObjectStoreUnavailable, invalid
from app.store.sql import postgresql
from app.store.traffic.day_files import TIME, file_sha256, read_day
from app.store.traffic.exports import ExportOperations, ExportRecord
from app.store.traffic.periods import DAY
from app.store.traffic.reads import (
    ClassRows,
    FloatArray,
    LabelledTraffic,
    MixedClasses,
    TrafficReads,
    _check_labelled,
)


@dataclass(frozen=True)
class _Part:
    """[since, until) of a range: within one exported ``day``, or with none (the database)."""

    since: datetime | None
    until: datetime
    day: ExportRecord | None = None

    @property
    def whole(self) -> bool:
        """Whether the part is its exported day from start to end."""
        return self.day is not None and (self.since, self.until) == (
            self.day.start,
            self.day.start + DAY,
        )


class HistoryReads(ExportOperations, TrafficReads):
    """:class:`TrafficReads` over the database and the exported days' files."""

    def traffic_counts(
        self, name: str, since: datetime | None, until: datetime, version: int | None = None
    ) -> dict[int, tuple[int, int]]:
        parts = self._parts(name, since, until)
        if parts[0].day is None and len(parts) == 1:
            return super().traffic_counts(name, since, until, version)
        totals: dict[int, tuple[int, int]] = {}
        for part in parts:
            if part.day is None:
                counted = super().traffic_counts(name, part.since, part.until, version)
            elif part.whole:
                counted = {int(v): (n, k) for v, (n, k) in part.day.counts.items()}
            else:
                counted = self._file_counts(part)
            for v, (n, labelled) in counted.items():
                if version is None or v == version:
                    before = totals.get(v, (0, 0))
                    totals[v] = (before[0] + n, before[1] + labelled)
        return dict(sorted(totals.items()))

    def traffic_chunks(
        self,
        name: str,
        since: datetime,
        until: datetime,
        version: int | None = None,
        *,
        labelled: bool = False,
    ) -> Iterator[FloatArray]:
        parts = self._parts(name, since, until)
        for part in parts:
            if part.day is None:
                start = cast(datetime, part.since)
                yield from super().traffic_chunks(
                    name, start, part.until, version, labelled=labelled
                )
                continue
            wanted = ("score", "probability", "label")
            for table in self._file(part, version, wanted, ("label",) if labelled else ()):
                yield np.column_stack(
                    [
                        self._seconds_of(table),
                        _floats(table["version"]),
                        _floats(table["score"]),
                        _floats(table["probability"]),
                        _floats(table["label"].fill_null(-1)),
                    ]
                )

    def class_row_chunks(
        self, name: str, since: datetime, until: datetime, version: int | None = None
    ) -> Iterator[tuple[int, ClassRows]]:
        for part in self._parts(name, since, until):
            if part.day is None:
                start = cast(datetime, part.since)
                yield from super().class_row_chunks(name, start, part.until, version)
                continue
            wanted = ("label", "probabilities_row", "client_id")
            for table in self._file(part, version, wanted, ("probabilities_row",)):
                seconds, versions = self._seconds_of(table), table["version"].to_numpy()
                labels = table["label"].fill_null(-1).to_numpy().astype(np.int64)
                for v in dict.fromkeys(versions.tolist()):
                    mine = versions == v
                    rows = _matrix(table["probabilities_row"].filter(pa.array(mine)))
                    ids = table["client_id"].filter(pa.array(mine)).to_pylist()
                    yield int(v), ClassRows(seconds[mine], rows, labels[mine], ids)

    def labelled_traffic(
        self,
        name: str,
        since: datetime | None,
        until: datetime,
        version: int | None = None,
        *,
        max_rows: int,
    ) -> LabelledTraffic:
        parts = self._parts(name, since, until)
        if parts[0].day is None and len(parts) == 1:
            return super().labelled_traffic(name, since, until, version, max_rows=max_rows)
        counts = self.traffic_counts(name, since, until, version)
        _check_labelled(counts, max_rows)
        scores, labels, row_labels = [np.empty(0)], [np.empty(0)], [np.empty(0)]
        matrices: list[FloatArray] = []
        for part in parts:
            if part.day is None:
                read = super().labelled_traffic(
                    name, part.since, part.until, version, max_rows=max_rows
                )
                scores.append(read.scores)
                labels.append(read.labels)
                matrices.append(read.score_rows)
                row_labels.append(read.row_labels)
                continue
            for table in self._file(part, version, ("score", "scores_row", "label"), ("label",)):
                binary = table["score"].is_valid()
                pairs, rows = table.filter(binary), table.filter(pc.invert(binary))
                scores.append(_floats(pairs["score"]))
                labels.append(_floats(pairs["label"]))
                matrices.append(_matrix(rows["scores_row"]))
                row_labels.append(_floats(rows["label"]))
        try:
            matrix = _stacked(matrices)
        except MixedClasses as exc:
            raise invalid(("from_traffic", "version"), str(exc)) from None
        score, label = np.concatenate(scores), np.concatenate(labels)
        order = np.lexsort((label, score))  # as the database pools them: by score, then label
        return LabelledTraffic(
            score[order], label[order], matrix, np.concatenate(row_labels), counts
        )

    def labelled_class_rows(
        self, name: str, since: datetime, until: datetime, version: int | None
    ) -> tuple[FloatArray, FloatArray, NDArray[np.int64]]:
        scores: list[FloatArray] = []
        probabilities: list[FloatArray] = []
        labels = [np.empty(0, dtype=np.int64)]
        for part in self._parts(name, since, until):
            if part.day is None:
                start = cast(datetime, part.since)
                read = super().labelled_class_rows(name, start, part.until, version)
                scores.append(read[0])
                probabilities.append(read[1])
                labels.append(read[2])
                continue
            wanted = ("scores_row", "probabilities_row", "label")
            for table in self._file(part, version, wanted, ("label", "scores_row")):
                scores.append(_matrix(table["scores_row"]))
                probabilities.append(_matrix(table["probabilities_row"]))
                labels.append(table["label"].to_numpy().astype(np.int64))
        return _stacked(scores), _stacked(probabilities), np.concatenate(labels)

    def _parts(self, name: str, since: datetime | None, until: datetime) -> list[_Part]:
        """[since, until) cut into its exported days and the stretches between, in order."""
        last = (until - timedelta(microseconds=1)).astimezone(UTC).date()
        first = None if since is None else since.astimezone(UTC).date()
        parts: list[_Part] = []
        at = since
        for record in self.exported_days(name, first, last):
            start = record.start
            if at is None or at < start:
                parts.append(_Part(at, start))
            parts.append(
                _Part(start if at is None else max(at, start), min(start + DAY, until), record)
            )
            at = parts[-1].until
        if at is None or at < until:
            parts.append(_Part(at, until))
        return parts

    def _file_counts(self, part: _Part) -> dict[int, tuple[int, int]]:
        """Each version's (predictions, labelled) in a part of an exported day."""
        counts: dict[int, tuple[int, int]] = {}
        for table in self._file(part, None, ("label",), ()):
            versions = table["version"].to_numpy()
            labelled = table["label"].is_valid().to_numpy(zero_copy_only=False)
            for v in np.unique(versions).tolist():
                n, k = counts.get(v, (0, 0))
                mine = versions == v
                counts[v] = (n + int(mine.sum()), k + int((mine & labelled).sum()))
        return counts

    def _file(
        self, part: _Part, version: int | None, columns: Sequence[str], present: Sequence[str]
    ) -> Iterator[pa.Table]:
        """The rows of ``part``'s day file in [since, until), of ``version`` (None: all), with
        every column of ``present`` not null: ``predicted_at``, ``version`` and ``columns``,
        a row group at a time."""
        record = cast(ExportRecord, part.day)
        objects = self._objects
        if objects is None:
            raise ObjectStoreUnavailable(
                f"{record.name}'s traffic of {record.day} is in object storage "
                f"({record.object_key}), and CALIBRATION_BLOB_URL is not set"
            )
        shown = f"s3://{objects.location.bucket}/{record.object_key}"
        with tempfile.TemporaryDirectory(prefix="history-") as folder:
            path = Path(folder) / "day.parquet"
            objects.download_file(record.object_key, path)
            if file_sha256(path) != record.sha256:
                raise ObjectStoreUnavailable(
                    f"the traffic history file {shown} fails its sha256 check; "
                    "restore it from a backup of the bucket"
                )
            wanted = list(dict.fromkeys(("predicted_at", "version", *columns)))
            since = pa.scalar(part.since or record.start, TIME)
            until = pa.scalar(part.until, TIME)
            for table in read_day(path, shown, wanted):
                at = table["predicted_at"]
                keep = pc.and_(pc.greater_equal(at, since), pc.less(at, until))
                if version is not None:
                    keep = pc.and_(keep, pc.equal(table["version"], version))
                for column in present:
                    keep = pc.and_(keep, pc.is_valid(table[column]))
                kept = table.filter(keep)
                if kept.num_rows:
                    yield kept

    def _seconds_of(self, table: pa.Table) -> FloatArray:
        """``predicted_at`` as seconds since the epoch, rounded as the database's own reads
        round them (:meth:`TrafficReads._seconds`), so both give the same floats."""
        at = table["predicted_at"].cast(pa.int64()).to_numpy()
        if postgresql(self._session):  # the exact decimal, rounded once
            return cast(FloatArray, at / 1e6)
        whole, fraction = np.divmod(at, 1_000_000)  # SQLite: seconds, plus the fraction
        return cast(FloatArray, whole.astype(np.float64) + fraction / 1e6)


def _floats(column: pa.ChunkedArray) -> FloatArray:
    """A column of numbers as float64, nulls as NaN."""
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)


def _matrix(rows: pa.ChunkedArray | pa.Array) -> FloatArray:
    """A column of rows of k float64 each as an (n, k) matrix; :class:`MixedClasses` when
    the rows differ in k."""
    lengths = pc.list_value_length(rows).to_numpy(zero_copy_only=False)
    widths = sorted(set(lengths.tolist()))
    if len(widths) > 1:
        raise MixedClasses(widths)
    values = pc.list_flatten(rows).to_numpy(zero_copy_only=False).astype(np.float64)
    return cast(FloatArray, values.reshape(-1, widths[0] if widths else 1))


def _stacked(matrices: Sequence[FloatArray]) -> FloatArray:
    """Matrices of rows one under the other (the empty ones left out: their width is none);
    :class:`MixedClasses` when their widths differ."""
    full = [m for m in matrices if m.shape[0]]
    widths = sorted({m.shape[1] for m in full})
    if len(widths) > 1:
        raise MixedClasses(widths)
    return np.concatenate(full) if full else np.empty((0, 1))
