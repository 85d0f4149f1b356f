"""The measures of a large batch's view on bootstrap resamples of its blocks.

:mod:`app.calibration.measures.block_sums` reduces a view to per-block sums; here a chunk of
resamples, each a Poisson(1) count per block (a
:class:`~app.calibration.measures.bootstrap.Resamples` of the blocks), gives every measure
as :class:`~app.calibration.measures.resampled.ViewResampler` gives it on rows: the means,
the binned ECE's and the AUC's ratios, the slope's and intercept's one Newton step, and the
smooth ECE's width search and curve on the resample's grids. A chunk's whole cost is one
matrix product of its counts with the tables (a few thousand columns at most) and the smooth
ECE's search, however many rows the batch has.

The consistency resamples draw each bin's (and each smooth grid cell's) sum of w (p - y*),
y* ~ Bernoulli(p), as a Gaussian of mean 0 and the per-row draws' variance
(:data:`~app.calibration.measures.block_sums.BlockTables.bin_spread`), seeded per chunk.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray
from app.calibration.measures.block_sums import SMOOTH_BLOCKS, BlockTables
from app.calibration.measures.bootstrap import Float32Array
from app.calibration.measures.clinical import Line
from app.calibration.measures.resampled import newton_step
from app.calibration.measures.smooth_ece import curves_of_grids, searched_eces

_CONSISTENCY_STREAM = 3
_SMOOTH_CONSISTENCY_STREAM = 4


class BlockResampler:
    """One view's measures on chunks of block resamples (counts: blocks x resamples)."""

    def __init__(
        self,
        tables: BlockTables,
        *,
        line: Line | None,
        offset_intercept: float | None,
        smooth_sigma: float | None,
        seed: int,
    ) -> None:
        self.tables, self.names = tables, tables.terms
        self.line, self.offset_intercept = line, offset_intercept
        self.smooth_sigma, self.seed = smooth_sigma, seed
        self.weight = float(tables.sums[:, tables.columns["weight"]].sum())
        # two products per chunk: the sums' columns with the AUC's influence, then the
        # weight's and the bins' (apart, so that the binned ECE comes out the same whatever
        # else is summed: a product's rounding depends on its shape)
        self.all_sums = np.column_stack([tables.sums, _auc_influence(tables)])
        weight = tables.sums[:, tables.columns["weight"]]
        self.bin_sums = np.column_stack([weight, tables.gaps])
        if tables.smooth is not None:
            self.smooth32 = tuple(grid.astype(np.float32) for grid in tables.smooth)
            self.fixed_ones = tables.smooth[0].sum(axis=0, keepdims=True)
        if tables.curve is not None:
            self.curve32 = tuple(grid.astype(np.float32) for grid in tables.curve)

    def statistics(self, counts: Float32Array, smooth: bool = True) -> dict[str, FloatArray]:
        """Each measure on each resample of ``counts`` (blocks x resamples); the smooth ECE
        and curve too unless ``smooth`` is False."""
        columns = self.tables.columns
        c = counts.T.astype(np.float64)
        sums = c @ self.all_sums
        binned = c @ self.bin_sums

        def column(name: str) -> FloatArray:
            found: FloatArray = sums[:, columns[name]]
            return found

        total = column("weight")
        out: dict[str, FloatArray] = {}
        with np.errstate(invalid="ignore", divide="ignore"):
            for name in self.names:
                out[name] = column(name) / total
            if self.line is not None:
                line = self.line
                steps = [column(name) for name in ("r", "rz", "h", "hz", "hzz")]
                out["calibration_slope"] = newton_step(line.slope, line.intercept, steps)[0]
            if self.offset_intercept is not None:
                out["calibration_intercept"] = self.offset_intercept + column("r0") / column("h0")
            out["ece"] = np.abs(binned[:, 1:]).sum(axis=1) / binned[:, 0]
            if np.isfinite(self.tables.auc) and np.isfinite(self.tables.auc_atoms):
                shift = sums[:, self.tables.sums.shape[1]]
                out["auc"] = np.clip(self.tables.auc + shift, 0.0, 1.0)
        if smooth and self.tables.smooth is not None:
            few = np.ascontiguousarray(counts[:SMOOTH_BLOCKS].T)
            ones, residual = (few @ grid for grid in self.smooth32)
            out["smooth_ece"] = searched_eces((ones, residual))
            if self.smooth_sigma is not None and self.tables.curve is not None:
                ones, positives = (few @ grid for grid in self.curve32)
                out["smooth_curve"] = curves_of_grids(ones, positives, self.smooth_sigma)
        return out

    def consistent(self, start: int, count: int) -> dict[str, FloatArray]:
        """The binned and smooth ECE on ``count`` consistency resamples (labels drawn from p,
        weights as given), those of the chunk that begins at resample ``start``."""
        spread = np.sqrt(self.tables.bin_spread)
        gaps = _stream(self.seed, _CONSISTENCY_STREAM, start).standard_normal((count, spread.size))
        out = {"ece": np.abs(gaps * spread).sum(axis=1) / self.weight}
        if self.tables.cell_spread is not None:
            # a stream of its own: the smooth ECE's draws must not depend on the bins' count
            rng = _stream(self.seed, _SMOOTH_CONSISTENCY_STREAM, start)
            residual = _cell_draws(rng, self.tables.cell_spread, count)
            out["smooth_ece"] = searched_eces((self.fixed_ones, residual))
        return out


def _stream(seed: int, stream: int, start: int) -> np.random.Generator:
    """The seeded draws of ``stream`` for the chunk of resamples that begins at ``start``."""
    sequence = np.random.SeedSequence(seed, spawn_key=(stream, start))
    return np.random.Generator(np.random.PCG64(sequence))


def _auc_influence(tables: BlockTables) -> FloatArray:
    """Per block, the AUC's influence: (placements - A (N P_k + P N_k)) / (P N), A the AUC
    at the atoms, P_k and N_k the block's positive and negative weights (summing to 0 over
    the blocks, so that a resample's AUC is the batch's plus its counts times these)."""
    columns = tables.columns
    if "auc" not in columns:
        return np.zeros(tables.sums.shape[0])
    placements = tables.sums[:, columns["auc"]]
    positive = tables.sums[:, columns["positive"]]
    negative = tables.sums[:, columns["weight"]] - positive
    pairs = positive.sum() * negative.sum()
    if not (pairs > 0 and np.isfinite(tables.auc_atoms)):
        return np.zeros(placements.size)
    spread = negative.sum() * positive + positive.sum() * negative
    influence: FloatArray = (placements - tables.auc_atoms * spread) / pairs
    return influence


def _cell_draws(rng: np.random.Generator, spread: FloatArray, count: int) -> Float32Array:
    """``count`` residual grids (count x F): each cell's pair of split sums of w (p - y*),
    drawn as a Gaussian with the pair's covariance [[a, c], [c, b]] (``spread``, 3 x cells)
    through its Cholesky factor, added to the cell's two grid points."""
    a, c, b = spread
    root = np.sqrt(a)
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(a > 0.0, c / root, 0.0)
    rest = np.sqrt(np.maximum(b - lower * lower, 0.0))
    z: NDArray[np.float32] = rng.standard_normal((2, count, a.size), dtype=np.float32)
    residual = np.zeros((count, a.size + 1), dtype=np.float32)
    residual[:, :-1] += root.astype(np.float32) * z[0]
    residual[:, 1:] += lower.astype(np.float32) * z[0] + rest.astype(np.float32) * z[1]
    return residual
