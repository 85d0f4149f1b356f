"""One binary version's traffic of one hour, summed so that hours add up: what monitoring reads
in place of the logged rows.

Every measure of a monitoring window is a sum over its rows divided by a count, or a
function of counts and sums per bin of the probability (the reliability bins, the expected
and realized AUC, EM's bin means, the confusion counts at a threshold), or of counts per bin
of the raw score (PSI and KS, :mod:`~app.calibration.measures.score_reference`). So an
hour's rows are kept as sums per *cell* of the probability, and windows add hours.

The cells cut (0, 1] at the union of two grids, right-closed, (e_{c-1}, e_c]:

- the fine bins' edges (:data:`FINE_EDGES`, the multiples of 1/20), so the reliability bins
  of any ``n_bins`` that divides 20 are unions of cells (the binned ECE is the rows' own, to
  rounding), and so is a threshold at a multiple of 1/20;
- steps of 1 / :data:`LOGIT_STEPS_PER_UNIT` in log odds over [-:data:`LOGIT_LIMIT`,
  :data:`LOGIT_LIMIT`], so that a fraud model's 0.001 and 0.002 fall apart as 0.5 and 0.6
  do: the expected and realized AUC count the pairs within one cell half (as tied scores),
  and EM reads each cell as its mean probability (Saerens et al. 2002 on bins).

A cell keeps the count, sum of p and of p (1 - p) of every prediction, and the positives and
negatives of the labelled ones; each fine bin keeps the sums of the labelled rows' p, log
loss and Brier terms and their second moments with p - y (the intervals of
:class:`~app.service.traffic.sums.CalibrationSums`); the hour keeps the expected log loss,
the variances of the expected measures, and the labelled rows' log loss and Brier sums,
exactly. An outcome posted later adds its label to its
prediction's hour (:meth:`BinaryRollup.add_labels`); an overwritten one is taken out first
(``sign=-1``). Stored in a few kilobytes (:meth:`BinaryRollup.to_bytes`).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray
from app.calibration.measures.expected import EPS

UNIFORM_BINS = 20
"""The reliability bins of any ``n_bins`` that divides it are unions of fine bins."""
FINE_EDGES = np.unique(
    np.concatenate(
        [np.arange(1, UNIFORM_BINS) / UNIFORM_BINS, np.linspace(0.0, 1.0, UNIFORM_BINS + 1)[1:-1]]
    )
)
"""The multiples of 1/20 as a threshold names them (j / 20, rounded once) and as the
reliability bins cut (``linspace``'s j x 0.05, which holds the edges of every ``n_bins``
that divides 20, and differs from j / 20 by a unit in the last place at 6 of them): p exactly
on either falls where the rows would put it."""
FINE_BINS = FINE_EDGES.size + 1
FINE_UPPER = np.concatenate([FINE_EDGES, [1.0]])
LOGIT_STEPS_PER_UNIT = 8
LOGIT_LIMIT = 16.0


def _cell_edges() -> FloatArray:
    """The inner edges of the cells: the fine bins' and the log-odds grid's, in p."""
    steps = int(2 * LOGIT_LIMIT * LOGIT_STEPS_PER_UNIT)
    z = -LOGIT_LIMIT + np.arange(1, steps) / LOGIT_STEPS_PER_UNIT
    return np.unique(np.concatenate([1.0 / (1.0 + np.exp(-z)), FINE_EDGES]))


CELL_EDGES = _cell_edges()
CELLS = CELL_EDGES.size + 1
CELL_LOWER = np.concatenate([[0.0], CELL_EDGES])
CELL_UPPER = np.concatenate([CELL_EDGES, [1.0]])
CELL_FINE = np.searchsorted(FINE_EDGES, CELL_UPPER, side="left")
"""The fine bin each cell lies in."""

MOMENTS = ("predicted", "loss", "brier", "dl", "db", "ll", "lb", "bb", "spread")
"""What each fine bin sums over its labelled rows, with d = p - y: p, the loss and Brier
terms (d^2: the Brier term), their products with each other and with d, and p (1 - p)."""
PREDICTED = MOMENTS.index("predicted")
_EXACT_MOMENTS = 1  # a fine bin's sum of p is stored as float64 (the ECE); the rest float32
_HEADER = struct.Struct("<BBBBBHBHqqdddddd")
_FORMAT = 1
if CELLS >= 1 << 16 or FINE_BINS >= 1 << 8:
    raise RuntimeError("a cell's or a fine bin's index no longer fits its stored width")


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
        self.loss = self.brier = 0.0  # of the labelled rows, exact (the fine bins' float32)
        self.counts = np.zeros(CELLS, dtype=np.int64)
        self.sums = np.zeros(CELLS)
        self.fine_sums = np.zeros(FINE_BINS)  # sum of p per fine bin: float64 once stored
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
        self.fine_sums += np.bincount(CELL_FINE[cells], p, minlength=FINE_BINS)
        self.spreads += np.bincount(cells, variance, minlength=CELLS)
        self.spread += float(variance.sum())
        self.entropy -= float((p * log_p + q * log_q).sum())
        self.var_loss += float((variance * (log_p - log_q) ** 2).sum())
        self.var_brier += float((variance * (1 - 2 * p) ** 2).sum())
        if score_bins is not None and self.scores.size:
            self.scores += np.bincount(score_bins, minlength=self.scores.size)

    def add_labels(
        self,
        p: FloatArray,
        y: FloatArray,
        sign: int = 1,
        *,
        loss: FloatArray | None = None,
        brier: FloatArray | None = None,
    ) -> None:
        """The outcomes ``y`` of predictions already added (0 or 1 enter the measures; any
        other label is counted as labelled only); ``sign=-1`` takes them out again. Each
        row's ``loss`` and ``brier`` terms are its binary log loss and squared error unless
        given (a k-class row's top label: :mod:`.class_rollups`)."""
        self.n_labelled += sign * y.size
        known = (y == 0) | (y == 1)
        p, y = p[known], y[known]
        cells = cell_of(p)
        ones = y == 1
        self.positives += sign * np.bincount(cells[ones], minlength=CELLS)
        self.negatives += sign * np.bincount(cells[~ones], minlength=CELLS)
        d = p - y
        if (loss is None) != (brier is None):
            raise ValueError("a row's loss and Brier terms are given together or not at all")
        if loss is None or brier is None:
            clipped = np.clip(p, EPS, 1 - EPS)
            loss = -(y * np.log(clipped) + (1 - y) * np.log1p(-clipped))
            brier = d * d
        else:
            loss, brier = loss[known], brier[known]
        self.loss += sign * float(loss.sum())
        self.brier += sign * float(brier.sum())
        terms = (p, loss, brier, d * loss, d * brier, loss * loss, loss * brier)
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
        self.loss += other.loss
        self.brier += other.brier
        for mine, theirs in self._arrays(other):
            mine += theirs
        if other.scores.size:
            if not self.scores.size:
                self.scores = other.scores.copy()
            elif self.scores.size == other.scores.size:
                self.scores += other.scores
            else:
                raise ValueError("rollups of different score bins do not add up")

    def clamp(self) -> bool:
        """Set every negative count (and its sums) to zero; whether there was one. Only a
        label taken out that was never added makes one: a row its hour never summed."""
        negative = (self.counts < 0) | (self.positives < 0) | (self.negatives < 0)
        if not negative.any() and self.n_labelled >= 0:
            return False
        for counts in (self.counts, self.positives, self.negatives):
            np.maximum(counts, 0, out=counts)
        self.n_labelled = max(self.n_labelled, 0)
        return True

    def _arrays(self, other: BinaryRollup) -> list[tuple[NDArray, NDArray]]:  # type: ignore[type-arg]
        pairs = (
            (self.counts, other.counts),
            (self.sums, other.sums),
            (self.fine_sums, other.fine_sums),
            (self.spreads, other.spreads),
            (self.positives, other.positives),
            (self.negatives, other.negatives),
            (self.moments, other.moments),
        )
        return list(pairs)

    def to_bytes(self) -> bytes:
        """The sums in a few kilobytes: the filled cells and fine bins only; counts in the
        fewest bytes that hold the largest (2, 4 or 8); the cells' sums and the second
        moments as float32 (the AUC, EM, bands and intervals read them; the fine bins' sums
        of p, float64, give the measures at a multiple of 1/20 and the ECE); all but the
        header through zlib."""
        cells = np.flatnonzero((self.counts != 0) | (self.positives != 0) | (self.negatives != 0))
        fine = np.flatnonzero(np.any(self.moments != 0, axis=1))
        counted = np.concatenate([self.counts, self.positives, self.negatives])
        width, count_type = _width(counted)
        score_width, score_type = _width(self.scores)
        header = _HEADER.pack(
            _FORMAT,
            width,
            score_width,
            LOGIT_STEPS_PER_UNIT,
            FINE_BINS,
            cells.size,
            fine.size,
            self.scores.size,
            self.n,
            self.n_labelled,
            self.entropy,
            self.var_loss,
            self.var_brier,
            self.spread,
            self.loss,
            self.brier,
        )
        parts = [
            cells.astype("<u2"),
            np.stack([self.counts[cells], self.positives[cells], self.negatives[cells]]).astype(
                count_type
            ),
            self.sums[cells].astype("<f4"),
            self.spreads[cells].astype("<f4"),
            self.fine_sums.astype("<f8"),
            fine.astype("<u1"),
            self.moments[fine, :_EXACT_MOMENTS].astype("<f8"),
            self.moments[fine, _EXACT_MOMENTS:].astype("<f4"),
            self.scores.astype(score_type),
        ]
        return header + zlib.compress(b"".join(part.tobytes() for part in parts), 1)

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> BinaryRollup:
        """The sums :meth:`to_bytes` wrote."""
        fields = _HEADER.unpack_from(data)
        form, width, score_width, steps, fine_bins, n_cells, n_fine, n_scores = fields[:8]
        if (form, steps, fine_bins) != (_FORMAT, LOGIT_STEPS_PER_UNIT, FINE_BINS):
            raise ValueError(f"a rollup of format {form}, cells {steps}, {fine_bins}")
        rollup = cls(n_scores)
        rollup.n, rollup.n_labelled = fields[8], fields[9]
        rollup.entropy, rollup.var_loss, rollup.var_brier, rollup.spread = fields[10:14]
        rollup.loss, rollup.brier = fields[14:]
        count_type = np.dtype(f"<u{width}")
        reader = _Reader(zlib.decompress(data[_HEADER.size :]), 0)
        cells = reader.take("<u2", n_cells).astype(np.intp)
        counts = reader.take(count_type, 3 * n_cells).reshape(3, n_cells).astype(np.int64)
        rollup.counts[cells], rollup.positives[cells], rollup.negatives[cells] = counts
        rollup.sums[cells] = reader.take("<f4", n_cells)
        rollup.spreads[cells] = reader.take("<f4", n_cells)
        rollup.fine_sums = reader.take("<f8", FINE_BINS)
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
