"""Counting sorted edges below many values at once, faster than a binary search each."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray


class EdgeCounter:
    """How many of the sorted ``edges`` lie below each value (``np.searchsorted(edges, x)``,
    side left), faster than numpy's binary search over a thousand edges (measured: 34 ms
    against 87 ms for 10^6 values, otherwise most of a large view's summing). A table over
    2^16 equal cells between the first and last edge gives, for a value's cell, a count that
    is never too large (that of the cell before), and a few steps of "add one while the next
    edge is below" finish it, as many as the most edges two neighbouring cells hold. Edges
    crowded into a few cells (p concentrated in a tiny range) would need many steps: then,
    and if a step fell short, numpy's search."""

    CELLS = 1 << 16
    STEPS = 4

    def __init__(self, edges: FloatArray) -> None:
        self.edges = edges
        self.padded = np.append(edges, np.inf)
        low, high = (float(edges[0]), float(edges[-1])) if edges.size else (0.0, 0.0)
        self.low, self.scale = low, (self.CELLS / (high - low) if high > low else 0.0)
        left = low + (np.arange(self.CELLS) - 1.0) / self.scale if self.scale else None
        self.start = None if left is None else np.searchsorted(edges, left).astype(np.intp)
        per_cell = np.bincount(self._cells(edges), minlength=self.CELLS) if self.scale else [0]
        self.steps = int(np.max(per_cell[1:] + per_cell[:-1], initial=0)) + 1 if self.scale else 0

    def _cells(self, x: FloatArray) -> NDArray[np.intp]:
        scaled = (x - self.low) * self.scale
        return np.clip(scaled, 0, self.CELLS - 1).astype(np.intp)

    def count(self, x: FloatArray) -> NDArray[np.intp]:
        """``np.searchsorted(edges, x)``."""
        if self.start is None or self.steps > self.STEPS:
            found: NDArray[np.intp] = np.searchsorted(self.edges, x)
            return found
        count = self.start[self._cells(x)]
        for _ in range(self.steps):  # a loop over the few steps, each over all values
            count += self.padded[count] < x
        if np.any(self.padded[count] < x):  # a step short (rounding at a cell's edge)
            return np.searchsorted(self.edges, x)
        return count
