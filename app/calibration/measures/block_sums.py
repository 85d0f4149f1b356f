"""Sufficient statistics of a large batch for its bootstrap: per-block sums of every measure.

Resampling every row costs rows x resamples, which at millions of rows is minutes and gigabytes
(:mod:`app.calibration.measures.resampled`). Every measure of a report is, or is linearised
into, a smooth function of sums over rows, and a Poisson bootstrap of a sum needs only the
sum's *parts*: the rows are assigned at random (seeded) to :data:`BLOCKS` blocks, each block's
sums are taken once, and a resample gives block k a Poisson(1) count c_k, so that its sum is
sum_k c_k S_k (Hanley & MacGibbon, "Creating non-parametric bootstrap samples using Poisson
frequencies", 2006, with blocks for rows). A ratio r = A / W of two sums then varies over
resamples by sum_k (c_k - 1)(A_k - r W_k) / W to first order, of variance
sum_k (A_k - r W_k)^2 / W^2; the rows being randomly assigned and sum_i (a_i - r w_i) being 0,
that is in expectation (1 - 1/K) sum_i (a_i - r w_i)^2 / W^2, the row bootstrap's variance
to the same (delta method) order (Efron & Tibshirani, *An Introduction to the Bootstrap*,
1993), estimated from K block sums: the spread's relative error is about 1 / sqrt(2K), 1.6%
at K = 2048 blocks, which moves a 95% end by 0.03 standard deviations, against the 0.085 of
reading that end from 1000 resamples at all.
The same holds for every measure below whose value does not change when all weights are
scaled together (each one here). Per view of the batch (:class:`BlockTables`):

- log loss, Brier score, accuracy: per block the sums of w and of w x term;
- calibration slope and intercept: per block the score and information at the batch's fit, for
  the one-step Newton of the row bootstrap (Moulton & Zeger, 1991);
- binned ECE: per block and bin the sum of w (p - y), the bins the batch's own;
- AUC: per block the sum of each row's placement, the weight of the other class it outranks
  (ties half), read at quantile atoms of p cut from p alone, never at the bins
  (:mod:`app.calibration.measures.block_placements`): the AUC is linearised in the counts,
  its influence per row being the placement against the AUC times the other class's weight
  (DeLong, DeLong & Clarke-Pearson, *Biometrics* 1988, whose variance is that of the
  placements), around the batch's exact AUC; pairs within an atom lose their share of the
  variance, of the order of 1 / ATOMS^2 of it (:data:`~app.calibration.measures.
  block_placements.ATOMS`), and a batch of one tied p keeps its 1/2 exactly;
- smooth ECE and its curve: per block and grid point the split weights and residuals of
  :mod:`app.calibration.measures.smooth_ece`, over only :data:`SMOOTH_BLOCKS` blocks (the
  rows' block modulo SMOOTH_BLOCKS, counted by the first SMOOTH_BLOCKS blocks' counts): their
  5121-point grids over 2048 blocks would be 170 MB and a product of 20 GFLOP; the spread's
  relative error is then about 4%;
- consistency resamples (labels drawn from p, for the calibration errors' test at 0): per bin,
  and per cell of the smooth ECE's finest grid, the Bernoulli variances sum w^2 p (1 - p), from
  which a resample's label sums are drawn as Gaussians with the exact first two moments of the
  per-row draws (the central limit theorem over a bin's or cell's rows, as the monitoring's
  intervals do); a bin of a few rows adds a few / n to the ECE, nothing at these sizes.

Every view of a batch reads the same blocks and counts, so paired differences between views
(a comparison's) stay paired, the smooth ECE's too (within its blocks); the consistency draws
are per bin and cell, not per row, so those are not paired across views (no comparison reads
them).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import csc_matrix
from scipy.special import expit, logit

from app.calibration.base import FloatArray
from app.calibration.kernels.budget import checkpoint
from app.calibration.kernels.searching import EdgeCounter
from app.calibration.measures._smooth_kernel import FINEST_GRID, grid_cells, grid_size
from app.calibration.measures.block_placements import atom_placements
from app.calibration.measures.clinical import Line
from app.calibration.measures.resampled import EPS, View

BLOCKS = 2048
"""Blocks the rows are assigned to: a spread from 2048 block sums is within 1.6% of the row
bootstrap's, and a chunk of 128 resamples reads them in one small matrix product."""
SMOOTH_BLOCKS = 256
"""Blocks of the smooth ECE and its curve (a divisor of BLOCKS): its grids per block cost
SMOOTH_BLOCKS x 10^4 numbers, and a resample's grids one product with them."""
SAMPLE_ROWS = 1 << 16
"""Rows, drawn at random, whose p place the atoms' edges."""
ROW_CHUNK = 1 << 20
"""Rows summed at a time: temporaries of 8 MB, and a :func:`checkpoint` between chunks (each
chunk adds its grids of SMOOTH_BLOCKS x 5121 points: fewer, larger chunks cost less)."""
_BLOCKS_STREAM = 2


