"""Sums over a k-class version's predictions that add up, as :class:`~app.calibration.
measures.rollups.BinaryRollup` is a binary version's: what monitoring keeps per version and
hour, and what a window's k-class figures are read from.

- The calibration of the labelled predictions, top-label (Guo et al., *On calibration of
  modern neural networks*, ICML 2017): a :class:`BinaryRollup` of each row's top-label
  confidence, "labelled" with whether its arg max was the label, its loss and Brier terms the
  multiclass log loss and Brier distance of the row. Its cells and fine bins give the
  reliability bins, the ECE and the intervals as a binary version's do.
- The expected accuracy, log loss and Brier of every prediction if the version is calibrated
  (:class:`~app.calibration.measures.expected.ClassSums`): exact sums.
- EM's rows for the window's priors (Saerens et al. 2002), which no fixed set of sums
  gives: per hour (a *stratum*), the :func:`sample_size` rows whose ids hash lowest, and how
  many rows the hour had. The lowest hashes of a union are the lowest of its parts' lowest,
  so an hour summed flush by flush keeps the same rows as one summed at once, and the same
  as its rows read back: each row then stands for the hour's rows over its sample's (a
  weighted EM). The rows are kept in float32, when added, so that every path reads the
  same numbers.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray
from app.calibration.measures.expected import ClassSums
from app.calibration.measures.multiclass_metrics import (
    brier_distances,
    multiclass_log_losses,
    top_label,
)
from app.calibration.measures.rollups import BinaryRollup

SAMPLE_ENTRIES = 3072
"""The numbers (rows times classes) an hour's sample keeps at most: 12 KB in float32, and 8
bytes of key a row (none past 3,072 classes)."""
MAX_SAMPLE_ROWS = 1024
"""The most rows an hour's sample keeps, whatever k."""

FORMAT = 2
"""The first byte of a k-class rollup's bytes (a binary one's is 1)."""
_HEADER = struct.Struct("<BIIIIqqqdddddd")


