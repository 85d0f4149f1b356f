"""Reading the prediction log into arrays: monitoring's columns and a refit's batch.

Never a Python object per row that outlives its chunk: PostgreSQL sends the rows as binary
``COPY``, which numpy parses as fixed-size records a chunk at a time
(:func:`app.store.traffic.binary_copy.copied_chunks`); SQLite's come :data:`FETCH_ROWS` at a time
into arrays. Monitoring
reads a range as a stream of such chunks, so its memory does not grow with the traffic. A
refit's binary pairs are pooled by ``GROUP BY`` first, so tied scores cross the wire once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from app.errors import PayloadTooLarge, invalid
from app.store.session import RepositoryBase
from app.store.sql import placeholder, postgresql, time_param
from app.store.traffic.binary_copy import copied_chunks

FloatArray = NDArray[np.float64]

FETCH_ROWS = 10_000
"""Rows fetched at a time when SQLite reads traffic into arrays (and k-class rows anywhere)."""


TRAFFIC_COLUMNS = ("seconds", "version", "score", "probability", "label")
"""The columns of :meth:`TrafficReads.traffic_chunks`, in order."""


@dataclass(frozen=True)
class LabelledTraffic:
    """The labelled predictions of a range: binary rows as ``scores`` and ``labels``, k-class
    rows as ``score_rows`` (n, k) and ``row_labels``; ``counts`` maps each version that
    answered in the range to its (predictions, labelled) counts."""

    scores: FloatArray
    labels: FloatArray
    score_rows: FloatArray
    row_labels: FloatArray
    counts: dict[int, tuple[int, int]]


class MixedClasses(ValueError):
    """The traffic read holds rows of versions with different numbers of classes."""

    def __init__(self, classes: Sequence[int]) -> None:
        listed = ", ".join(str(k) for k in classes)
        super().__init__(f"the traffic holds rows of {listed} classes; choose one version")


class ClassRows(NamedTuple):
    """One k-class version's logged predictions: times, probabilities (n, k), labels, and
    the client's ids."""

    seconds: FloatArray
    probabilities: FloatArray
    labels: NDArray[np.int64]
    ids: list[str]


