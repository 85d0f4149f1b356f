"""The AUC's placements for the bootstrap of block sums (:mod:`app.calibration.measures.
block_sums`): each row's atom, a quantile of p, and class, and each atom and class's
placement, the weight of the other class its rows outrank (ties half), whose per-block sums
linearise the AUC in the blocks' counts (DeLong, DeLong & Clarke-Pearson, *Biometrics* 1988).
The atoms are cut from p alone, never at a report's bins, so that the AUC's resamples are the
same whatever bins the report has."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray
from app.calibration.kernels.budget import checkpoint
from app.calibration.kernels.searching import EdgeCounter
from app.calibration.measures.resampled import View

ATOMS = 1024
"""Quantile atoms of p at which the AUC's placements are read."""


class Placements(NamedTuple):
    """Each row's cell (2 x its atom + its label), each cell's placement (the weight of the
    other class its rows outrank, ties half), and the AUC read at the atoms."""

    cells: NDArray[np.integer]
    of_cell: FloatArray
    auc_at_atoms: float

    def of_rows(self, rows: slice) -> FloatArray:
        """The placements of ``rows``."""
        found: FloatArray = self.of_cell[self.cells[rows].astype(np.intp)]
        return found


def atom_placements(view: View, sample: NDArray[np.intp], chunks: list[slice]) -> Placements:
    """The view's :class:`Placements` at atoms cut at quantiles of p in the rows ``sample``,
    read ``chunks`` of rows at a time."""
    edges = _atom_edges(view.p[sample])
    cells: NDArray[np.integer] = np.empty(
        view.p.size, dtype=np.int16 if 2 * edges.size < 32767 else np.int32
    )
    unit = bool(view.w.min() == view.w.max() == 1.0)
    below = EdgeCounter(edges)
    classes = np.zeros(2 * edges.size + 2)
    for rows in chunks:  # a loop over chunks of rows
        checkpoint()
        # each row's atom and class, 2 atom + y: a point on an edge is in the lower atom
        cell = 2 * below.count(view.p[rows]) + (view.y[rows] > 0.0)
        cells[rows] = cell
        classes += np.bincount(cell, None if unit else view.w[rows], classes.size)
    negatives, positives = classes[0::2], classes[1::2]
    placements = np.empty_like(classes)  # per cell: the weight of the other class outranked
    placements[1::2] = np.cumsum(negatives) - 0.5 * negatives
    placements[0::2] = positives.sum() - np.cumsum(positives) + 0.5 * positives
    pairs = positives.sum() * negatives.sum()
    at_atoms = float(positives @ placements[1::2]) / pairs if pairs > 0 else np.nan
    return Placements(cells, placements, at_atoms)


def _atom_edges(sample: FloatArray) -> FloatArray:
    """Up to ATOMS - 1 edges at the sample's quantiles, values it holds (so that a monotone
    transform of p moves the edges with it and cuts the same rows)."""
    ranked = np.sort(sample)  # the inverted CDF's quantiles, without a partition per level
    ranks = np.ceil(np.arange(1, ATOMS) / ATOMS * ranked.size).astype(np.intp) - 1
    return np.unique(ranked[ranks])