def sample_size(k: int) -> int:
    """The rows an hour's sample keeps for ``k`` classes."""
    return min(MAX_SAMPLE_ROWS, SAMPLE_ENTRIES // k)


def id_keys(ids: Sequence[str]) -> NDArray[np.uint64]:
    """Each client id's sampling key: the first 8 bytes of its BLAKE2b hash, uniform and the
    same on every replica and every read."""
    digests = b"".join(hashlib.blake2b(i.encode(), digest_size=8).digest() for i in ids)
    keys: NDArray[np.uint64] = np.frombuffer(digests, dtype="<u8").astype(np.uint64)
    return keys


class ClassRollup:
    """Sums over one k-class version's predictions (of an hour, or of any rows) that add up."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.n = 0
        self.n_labelled = 0
        self.top = BinaryRollup()
        self.expected = ClassSums()
        self.keys = np.zeros(0, dtype=np.uint64)
        self.rows = np.zeros((0, k), dtype=np.float32)
        self.hours = np.zeros(0, dtype=np.int64)  # each kept row's stratum
        self.strata: dict[int, int] = {}  # each stratum's rows, kept or not
        self.budget: int | None = None  # the numbers of sample a window holds (limit)

    @classmethod
    def of_hour(
        cls, p: FloatArray, labels: NDArray[np.int64], ids: Sequence[str], hour: int
    ) -> ClassRollup:
        """The rollup of rows of one hour (its number from the epoch): their probabilities
        (n, k), labels (-1: none yet) and client ids."""
        rollup = cls(p.shape[1])
        rollup.add_predictions(p, id_keys(ids), hour)
        known = labels >= 0
        rollup.add_labels(p[known], labels[known])
        return rollup

    def add_predictions(self, p: FloatArray, keys: NDArray[np.uint64], hour: int) -> None:
        """Predictions (n, k) of one hour (its number from the epoch), labelled or not, with
        their ids' :func:`id_keys`."""
        self.n += p.shape[0]
        self.top.add_predictions(p.max(axis=1))
        self.expected.add(p)
        lowest = np.argsort(keys, kind="stable")[: sample_size(self.k)]
        other = ClassRollup(self.k)
        other.keys, other.rows = keys[lowest], p[lowest].astype(np.float32)
        other.hours = np.full(lowest.size, hour, dtype=np.int64)
        other.strata = {hour: int(keys.size)}
        self._merge_samples(other)

    def add_labels(self, p: FloatArray, y: NDArray[np.int64], sign: int = 1) -> None:
        """The outcomes ``y`` of predictions already added; labels past k are counted as
        labelled only. ``sign=-1`` takes them out again."""
        self.n_labelled += sign * y.size
        known = (y >= 0) & (y < self.k)
        p, y = p[known], y[known]
        if not y.size:
            return
        confidence, correct = top_label(p, y)
        self.top.add_labels(
            confidence,
            correct,
            sign,
            loss=multiclass_log_losses(p, y),
            brier=brier_distances(p, y),
        )

    def add(self, other: ClassRollup) -> None:
        """Add ``other``'s rows to these (an hour both hold keeps one sample of it)."""
        if other.k != self.k:
            raise ValueError(f"rollups of {self.k} and {other.k} classes do not add up")
        self.n += other.n
        self.n_labelled += other.n_labelled
        self.top.add(other.top)
        self.expected.merge(other.expected)
        self._merge_samples(other)

    def limit(self, entries: int) -> None:
        """Hold at most ``entries`` numbers of sample: every hour keeps its rows of lowest key,
        at most ``entries`` / (k x hours) of them. The hours are trimmed as they come, when
        the sample outgrows the limit, and once more to the hours there are when it is read
        (:meth:`sample`): a cap from fewer hours is larger, so which rows stay depends only on
        the hours and the limit, not on the order they came in."""
        self.budget = entries
        if self.rows.size > entries:
            self._trim()

    def _trim(self) -> None:
        if self.budget is None or not self.strata:
            return
        cap = max(1, self.budget // (self.k * len(self.strata)))
        order = np.lexsort((self.keys, self.hours))
        hours = self.hours[order]
        starts = np.flatnonzero(np.r_[True, hours[1:] != hours[:-1]])
        rank = np.arange(hours.size) - np.repeat(starts, np.diff(np.r_[starts, hours.size]))
        kept = order[rank < cap]
        self.keys, self.rows, self.hours = self.keys[kept], self.rows[kept], self.hours[kept]

    def clamp(self) -> bool:
        """:meth:`BinaryRollup.clamp` of the labelled sums (and the count of labels)."""
        clamped = self.top.clamp() or self.n_labelled < 0
        self.n_labelled = max(self.n_labelled, 0)
        return clamped

    def sample(self) -> tuple[FloatArray, FloatArray]:
        """EM's rows and how many rows each stands for (its hour's rows over its sample's)."""
        self._trim()
        hours, kept = np.unique(self.hours, return_counts=True)
        seen = np.array([self.strata[int(h)] for h in hours], dtype=np.float64)
        weights = (seen / kept)[np.searchsorted(hours, self.hours)]
        return self.rows.astype(np.float64), weights

    def to_bytes(self) -> bytes:
        """The sums: a header, the labelled sums' :meth:`BinaryRollup.to_bytes`, the strata,
        then the kept rows (float32), all but the header through zlib."""
        strata = np.array(sorted(self.strata), dtype=np.int64)
        top = self.top.to_bytes()
        e = self.expected
        if strata.size > np.iinfo(np.uint16).max:
            raise ValueError(f"{strata.size} hours in one stored rollup")
        header = _HEADER.pack(
            FORMAT,
            self.k,
            sample_size(self.k),
            strata.size,
            self.keys.size,
            self.n,
            self.n_labelled,
            e.n,
            e.top,
            e.var_top,
            e.loss,
            e.var_loss,
            e.brier,
            e.var_brier,
        )
        parts = [
            np.array([len(top)], dtype="<u8").tobytes(),
            top,
            strata.astype("<i8").tobytes(),
            np.array([self.strata[int(s)] for s in strata], dtype="<i8").tobytes(),
            np.searchsorted(strata, self.hours).astype("<u2").tobytes(),
            self.keys.astype("<u8").tobytes(),
            self.rows.astype("<f4").tobytes(),
        ]
        return header + zlib.compress(b"".join(parts))

    @staticmethod
    def wrote(data: bytes | memoryview) -> bool:
        """Whether ``data`` are a k-class rollup's bytes (a binary one's start otherwise)."""
        return len(data) > 0 and data[0] == FORMAT

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> ClassRollup:
        """The sums :meth:`to_bytes` wrote."""
        fields = _HEADER.unpack_from(data)
        form, k, kept, n_strata, n_kept = fields[:5]
        if (form, kept) != (FORMAT, sample_size(k)):  # samples of another size do not merge
            raise ValueError(f"a k-class rollup of format {form}, samples of {kept} rows")
        rollup = cls(k)
        rollup.n, rollup.n_labelled = fields[5], fields[6]
        e = rollup.expected
        e.n, e.top, e.var_top, e.loss, e.var_loss, e.brier, e.var_brier = fields[7:]
        body = memoryview(zlib.decompress(data[_HEADER.size :]))
        size = int(np.frombuffer(body, dtype="<u8", count=1)[0])
        at = 8 + size
        rollup.top = BinaryRollup.from_bytes(body[8:at])

        def take(dtype: str, count: int) -> NDArray:  # type: ignore[type-arg]
            nonlocal at
            found = np.frombuffer(body, dtype=dtype, count=count, offset=at)
            at += found.nbytes
            return found

        strata = take("<i8", n_strata).astype(np.int64)
        seen = take("<i8", n_strata).astype(np.int64)
        rollup.strata = dict(zip(strata.tolist(), seen.tolist(), strict=True))
        rollup.hours = strata[take("<u2", n_kept).astype(np.intp)]
        rollup.keys = take("<u8", n_kept).astype(np.uint64)
        rollup.rows = take("<f4", n_kept * k).reshape(n_kept, k).astype(np.float32)
        return rollup

    def _merge_samples(self, other: ClassRollup) -> None:
        """Keep, per stratum, the :func:`sample_size` rows of lowest key of both: an hour
        only one of them holds is kept as it is (a window's hours never meet), one both hold
        (an hour and a flush into it) chosen again."""
        shared = np.array(sorted(set(self.strata) & set(other.strata)), dtype=np.int64)
        for hour, seen in other.strata.items():
            self.strata[hour] = self.strata.get(hour, 0) + seen
        if not shared.size:
            self.keys = np.concatenate([self.keys, other.keys])
            self.rows = np.concatenate([self.rows, other.rows])
            self.hours = np.concatenate([self.hours, other.hours])
            return
        mine, theirs = np.isin(self.hours, shared), np.isin(other.hours, shared)
        keys = np.concatenate([self.keys[mine], other.keys[theirs]])
        rows = np.concatenate([self.rows[mine], other.rows[theirs]])
        hours = np.concatenate([self.hours[mine], other.hours[theirs]])
        order = np.lexsort((keys, hours))  # by stratum, then key
        hours, keys, rows = hours[order], keys[order], rows[order]
        starts = np.flatnonzero(np.r_[True, hours[1:] != hours[:-1]])
        rank = np.arange(hours.size) - np.repeat(starts, np.diff(np.r_[starts, hours.size]))
        kept = rank < sample_size(self.k)
        self.keys = np.concatenate([self.keys[~mine], other.keys[~theirs], keys[kept]])
        self.rows = np.concatenate([self.rows[~mine], other.rows[~theirs], rows[kept]])
        self.hours = np.concatenate([self.hours[~mine], other.hours[~theirs], hours[kept]])
