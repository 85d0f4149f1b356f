"""One binary version's traffic of one hour, summed so that hours add up: what monitoring reads
in place of the logged rows.

Every measure of a monitoring window is a sum over its rows divided by a count, or a
function of counts and sums per bin of the probability (the reliability bins, the expected
and realized AUC, EM's bin means, the confusion counts at a threshold), or of counts per bin
of the raw score (PSI and KS, :mod:`~app.calibration.measures.score_reference`). So an
hour's rows are kept as sums per *cell* of the probability, and windows add hours.

The cells cut (0, 1] at the union of two grids, right-closed, (e_{c-1}, e_c]:

- :data:`FINE_BINS` uniform bins, so the reliability bins of any ``n_bins`` that divides
  :data:`FINE_BINS` are unions of cells (the binned ECE is the rows' own, to rounding), and
  so is a threshold at a multiple of 1 / :data:`FINE_BINS`;
- steps of :data:`LOGIT_STEP` in log odds over [-:data:`LOGIT_LIMIT`, :data:`LOGIT_LIMIT`],
  so that a fraud model's 0.001 and 0.002 fall apart as 0.5 and 0.501 do: the AUC and EM
  read the cells as :class:`~app.calibration.measures.logit_bins.ProbabilityBins` reads its
  finer bins.

A cell keeps the count, sum of p and of p (1 - p) of every prediction, and the positives and
negatives of the labelled ones; each fine bin keeps the sums of the labelled rows' p, log
loss and Brier terms and their second moments with p - y (the intervals of
:class:`~app.service.traffic.sums.CalibrationSums`); the hour keeps the expected log loss
and the variances of the expected measures. An outcome posted later adds its label to its
prediction's hour (:meth:`BinaryRollup.add_labels`); an overwritten one is taken out first
(``sign=-1``). Stored in a few kilobytes (:meth:`BinaryRollup.to_bytes`).
"""

from __future__ import annotations

import struct

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray
from app.calibration.measures.expected import EPS

FINE_BINS = 20
LOGIT_STEP = 0.25
LOGIT_LIMIT = 16.0


def _cell_edges() -> FloatArray:
    """The inner edges of the cells: the fine bins' and the log-odds grid's, in p."""
    steps = int(2 * LOGIT_LIMIT / LOGIT_STEP)
    z = -LOGIT_LIMIT + LOGIT_STEP * np.arange(1, steps)
    uniform = np.arange(1, FINE_BINS) / FINE_BINS  # j / 20, each rounded once
    return np.unique(np.concatenate([1.0 / (1.0 + np.exp(-z)), uniform]))


CELL_EDGES = _cell_edges()
CELLS = CELL_EDGES.size + 1
CELL_LOWER = np.concatenate([[0.0], CELL_EDGES])
CELL_UPPER = np.concatenate([CELL_EDGES, [1.0]])
CELL_FINE = np.searchsorted(np.arange(1, FINE_BINS) / FINE_BINS, CELL_UPPER, side="left")
"""The fine bin each cell lies in."""

MOMENTS = ("loss", "brier", "predicted", "dd", "dl", "db", "ll", "lb", "bb", "spread")
"""What each fine bin sums over its labelled rows, with d = p - y: the loss and Brier terms,
p, their products with each other and with d, and p (1 - p)."""
PREDICTED = MOMENTS.index("predicted")
_EXACT_MOMENTS = 3  # the sums of loss, Brier and p are stored as float64; the rest float32
_HEADER = struct.Struct("<BBBHHHqqdddd")
_FORMAT = 1


def cell_of(p: FloatArray) -> NDArray[np.intp]:
    """The cell of each probability."""
    return np.searchsorted(CELL_EDGES, p, side="left")


