"""The columns a CSV batch is read into (:mod:`app.api.bodies.csv_batches`), and the cells
read as booleans."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

BOOLEAN_CELLS = {"true": 1.0, "True": 1.0, "TRUE": 1.0, "false": 0.0, "False": 0.0, "FALSE": 0.0}
"""The cells a label or a weight reads as 1 or 0, as JSON's ``true`` and ``false`` do: the
spellings pandas and pyarrow read as booleans (``True`` is what pandas and Python write,
``true`` Polars and JSON, ``TRUE`` R and spreadsheets). Nothing else (``yes``, ``t``): JSON
has no other booleans either."""


def boolean_or_number(cell: str) -> float:
    """A label's or weight's cell: a boolean of :data:`BOOLEAN_CELLS` as 1 or 0, else the
    number it spells (ValueError for anything else)."""
    value = BOOLEAN_CELLS.get(cell.strip())
    return float(cell) if value is None else value


class Columns:
    """The score, label and weight columns of a CSV, filled a block of rows at a time.

    Sized up front by the body's line count (a row per line but the header's), so the
    columns are the one copy of the numbers; they grow only for lines ended otherwise."""

    def __init__(self, columns: Mapping[str, list[int]], capacity: int) -> None:
        score_cols = columns["scores"]
        self._scores: int | list[int] = score_cols[0] if len(score_cols) == 1 else score_cols
        self._label = columns["label"][0]
        self._weight = columns["weight"][0] if columns["weight"] else None
        shape = (capacity,) if len(score_cols) == 1 else (capacity, len(score_cols))
        self.scores: NDArray[np.float64] = np.empty(shape)
        self.labels: NDArray[np.float64] = np.empty(capacity)
        self.weights = np.empty(capacity) if self._weight is not None else None
        self.rows = 0

    @property
    def boolean_columns(self) -> list[int]:
        """The positions whose cells may be booleans (the label's and the weight's, as in
        JSON; never a score's)."""
        return [self._label] if self._weight is None else [self._label, self._weight]

    def add(self, table: NDArray[np.float64]) -> None:
        start, end = self.rows, self.rows + table.shape[0]
        if end > len(self.labels):
            self._grow(max(end, 2 * len(self.labels)))
        self.scores[start:end] = table[:, self._scores]
        self.labels[start:end] = table[:, self._label]
        if self.weights is not None:
            self.weights[start:end] = table[:, self._weight]
        self.rows = end

    def _grow(self, capacity: int) -> None:
        def grown(column: NDArray[np.float64]) -> NDArray[np.float64]:
            bigger = np.empty((capacity, *column.shape[1:]))
            bigger[: self.rows] = column[: self.rows]
            return bigger

        self.scores, self.labels = grown(self.scores), grown(self.labels)
        self.weights = None if self.weights is None else grown(self.weights)

    def arrays(
        self,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64] | None]:
        n = self.rows
        slack = len(self.labels) - n > n // 8  # many blank lines: do not keep the spare room

        def used(column: NDArray[np.float64]) -> NDArray[np.float64]:
            return column[:n].copy() if slack else column[:n]

        weights = None if self.weights is None else used(self.weights)
        return used(self.scores), used(self.labels), weights
