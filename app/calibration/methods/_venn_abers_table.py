"""The Venn-ABERS lookup table: p and its interval [low, high] as step functions of the score.

:func:`~app.calibration.methods._venn_abers_kernel.venn_abers_cells` gives p0 and p1 on the 2k + 1
cells of one fit's distinct scores; :meth:`StepTable.merge` puts one IVAP's cells, or a
CVAP's folds on the cells of all their thresholds together, into one table of edges, merging
p0 and p1 into p as Vovk, Petej & Fedorova (2015) do (:func:`merge_folds`). Predict is one
binary search in that table; it never runs the fit's loops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray
from app.calibration.kernels.knots import Knots


@dataclass(frozen=True)
class StepTable:
    """p and its interval [low, high] as step functions of the score, for predict.

    ``p[i]``, ``low[i]``, ``high[i]`` hold for scores s with exactly i of the ``edges`` <= s.
    Only the edges where a value changes are kept (a calibration score u whose values differ
    from those on both sides gives two: u, and the next float above it). 10^5 distinct scores
    of a sigmoid batch give about 6300 edges (12300 for 5-fold CVAP), 10^6 give 22400
    (45800), so the binary search stays in cache, and the table is the calibrator's whole
    state. Measured on 10^6 scores: 1.2x isotonic's predict (1.5x for CVAP).
    """

    edges: FloatArray
    p: FloatArray
    low: FloatArray
    high: FloatArray
    knots: Knots = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "knots", Knots(self.edges))  # frozen: set once, here

    def step(self, scores: FloatArray) -> NDArray[np.intp]:
        """The step of each score: one binary search, which also tells ties from gaps."""
        return self.knots.count_at_most(np.asarray(scores, dtype=np.float64))

    @classmethod
    def merge(cls, fits: Sequence[tuple[FloatArray, FloatArray, FloatArray]]) -> StepTable:
        """The table of one IVAP or of a CVAP's folds, each (thresholds, p0 cells, p1 cells).

        On the cells of all thresholds together (each fold's thresholds are among them) the
        cell of a score is the number of edges u_0, u_0+, u_1, u_1+, ... <= s, u+ being the
        next float above u: 2j below u_j, 2j + 1 at u_j exactly. One IVAP's cells are already
        those of its own thresholds.
        """
        if len(fits) == 1:
            grid, p0, p1 = fits[0]
            p, low, high = merge_folds(p0[np.newaxis], p1[np.newaxis])
        else:
            grid = np.unique(np.concatenate([thresholds for thresholds, _, _ in fits]))
            p0 = np.empty((len(fits), 2 * grid.size + 1))
            p1 = np.empty_like(p0)
            for row, (thresholds, fold_p0, fold_p1) in enumerate(fits):
                cells = _fold_cells(thresholds, grid)
                p0[row], p1[row] = fold_p0[cells], fold_p1[cells]
            p, low, high = merge_folds(p0, p1)
        with np.errstate(over="ignore"):  # above the largest float: inf, dropped below
            edges = np.column_stack([grid, np.nextafter(grid, np.inf)]).ravel()
        # Cells 1..2k start at the edges; drop those no finite score falls in, so that the edges
        # increase strictly: the gap between u and the next float up when that float is the next
        # threshold (u = 0.0, then 5e-324), and the cell above the largest float (edge inf).
        filled = np.append(edges[:-1] < edges[1:], np.isfinite(edges[-1]))
        if not filled.all():
            cells = np.append(True, filled)
            edges, p, low, high = edges[filled], p[cells], low[cells], high[cells]
        # keep cell 0 and each cell whose values differ from the previous one's
        changes = np.flatnonzero(
            (p[1:] != p[:-1]) | (low[1:] != low[:-1]) | (high[1:] != high[:-1])
        )
        kept = np.append(0, changes + 1)
        return cls(edges[changes], p[kept], low[kept], high[kept])


def _fold_cells(thresholds: FloatArray, grid: FloatArray) -> NDArray[np.intp]:
    """For each cell of ``grid`` (a superset of ``thresholds``), the cell of ``thresholds``."""
    below = np.searchsorted(thresholds, grid)  # thresholds < grid[j]: also < any s below grid[j]
    at = thresholds[np.minimum(below, thresholds.size - 1)] == grid
    cells = np.empty(2 * grid.size + 1, dtype=np.intp)
    cells[0::2] = 2 * np.append(below, thresholds.size)
    cells[1::2] = 2 * below + at
    return cells


def merge_folds(p0: FloatArray, p1: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(p, low, high) per column from per-fold rows of p0 and p1 (one row: an IVAP).

    p = GM(p1) / (GM(1 - p0) + GM(p1)) over the rows, the 2015 paper's merge for CVAP
    (section 4; one row gives the IVAP's p1 / (1 - p0 + p1)); low, high = min p0, max p1.
    p is clipped into [low, high] and made non-decreasing, which it is in exact arithmetic (it
    increases in every p0 and p1): this only removes rounding by an ulp.
    """
    if p0.shape[0] == 1:
        g0, g1 = 1.0 - p0[0], p1[0]
    else:  # geometric means through logs: p0 < 1 and p1 > 0, so both are finite
        g0, g1 = np.exp(np.log1p(-p0).mean(axis=0)), np.exp(np.log(p1).mean(axis=0))
    low, high = p0.min(axis=0), p1.max(axis=0)
    merged = np.maximum.accumulate(np.clip(g1 / (g0 + g1), low, high))
    return merged, low, high