class BinaryRollup:
    """Sums over one binary version's predictions (of an hour, or of any rows) that add up;
    ``score_bins`` counts the raw scores in the version's reference bins
    (:class:`~app.calibration.measures.score_reference.ScoreReference`), or is empty."""

    def __init__(self, score_bins: int = 0) -> None:
        self.n = 0
        self.n_labelled = 0
        self.entropy = self.var_loss = self.var_brier = 0.0
        self.spread = 0.0  # sum of p (1 - p), exact (the cells' are float32 once stored)
        self.counts = np.zeros(CELLS, dtype=np.int64)
        self.sums = np.zeros(CELLS)
        self.spreads = np.zeros(CELLS)
        self.positives = np.zeros(CELLS, dtype=np.int64)
        self.negatives = np.zeros(CELLS, dtype=np.int64)
        self.moments = np.zeros((FINE_BINS, len(MOMENTS)))
        self.scores = np.zeros(score_bins, dtype=np.int64)

    def add_predictions(self, p: FloatArray, score_bins: NDArray[np.intp] | None = None) -> None:
        """Predictions, labelled or not, with the reference bin of each raw score (None: no
        reference, the version was deleted)."""
        cells = cell_of(p)
        q = 1.0 - p
        variance = p * q
        clipped = np.clip(p, EPS, 1 - EPS)
        log_p, log_q = np.log(clipped), np.log1p(-clipped)
        self.n += p.size
        self.counts += np.bincount(cells, minlength=CELLS)
        self.sums += np.bincount(cells, p, minlength=CELLS)
        self.spreads += np.bincount(cells, variance, minlength=CELLS)
        self.spread += float(variance.sum())
        self.entropy -= float((p * log_p + q * log_q).sum())
        self.var_loss += float((variance * (log_p - log_q) ** 2).sum())
        self.var_brier += float((variance * (1 - 2 * p) ** 2).sum())
        if score_bins is not None and self.scores.size:
            self.scores += np.bincount(score_bins, minlength=self.scores.size)

    def add_labels(self, p: FloatArray, y: FloatArray, sign: int = 1) -> None:
        """The outcomes ``y`` of predictions already added (0 or 1 enter the measures; any
        other label is counted as labelled only); ``sign=-1`` takes them out again."""
        self.n_labelled += sign * y.size
        known = (y == 0) | (y == 1)
        p, y = p[known], y[known]
        cells = cell_of(p)
        ones = y == 1
        self.positives += sign * np.bincount(cells[ones], minlength=CELLS)
        self.negatives += sign * np.bincount(cells[~ones], minlength=CELLS)
        clipped = np.clip(p, EPS, 1 - EPS)
        loss = -(y * np.log(clipped) + (1 - y) * np.log1p(-clipped))
        d = p - y
        brier = d * d
        terms = (loss, brier, p, d * d, d * loss, d * brier, loss * loss, loss * brier)
        fine = CELL_FINE[cells]
        for j, values in enumerate((*terms, brier * brier, p * (1 - p))):
            self.moments[:, j] += sign * np.bincount(fine, values, minlength=FINE_BINS)

    def add(self, other: BinaryRollup) -> None:
        """Add ``other``'s rows to these."""
        self.n += other.n
        self.n_labelled += other.n_labelled
        self.entropy += other.entropy
        self.var_loss += other.var_loss
        self.var_brier += other.var_brier
        self.spread += other.spread
        for mine, theirs in self._arrays(other):
            mine += theirs
        if other.scores.size:
            if not self.scores.size:
                self.scores = other.scores.copy()
            elif self.scores.size == other.scores.size:
                self.scores += other.scores

    def _arrays(self, other: BinaryRollup) -> list[tuple[NDArray, NDArray]]:  # type: ignore[type-arg]
        pairs = (
            (self.counts, other.counts),
            (self.sums, other.sums),
            (self.spreads, other.spreads),
            (self.positives, other.positives),
            (self.negatives, other.negatives),
            (self.moments, other.moments),
        )
        return list(pairs)

    def to_bytes(self) -> bytes:
        """The sums in a few kilobytes: the filled cells and fine bins only; counts in the
        fewest bytes that hold the largest (2, 4 or 8); the cells' p (1 - p) and the second
        moments as float32 (they make bands and intervals only)."""
        cells = np.flatnonzero((self.counts != 0) | (self.positives != 0) | (self.negatives != 0))
        fine = np.flatnonzero(np.any(self.moments != 0, axis=1))
        counted = np.concatenate([self.counts, self.positives, self.negatives])
        width, count_type = _width(counted)
        score_width, score_type = _width(self.scores)
        header = _HEADER.pack(
            _FORMAT,
            width,
            score_width,
            cells.size,
            fine.size,
            self.scores.size,
            self.n,
            self.n_labelled,
            self.entropy,
            self.var_loss,
            self.var_brier,
            self.spread,
        )
        parts = [
            cells.astype("<u1"),
            np.stack([self.counts[cells], self.positives[cells], self.negatives[cells]]).astype(
                count_type
            ),
            self.sums[cells].astype("<f8"),
            self.spreads[cells].astype("<f4"),
            fine.astype("<u1"),
            self.moments[fine, :_EXACT_MOMENTS].astype("<f8"),
            self.moments[fine, _EXACT_MOMENTS:].astype("<f4"),
            self.scores.astype(score_type),
        ]
        return header + b"".join(part.tobytes() for part in parts)

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> BinaryRollup:
        """The sums :meth:`to_bytes` wrote."""
        fields = _HEADER.unpack_from(data)
        form, width, score_width, n_cells, n_fine, n_scores = fields[:6]
        if form != _FORMAT:
            raise ValueError(f"unknown rollup format {form}")
        rollup = cls(n_scores)
        rollup.n, rollup.n_labelled = fields[6], fields[7]
        rollup.entropy, rollup.var_loss, rollup.var_brier, rollup.spread = fields[8:]
        count_type = np.dtype(f"<u{width}")
        reader = _Reader(data, _HEADER.size)
        cells = reader.take("<u1", n_cells).astype(np.intp)
        counts = reader.take(count_type, 3 * n_cells).reshape(3, n_cells).astype(np.int64)
        rollup.counts[cells], rollup.positives[cells], rollup.negatives[cells] = counts
        rollup.sums[cells] = reader.take("<f8", n_cells)
        rollup.spreads[cells] = reader.take("<f4", n_cells)
        fine = reader.take("<u1", n_fine).astype(np.intp)
        exact = reader.take("<f8", n_fine * _EXACT_MOMENTS).reshape(n_fine, _EXACT_MOMENTS)
        rest = len(MOMENTS) - _EXACT_MOMENTS
        rollup.moments[fine, :_EXACT_MOMENTS] = exact
        rollup.moments[fine, _EXACT_MOMENTS:] = reader.take("<f4", n_fine * rest).reshape(
            n_fine, rest
        )
        rollup.scores = reader.take(f"<u{score_width}", n_scores).astype(np.int64)
        return rollup


def _width(counts: NDArray[np.int64]) -> tuple[int, str]:
    """The fewest bytes (2, 4 or 8) that hold every count, and the dtype."""
    if counts.size and counts.min() < 0:
        raise ValueError("a rollup's counts went below zero")
    largest = int(counts.max()) if counts.size else 0
    width = next(w for w in (2, 4, 8) if largest < 1 << (8 * w))
    return width, f"<u{width}"


class _Reader:
    """Arrays read one after another from a buffer."""

    def __init__(self, data: bytes | memoryview, offset: int) -> None:
        self.data, self.offset = data, offset

    def take(self, dtype: str | np.dtype, count: int) -> NDArray:  # type: ignore[type-arg]
        found = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.offset)
        self.offset += found.nbytes
        return found.astype(found.dtype.newbyteorder("="))