class TrafficReads(RepositoryBase):
    """The logged predictions of a calibrator as arrays."""

    def traffic_counts(
        self, name: str, since: datetime | None, until: datetime, version: int | None = None
    ) -> dict[int, tuple[int, int]]:
        """Each version that answered ``name`` in [since, until) (or the one ``version``):
        its (predictions, labelled) counts, counted in the database."""
        where, params = self._traffic_filter(name, since, until, version)
        counted = self._session.connection().exec_driver_sql(
            f"SELECT version, count(*), count(label) FROM predictions WHERE {where} "
            "GROUP BY version ORDER BY version",
            params,
        )
        return {int(v): (int(n), int(labelled)) for v, n, labelled in counted}

    def traffic_chunks(
        self,
        name: str,
        since: datetime,
        until: datetime,
        version: int | None = None,
        *,
        labelled: bool = False,
    ) -> Iterator[FloatArray]:
        """The logged predictions of ``name`` in [since, until) (of one ``version``, or only
        the ``labelled`` ones), in time order, as float64 arrays of :data:`TRAFFIC_COLUMNS`
        (seconds since the epoch, version, raw score, probability, label), a chunk of rows
        at a time: NaN score and probability for rows of k-class versions, label -1 while
        there is none. Read within the unit of work: consume it before the transaction ends.
        """
        sqlite = not postgresql(self._session)
        nan = "NULL" if sqlite else "'NaN'"
        columns = (
            self._seconds(),
            "version",
            f"coalesce(score, {nan})",
            f"coalesce(probability, {nan})",
            "coalesce(label, -1)",
        )
        where, params = self._traffic_filter(
            name, since, until, version, *(["label IS NOT NULL"] if labelled else [])
        )
        statement = (
            f"SELECT {self._numbers(columns)} FROM predictions WHERE {where} ORDER BY predicted_at"
        )
        return self._float_chunks(statement, params, len(TRAFFIC_COLUMNS))

    def labelled_columns(
        self, name: str, since: datetime, until: datetime, version: int | None, *, max_rows: int
    ) -> FloatArray:
        """The labelled rows of :meth:`traffic_chunks` as one (n, 5) array; 413 before
        anything is read when more than ``max_rows`` are labelled."""
        _check_labelled(self.traffic_counts(name, since, until, version), max_rows)
        chunks = self.traffic_chunks(name, since, until, version, labelled=True)
        return _stacked(chunks, len(TRAFFIC_COLUMNS))

    def class_row_chunks(
        self, name: str, since: datetime, until: datetime, version: int | None = None
    ) -> Iterator[tuple[int, ClassRows]]:
        """The logged predictions of ``name``'s k-class versions in [since, until) (of one
        ``version``), in time order, :data:`FETCH_ROWS` rows at a time, by version: seconds
        since the epoch, the (n, k) probabilities answered, the labels (-1 while there is
        none), the ids. Each row's probabilities are bytes, which no binary ``COPY`` of
        numbers can carry. Read within the unit of work."""
        where, params = self._traffic_filter(
            name, since, until, version, "probabilities_row IS NOT NULL"
        )
        result = self._session.connection().exec_driver_sql(
            f"SELECT {self._seconds()}, version, coalesce(label, -1), probabilities_row, "
            f"client_id FROM predictions WHERE {where} ORDER BY predicted_at",
            params,
        )
        while chunk := result.fetchmany(FETCH_ROWS):
            parts: dict[int, list[tuple[float, int, bytes, str]]] = {}
            for seconds, v, label, row, client_id in chunk:
                parts.setdefault(int(v), []).append((float(seconds), int(label), row, client_id))
            for v, found in parts.items():
                times, labels, rows, ids = zip(*found, strict=True)
                matrix = np.frombuffer(b"".join(map(bytes, rows)), dtype="<f8")
                yield (
                    v,
                    ClassRows(
                        np.array(times),
                        matrix.reshape(len(rows), -1).astype(np.float64),
                        np.array(labels, dtype=np.int64),
                        list(ids),
                    ),
                )

    def _seconds(self) -> str:
        """``predicted_at`` as seconds since the epoch, in SQL."""
        if postgresql(self._session):
            return "extract(epoch FROM predicted_at)"
        return "CAST(strftime('%s', predicted_at) AS REAL) + CAST(substr(predicted_at, 20) AS REAL)"

    def labelled_traffic(
        self,
        name: str,
        since: datetime | None,
        until: datetime,
        version: int | None = None,
        *,
        max_rows: int,
    ) -> LabelledTraffic:
        """The labelled predictions of ``name`` in [since, until) (of one ``version``) as a
        batch to fit on, with the counts of the whole range by version; 413 before anything
        is read when more than ``max_rows`` are labelled.

        Binary rows come pooled: one (score, label, count) per distinct pair, from a
        ``GROUP BY`` in the database, expanded back to rows by numpy (in score order), so
        that tied scores cross the wire once and no row becomes a Python object. k-class
        rows (their float64 rows of scores) come :data:`FETCH_ROWS` at a time, in time order.
        """
        counts = self.traffic_counts(name, since, until, version)
        _check_labelled(counts, max_rows)
        where, params = self._traffic_filter(name, since, until, version)
        pairs = _stacked(
            self._float_chunks(
                f"SELECT {self._numbers(('score', 'label', 'count(*)'))} FROM predictions "
                f"WHERE {where} AND label IS NOT NULL AND score IS NOT NULL "
                "GROUP BY score, label ORDER BY score, label",
                params,
                3,
            ),
            3,
        )
        repeats = pairs[:, 2].astype(np.int64)
        scores = np.repeat(pairs[:, 0], repeats)
        labels = np.repeat(pairs[:, 1], repeats)
        try:
            (matrix,), row_labels = self._labelled_rows(where, params, ("scores_row",))
        except MixedClasses as exc:
            raise invalid(("from_traffic", "version"), str(exc)) from None
        return LabelledTraffic(scores, labels, matrix, row_labels.astype(np.float64), counts)

    def labelled_class_rows(
        self, name: str, since: datetime, until: datetime, version: int | None
    ) -> tuple[FloatArray, FloatArray, NDArray[np.int64]]:
        """The labelled predictions of ``name``'s k-class versions in [since, until) (of one
        ``version``), in time order: the (n, k) raw scores, the (n, k) probabilities answered,
        the labels; :class:`MixedClasses` when the versions differ in k."""
        where, params = self._traffic_filter(name, since, until, version)
        (scores, probabilities), labels = self._labelled_rows(
            where, params, ("scores_row", "probabilities_row")
        )
        return scores, probabilities, labels

    def _labelled_rows(
        self, where: str, params: tuple[Any, ...], columns: Sequence[str]
    ) -> tuple[list[FloatArray], NDArray[np.int64]]:
        """The labelled k-class rows that match ``where``: each of ``columns`` (rows of
        float64 bytes) as an (n, k) matrix, and the labels; read :data:`FETCH_ROWS` at a
        time, in time order. :class:`MixedClasses` when the rows differ in k."""
        result = self._session.connection().exec_driver_sql(
            f"SELECT label, {', '.join(columns)} FROM predictions WHERE {where} "
            f"AND label IS NOT NULL AND {columns[0]} IS NOT NULL ORDER BY predicted_at",
            params,
        )
        blocks: list[list[bytes]] = [[] for _ in columns]
        labels: list[int] = []
        widths: set[int] = set()
        while chunk := result.fetchmany(FETCH_ROWS):
            widths.update(len(row[1]) for row in chunk)
            labels.extend(int(row[0]) for row in chunk)
            for j, parts in enumerate(blocks, start=1):
                parts.append(b"".join(bytes(row[j]) for row in chunk))
        if len(widths) > 1:
            raise MixedClasses(sorted(w // 8 for w in widths))
        k = widths.pop() // 8 if widths else 1
        matrices = [
            np.frombuffer(b"".join(parts), dtype="<f8").reshape(-1, k).astype(np.float64)
            for parts in blocks
        ]
        return matrices, np.array(labels, dtype=np.int64)

    def _traffic_filter(
        self,
        name: str,
        since: datetime | None,
        until: datetime,
        version: int | None,
        *more: str,
    ) -> tuple[str, tuple[Any, ...]]:
        """The WHERE clause (and its parameters) of ``name``'s predictions in [since, until),
        of one ``version``, with ``more`` conditions."""
        mark = placeholder(self._session)
        where = [f"name = {mark}", f"predicted_at < {mark}", *more]
        params: list[Any] = [name, time_param(self._session, until)]
        if since is not None:
            where.append(f"predicted_at >= {mark}")
            params.append(time_param(self._session, since))
        if version is not None:
            where.append(f"version = {mark}")
            params.append(version)
        return " AND ".join(where), tuple(params)

    def _numbers(self, columns: Sequence[str]) -> str:
        """``columns`` for a SELECT whose rows :meth:`_float_chunks` reads: each a float8 on
        PostgreSQL, as its binary ``COPY`` parser expects."""
        if postgresql(self._session):
            return ", ".join(f"({column})::float8" for column in columns)
        return ", ".join(columns)

    def _float_chunks(
        self, statement: str, params: tuple[Any, ...], width: int
    ) -> Iterator[FloatArray]:
        """The rows of ``statement`` (``width`` columns of numbers, none NULL but on SQLite,
        where NULL reads as NaN) as (n, width) float64 arrays, a chunk at a time."""
        raw: Any = self._session.connection().connection.driver_connection
        if postgresql(self._session):
            with raw.cursor() as cursor:
                copy = f"COPY ({statement}) TO STDOUT (FORMAT binary)"
                with cursor.copy(copy, params) as stream:
                    yield from copied_chunks(stream, width)
            return
        rows = raw.execute(statement, params)  # sqlite3's tuples: 40 times faster than Rows
        while chunk := rows.fetchmany(FETCH_ROWS):
            yield np.array(chunk, dtype=np.float64)


def _check_labelled(counts: Mapping[int, tuple[int, int]], max_rows: int) -> None:
    """413 when the (predictions, labelled) ``counts`` of a range hold more labelled
    predictions than a batch may (they would be read as one)."""
    labelled = sum(labelled for _, labelled in counts.values())
    if labelled > max_rows:
        raise PayloadTooLarge(
            f"the range holds {labelled} labelled predictions; a batch may have {max_rows}"
        )


def _stacked(chunks: Iterable[FloatArray], width: int) -> FloatArray:
    """The chunks of rows as one (n, width) array."""
    return np.concatenate([np.empty((0, width)), *chunks])
