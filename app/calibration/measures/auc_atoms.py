"""The AUC of every bootstrap resample from "atoms": runs of rows sorted by p, cut only where
p changes and at every bin's start, at most :data:`AUC_ATOMS` of them (the Mann-Whitney
statistic of :mod:`app.calibration.measures.auc`, read from each atom's resampled counts by
:class:`~app.calibration.measures.resampled.ViewResampler`)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray

AUC_ATOMS = 4096
"""At most this many atoms beyond the bins' starts: pairs within an atom whose p differ (at
most one pair in AUC_ATOMS of all pairs) enter with the batch's own sum."""


def auc_atoms(p: FloatArray, bin_starts: NDArray[np.intp]) -> tuple[NDArray[np.intp], int]:
    """Starts of at most AUC_ATOMS + bins runs of sorted rows, cut only where p changes, and at
    every bin's start; and the number of distinct p. Every change is a cut when there are at
    most AUC_ATOMS of them; else the cuts are the first change at or after AUC_ATOMS evenly
    spaced rows, found by search (an index of every change would hold the GIL for 50 ms on
    10^7 rows)."""
    n = p.size
    distinct = 1 + int(np.count_nonzero(p[1:] != p[:-1]))
    if distinct - 1 <= AUC_ATOMS:
        changes = np.flatnonzero(p[1:] != p[:-1]) + 1
    else:
        wanted = np.ceil(np.linspace(0, n, AUC_ATOMS + 1)[1:-1]).astype(np.intp)
        changes = np.searchsorted(p, p[np.maximum(wanted, 1) - 1], side="right")
        changes = changes[changes < n]
    starts = np.unique(np.concatenate([[0], changes, bin_starts]))
    atoms: NDArray[np.intp] = starts[starts < n]
    return atoms, distinct


def within_atoms_auc(
    p: FloatArray, wy: FloatArray, wn: FloatArray, atoms: NDArray[np.intp], distinct: int
) -> float:
    """The exact Mann-Whitney sum minus its atom-level reading, on the batch: what the pairs
    within atoms whose p differ add beyond half their weight. Nothing when every change of p
    is a cut; over rows when every p is distinct."""
    if distinct - 1 <= AUC_ATOMS:
        return 0.0
    if distinct == p.size:
        exact = pairs_ranked(wy, wn)
    else:
        groups = np.concatenate([[0], np.flatnonzero(p[1:] != p[:-1]) + 1])
        exact = pairs_ranked(np.add.reduceat(wy, groups), np.add.reduceat(wn, groups))
    return exact - pairs_ranked(np.add.reduceat(wy, atoms), np.add.reduceat(wn, atoms))


def pairs_ranked(pos: FloatArray, neg: FloatArray) -> float:
    below = np.cumsum(neg) - neg
    return float(pos @ (below + 0.5 * neg))