@dataclass(frozen=True)
class Blocks:
    """The seeded assignment of a batch's ``n`` rows to :data:`BLOCKS` blocks, shared by every
    view, and the rows whose p place the AUC's atoms."""

    of_row: NDArray[np.int16]
    sample: NDArray[np.intp]

    @classmethod
    def draw(cls, n: int, seed: int) -> Blocks:
        rng = np.random.Generator(
            np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(_BLOCKS_STREAM,)))
        )
        of_row = rng.integers(0, BLOCKS, n, dtype=np.int16)
        sample = rng.integers(0, n, min(n, SAMPLE_ROWS)).astype(np.intp)
        return cls(of_row, sample)


@dataclass(frozen=True)
class BlockTables:
    """One view's per-block sums (rows of ``sums``: blocks; columns named by ``columns``)."""

    sums: FloatArray
    columns: dict[str, int]
    terms: list[str]
    """The columns that are weighted sums of the view's per-row terms (log loss, ...)."""
    gaps: FloatArray
    """Blocks x bins: sum w (p - y)."""
    auc: float
    """The batch's AUC (NaN without one)."""
    auc_atoms: float
    """The AUC read at the atoms: the placements' sum over 2 P N."""
    bin_spread: FloatArray
    """Per bin: sum w^2 p (1 - p), the variance of sum w y* for labels y* drawn from p."""
    smooth: tuple[FloatArray, FloatArray] | None
    """Smooth blocks x grid points (finest grid): split weights, split residuals w (p - y)."""
    curve: tuple[FloatArray, FloatArray] | None
    """Smooth blocks x grid points (the curve's width): split weights, split w y."""
    cell_spread: FloatArray | None
    """3 x cells of the finest grid: sum w^2 p (1 - p) times (1 - f)^2, f (1 - f), f^2."""


def block_tables(
    view: View,
    inner_edges: FloatArray,
    blocks: Blocks,
    *,
    terms: Collection[str] | None = None,
    placements: bool = True,
    auc: float | None,
    line: Line | None,
    offset_intercept: float | None,
    smooth: bool,
    smooth_sigma: float | None,
) -> BlockTables:
    """The view's :class:`BlockTables`, summed :data:`ROW_CHUNK` rows at a time: the bins'
    sums, and the sums of the measures asked for: ``terms`` of the view's per-row terms (None:
    all), the AUC's ``placements`` (a first pass over the rows for the atoms' class weights;
    ``auc`` the batch's own, None when read later). The atoms are quantiles of p alone, so
    that no measure but the binned ones depends on the bins."""
    counted = atom_placements(view, blocks.sample, _chunks(view.p.size)) if placements else None
    bins = EdgeCounter(inner_edges)
    summer = _Summer(view, blocks, inner_edges.size + 1, smooth, smooth_sigma, terms)
    for rows in _chunks(view.p.size):
        placed = None if counted is None else counted.of_rows(rows)
        summer.add(rows, bins.count(view.p[rows]), placed, line, offset_intercept)
    at_atoms = np.nan if counted is None else counted.auc_at_atoms
    return summer.tables(np.nan if auc is None else auc, at_atoms)


def _chunks(n: int) -> list[slice]:
    return [slice(first, min(first + ROW_CHUNK, n)) for first in range(0, n, ROW_CHUNK)]


