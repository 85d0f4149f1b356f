"""Błasiok & Nakkiran's smooth ECE, its reliability curve, and a kernel for its bootstrap.

Błasiok & Nakkiran, *Smooth ECE: Principled Reliability Diagrams via Kernel Smoothing*, ICLR
2024: the residuals p - y are smoothed by a Gaussian kernel of width sigma reflected at 0 and 1,
and smECE_sigma is the mean absolute smoothed residual under the smoothed density of p; the
width is the fixed point sigma = smECE_sigma, found by bisection. The numbers are those of the
authors' package ``relplot`` 1.0.3 (``relplot.smECE(f, y, eps=0.001, return_width=True)``,
default configuration), discretisation included (:mod:`app.calibration.measures._smooth_kernel`).

Weights are frequency weights: an integer weight counts as that many copies of its row, scale
included (relplot adds an absolute 1e-4 to the smoothed density, so weights are not
normalised away). :class:`SmoothEceResampler` evaluates the smooth ECE of many bootstrap
resamples of one batch at once, each with its own width, and their curves at one width, for
the bootstrap of :mod:`app.calibration.measures.report`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, lru_cache
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import csc_matrix, csr_matrix

from app.calibration.base import CalibrationError, FloatArray
from app.calibration.kernels.checks import check_probabilities
from app.calibration.measures._smooth_kernel import (
    DENSITY_EPS,
    FINEST_GRID,
    MESH,
    WIDTH_EPS,
    IntArray,
    grid_cells,
    grid_size,
    mesh_matrix,
    reflected_spectra,
    search_width,
    smooth_eces,
    split_onto_grid,
)

Grid = NDArray[np.floating]
_SizeGrids = tuple[Grid, Grid]


class SmoothEce(NamedTuple):
    value: float
    sigma: float


class SmoothCurve(NamedTuple):
    """The smoothed reliability curve at the mesh ``t``: ``mu`` the smoothed fraction of
    positives (relplot's ``KernelSmoother``), ``density`` the kernel density of p."""

    t: FloatArray
    mu: FloatArray
    density: FloatArray


def smooth_ece(p: FloatArray, y: FloatArray, w: FloatArray | None = None) -> SmoothEce:
    """The smooth ECE of probabilities ``p`` for labels ``y`` (weights ``w``, default 1) and
    its automatic width: relplot's ``smECE(p, y, eps=0.001, return_width=True)``.

    Raises :class:`CalibrationError` naming the field: ``probabilities`` finite in [0, 1],
    ``labels`` 0/1, ``sample_weight`` finite, non-negative with a positive sum, one length.
    """
    p, y, w = check_probabilities(p, y, w)
    point = cache(lambda size: _point_grids(p, y, w, size))
    sigma, value = search_width(lambda size, _: point(size), 1)
    return SmoothEce(float(value[0]), float(sigma[0]))


def smooth_ece_at(p: FloatArray, y: FloatArray, w: FloatArray | None, sigma: float) -> float:
    """The smooth ECE at the fixed width ``sigma`` >= 0.001: relplot's
    ``metrics.smooth_ece(p, y, sigma)``."""
    p, y, w = check_probabilities(p, y, w)
    sigmas = np.array([_check_sigma(sigma)])
    return float(
        smooth_eces(sigmas, np.zeros(1, np.intp), lambda size, _: _point_grids(p, y, w, size))[0]
    )


def _point_grids(p: FloatArray, y: FloatArray, w: FloatArray, size: int) -> _SizeGrids:
    """One batch's weight grid and the spectrum of its residual grid (1 x G each)."""
    ones, residual = split_onto_grid(p, lambda rows: _residuals(p, y, w, rows), size)
    return ones[None], reflected_spectra(residual[None])


def _residuals(p: FloatArray, y: FloatArray, w: FloatArray, rows: slice) -> list[FloatArray]:
    """The rows' weights and weighted residuals w (p - y), which the smooth ECE smooths."""
    return [w[rows], w[rows] * (p[rows] - y[rows])]


def _positives(y: FloatArray, w: FloatArray, rows: slice) -> list[FloatArray]:
    """The rows' weights and weighted labels w y, whose smoothed ratio is the curve."""
    return [w[rows], w[rows] * y[rows]]


def smooth_curve(
    p: FloatArray, y: FloatArray, w: FloatArray | None, sigma: float, mesh: int = MESH
) -> SmoothCurve:
    """The reliability curve of width ``sigma`` at ``mesh`` points linspace(0, 1, mesh), as
    relplot's ``prepare_rel_diagram`` draws it: ``mu`` is
    ``ReflectedGaussianKernel(sigma).smooth(p, y, t)[0]`` and ``density`` its
    ``kde(p, t)`` (rows weighted w / sum w)."""
    p, y, w = check_probabilities(p, y, w)
    if isinstance(mesh, bool) or not isinstance(mesh, int) or mesh < 2:
        raise CalibrationError(f"must be an integer >= 2, not {mesh!r}", loc=("mesh",))
    matrix = mesh_matrix(_check_sigma(sigma), mesh)
    ones, positives = split_onto_grid(p, lambda rows: _positives(y, w, rows), grid_size(sigma))
    density = matrix @ ones
    t = np.linspace(0.0, 1.0, mesh)
    return SmoothCurve(t, matrix @ positives / (density + DENSITY_EPS), density / w.sum())


def _check_sigma(sigma: float) -> float:
    # narrower kernels than the search's own (2^-9) need grids past 10^4 points
    if not (isinstance(sigma, float | int) and np.isfinite(sigma) and sigma >= WIDTH_EPS):
        raise CalibrationError(f"must be a number >= {WIDTH_EPS}, not {sigma!r}", loc=("sigma",))
    return float(sigma)


class SmoothEceResampler:
    """The smooth ECE of many resamples of one batch at once, each with its own width, and
    their smoothed curves at one width.

    A resample is a column of per-row weights (Poisson counts times the sample weights) in
    the batch's row order, or a column of labels drawn from p under the sample weights (a
    consistency resample); its smooth ECE is :func:`smooth_ece` of the batch with those
    weights or labels (up to the grids' approximation, :func:`_coarsened`, for a batch of more
    rows than the finest grid has points). Splitting rows
    onto a grid is a sparse product (each row gives the two grid points around its p their
    shares of its weight), so a chunk's columns are split together without reordering them.
    A batch of more rows than the finest grid of the width search has points (5121) is split
    once, onto that grid, and each width's own grid is that split again; a smaller batch is
    split onto each width's grid directly, which costs less and is exact. Then each step of
    the search smooths the resamples at each distinct width together. The contents of weights
    and labels are trusted: the service draws them.
    """

    def __init__(self, p: FloatArray, y: FloatArray, w: FloatArray) -> None:
        self._p, self._y, self._w = p, y, w
        self._splits: dict[tuple[int, str, type], csc_matrix] = {}
        self._fixed: dict[int, tuple[Grid, ...]] = {}

    def values(
        self, weights: NDArray[np.floating] | None, labels: NDArray[np.floating] | None = None
    ) -> FloatArray:
        """Each resample's smooth ECE with its own width, for the n x b ``weights``; with
        ``labels`` (n x b) the resamples are those labels under the sample weights instead
        (``weights`` then unread)."""
        columns = labels if labels is not None else weights
        if columns is None:
            raise CalibrationError("give the resamples' weights or labels", loc=("weights",))

        def grids(size: int, rows: IntArray | None) -> _SizeGrids:
            drawn = columns if rows is None else columns[:, rows]
            if labels is None:
                ones, residual = self._grids(size, ("share", "share_residual"), drawn)
                return ones, residual
            if size not in self._fixed:  # the sample weights' grids, the same for every resample
                self._fixed[size] = self._grids(size, ("share", "share_p"), self._w[:, None])
            ones, predicted = self._fixed[size]
            (positives,) = self._grids(size, ("share_w",), drawn)
            return ones, (predicted - positives).astype(positives.dtype)

        if self._p.size > FINEST_GRID:
            return searched_eces(grids(FINEST_GRID, None))
        return _searched(grids, columns.shape[1])

    def curves(self, weights: NDArray[np.floating], sigma: float, mesh: int = MESH) -> FloatArray:
        """Each resample's smoothed fraction of positives at width ``sigma``, at ``mesh``
        points linspace(0, 1, mesh): b x mesh, rows of :func:`smooth_curve`'s ``mu``. On the
        width's own grid: far from the data a curve is a ratio of two small numbers, which
        the finest grid's approximation would move by up to 1% of the resamples' spread."""
        size = grid_size(_check_sigma(sigma))
        ones, positives = self._grids(size, ("share", "share_y"), weights)
        return curves_of_grids(ones, positives, sigma, mesh)

    def _grids(
        self, size: int, kinds: tuple[str, ...], columns: NDArray[np.floating]
    ) -> tuple[Grid, ...]:
        """Each kind's grid (b x G) of the n x b ``columns``: one sparse product, in float32
        for float32 columns (the resamples' counts and labels: 3.6 times faster, measured,
        than letting scipy convert them to float64), else in float64."""
        dtype = np.float32 if columns.dtype == np.float32 else np.float64
        key = (size, ",".join(kinds), dtype)
        if key not in self._splits:
            self._splits[key] = self._split(size, kinds).astype(dtype)
        stacked = (self._splits[key] @ columns).T
        return tuple(stacked[:, k * size : (k + 1) * size] for k in range(len(kinds)))

    def _split(self, size: int, kinds: tuple[str, ...]) -> csc_matrix:
        """The (len(kinds) G) x n matrix whose product with a column of row weights gives the
        grids: a row at p sends shares 1 - frac and frac of its weight to the grid points
        around p, times p - y, p, y or the sample weight w by kind."""
        cell, frac = grid_cells(self._p, size)
        factors = {
            "share": None,
            "share_residual": self._p - self._y,
            "share_p": self._p,
            "share_y": self._y,
            "share_w": self._w,
        }
        n, per_row = self._p.size, 2 * len(kinds)
        rows = np.empty((n, per_row), dtype=np.int64)
        values = np.empty((n, per_row))
        for k, kind in enumerate(kinds):  # a loop over the (two) kinds, not over rows
            factor = factors[kind]
            rows[:, 2 * k], rows[:, 2 * k + 1] = k * size + cell, k * size + cell + 1
            values[:, 2 * k], values[:, 2 * k + 1] = 1.0 - frac, frac
            if factor is not None:
                values[:, 2 * k : 2 * k + 2] *= factor[:, None]
        return csc_matrix(
            (values.ravel(), rows.ravel(), np.arange(0, per_row * n + 1, per_row)),
            shape=(len(kinds) * size, n),
        )


def curves_of_grids(ones: Grid, positives: Grid, sigma: float, mesh: int = MESH) -> FloatArray:
    """The smoothed fractions of positives at width ``sigma`` (b x mesh) of resamples whose
    weight and positives grids on the width's own grid are given (b x G each)."""
    matrix = mesh_matrix(float(sigma), mesh)
    curves: FloatArray = positives @ matrix.T / (ones @ matrix.T + DENSITY_EPS)
    return curves


def searched_eces(fine: _SizeGrids) -> FloatArray:
    """The width search of the resamples whose weight and residual grids on the finest grid
    are given (b x F each, or 1 x F weights shared by all): their smooth ECEs."""
    return _searched(lambda size, rows: _coarsened(_picked(fine, rows), size), fine[1].shape[0])


def _searched(grids: Callable[[int, IntArray | None], _SizeGrids], count: int) -> FloatArray:
    """The width search of ``count`` resamples whose weight and residual grids on a grid of
    G points ``grids(G, rows)`` gives (``rows`` None: all): their smooth ECEs.

    A grid that a quarter of the resamples or more meet (the 1001 points of every width from
    0.01 up) is made for all of them and kept; one that fewer meet (a narrower width's own,
    met by the resamples whose search reaches that width), for those only: making it for all
    took a third of a report's time at 10^5 rows."""
    kept: dict[int, _SizeGrids] = {}

    def spectra(size: int, rows: IntArray) -> _SizeGrids:
        if size not in kept and 4 * rows.size < count:
            ones, residual = grids(size, rows)
            return ones, reflected_spectra(residual)
        if size not in kept:
            ones, residual = grids(size, None)
            kept[size] = ones, reflected_spectra(residual)
        return _picked(kept[size], rows)

    return search_width(spectra, count)[1]


def _picked(grids: _SizeGrids, rows: IntArray | None) -> _SizeGrids:
    """The ``rows`` of weight and residual grids (all for None; shared weights stay shared)."""
    if rows is None:
        return grids
    ones, residual = grids
    return (ones if ones.shape[0] == 1 else ones[rows]), residual[rows]


def _coarsened(fine: _SizeGrids, size: int) -> _SizeGrids:
    """Grids on the finest grid (b x F each) split onto the grid of ``size`` points, as if
    each fine point were a row; the same grids at F.

    A row's shares on the fine grid, split again, keep its weight and its mean position but
    not quite its own split: the smoothed values move by about (fine spacing x coarse
    spacing) / (8 sigma^2) of themselves at most; measured, under 3e-4 at every grid the
    search meets, and none where the coarse grid's points are fine ones (G - 1 divides
    5120). For bootstrap resamples that is noise far below their spread, and it spares a
    product over every row per grid size.
    """
    if size == FINEST_GRID:
        return fine
    coarsen = coarsening(size)
    ones, residual = ((coarsen @ grid.T).T.astype(grid.dtype) for grid in fine)
    return ones, residual


@lru_cache(maxsize=16)
def coarsening(size: int) -> csr_matrix:
    """The G x F matrix that splits each point of the finest grid onto the grid of G points."""
    cell, frac = grid_cells(np.linspace(0.0, 1.0, FINEST_GRID), size)
    columns = np.arange(FINEST_GRID)
    return csr_matrix(
        (
            np.concatenate([1.0 - frac, frac]),
            (np.concatenate([cell, cell + 1]), np.tile(columns, 2)),
        ),
        shape=(size, FINEST_GRID),
    )