class _Summer:
    """The second pass of :func:`block_tables`: each chunk of rows added to the tables."""

    def __init__(
        self,
        view: View,
        blocks: Blocks,
        bins: int,
        smooth: bool,
        sigma: float | None,
        terms: Collection[str] | None,
    ) -> None:
        self.view, self.blocks, self.bins = view, blocks, bins
        self.unit = bool(view.w.min() == view.w.max() == 1.0)
        named = view.terms(slice(0, 0))  # each chunk makes its own terms
        self.term_names = [name for name in named if terms is None or name in terms]
        self.columns: dict[str, int] = {}
        self.sums: dict[str, FloatArray] = {}
        self.gaps = np.zeros(BLOCKS * bins)
        self.bin_spread = np.zeros(bins)
        self.smooth = smooth
        self.curve_size = None if sigma is None or not smooth else grid_size(sigma)
        self.grids: dict[str, FloatArray] = {}
        self.cell_spread = np.zeros((3, FINEST_GRID - 1))

    def _add(self, name: str, block: NDArray[np.intp], values: FloatArray | None) -> None:
        if name not in self.sums:
            self.columns[name] = len(self.sums)
            self.sums[name] = np.zeros(BLOCKS)
        self.sums[name] += np.bincount(block, values, BLOCKS)

    def _split(
        self, name: str, index: NDArray[np.intp], frac: FloatArray, columns: FloatArray, size: int
    ) -> None:
        """Add each column of ``columns`` (rows x k) split onto grid points ``index`` and
        ``index + 1`` in shares 1 - frac and frac: one sparse product, whose scatter writes a
        row's k values side by side (four bincounts over a grid of 10^6 points cost 2.5 times
        as much, measured)."""
        n = index.size
        points = np.empty(2 * n, dtype=np.int32)
        points[0::2], points[1::2] = index, index + 1
        shares = np.empty(2 * n)
        shares[1::2] = frac
        np.subtract(1.0, frac, out=shares[0::2])
        split = csc_matrix((shares, points, np.arange(0, 2 * n + 1, 2)), shape=(size, n))
        found = np.asarray(split @ columns)
        if name in self.grids:
            self.grids[name] += found
        else:
            self.grids[name] = found

    def add(
        self,
        rows: slice,
        bins: NDArray[np.intp],
        placements: FloatArray | None,
        line: Line | None,
        offset_intercept: float | None,
    ) -> None:
        """Add the rows' sums: ``bins`` their bins, ``placements`` theirs (None: no AUC)."""
        checkpoint()
        p, y = self.view.p[rows], self.view.y[rows]
        w = np.asarray(self.view.w[rows], dtype=np.float64)

        def weighted(values: FloatArray) -> FloatArray:
            return values if self.unit else w * values

        block = self.blocks.of_row[rows].astype(np.intp)
        self._add("weight", block, None if self.unit else w)
        self._add("positive", block, weighted(y))
        if self.term_names:
            found = self.view.terms(rows)
            for name in self.term_names:  # a loop over the (2 or 3) terms
                self._add(name, block, weighted(found[name]))
        if placements is not None:
            self._add("auc", block, weighted(placements))
        if line is not None or offset_intercept is not None:
            z = logit(np.clip(p, EPS, 1.0 - EPS))
        if line is not None:
            mu = expit(line.intercept + line.slope * z)
            h = w * mu * (1.0 - mu)
            residual = w * (y - mu)
            for name, values in (("r", residual), ("rz", residual * z), ("h", h)):
                self._add(name, block, values)
            self._add("hz", block, h * z)
            self._add("hzz", block, h * z * z)
        if offset_intercept is not None:
            mu = expit(offset_intercept + z)
            self._add("r0", block, w * (y - mu))
            self._add("h0", block, w * mu * (1.0 - mu))
        self.gaps += np.bincount(block * self.bins + bins, weighted(p - y), self.gaps.size)
        spread = weighted(weighted(p * (1.0 - p)))
        self.bin_spread += np.bincount(bins, spread, self.bins)
        if self.smooth:
            self._add_smooth(p, y, w, block % SMOOTH_BLOCKS, spread)

    def _add_smooth(
        self,
        p: FloatArray,
        y: FloatArray,
        w: FloatArray,
        block: NDArray[np.intp],
        spread: FloatArray,
    ) -> None:
        cell, frac = grid_cells(p, FINEST_GRID)
        index, size = block * FINEST_GRID + cell, SMOOTH_BLOCKS * FINEST_GRID
        self._split("smooth", index, frac, np.column_stack([w, w * (p - y)]), size)
        for k, factor in enumerate(((1.0 - frac) ** 2, frac * (1.0 - frac), frac * frac)):
            self.cell_spread[k] += np.bincount(cell, spread * factor, FINEST_GRID - 1)
        if self.curve_size is not None:
            cell, frac = grid_cells(p, self.curve_size)
            index, size = block * self.curve_size + cell, SMOOTH_BLOCKS * self.curve_size
            self._split("curve", index, frac, np.column_stack([w, w * y]), size)

    def tables(self, auc: float, auc_atoms: float) -> BlockTables:
        def grids(name: str, size: int) -> tuple[FloatArray, FloatArray]:
            both = self.grids[name]
            return both[:, 0].reshape(SMOOTH_BLOCKS, size), both[:, 1].reshape(SMOOTH_BLOCKS, size)

        smooth = curve = None
        if self.smooth:
            smooth = grids("smooth", FINEST_GRID)
        if self.curve_size is not None:
            curve = grids("curve", self.curve_size)
        return BlockTables(
            sums=np.column_stack(list(self.sums.values())),
            columns=self.columns,
            terms=self.term_names,
            gaps=self.gaps.reshape(BLOCKS, self.bins),
            auc=auc,
            auc_atoms=auc_atoms,
            bin_spread=self.bin_spread,
            smooth=smooth,
            curve=curve,
            cell_spread=self.cell_spread if self.smooth else None,
        )
