"""Błasiok & Nakkiran's smooth ECE, its reliability curve, and a kernel for its bootstrap.

Błasiok & Nakkiran, *Smooth ECE: Principled Reliability Diagrams via Kernel Smoothing*, ICLR
2024: the residuals p - y are smoothed by a Gaussian kernel of width sigma reflected at 0 and 1,
and smECE_sigma is the mean absolute smoothed residual under the smoothed density of p; the
width is the fixed point sigma = smECE_sigma, found by bisection. The numbers are those of the
authors' package ``relplot`` 1.0.3 (``relplot.smECE(f, y, eps=0.001, return_width=True)``,
default configuration), discretisation included (:mod:`app.calibration._smooth_kernel`).

Weights are frequency weights: an integer weight counts as that many copies of its row, scale
included (relplot adds an absolute 1e-4 to the smoothed density, so weights are not
normalised away). :class:`SmoothEceResampler` evaluates the smooth ECE of many bootstrap
resamples of one batch at once, each with its own width, and their curves at one width, for
the bootstrap of :mod:`app.calibration.report`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import csc_matrix

from app.calibration._smooth_kernel import (
    DENSITY_EPS,
    MESH,
    WIDTH_EPS,
    ComplexArray,
    IntArray,
    ReflectedGaussian,
    grid_cells,
    grid_size,
    mesh_matrix,
    reflected_gaussian,
    reflected_spectra,
    search_width,
    split_onto_grid,
)
from app.calibration.base import CalibrationError, FloatArray
from app.calibration.checks import check_probabilities


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
    spectra: dict[int, tuple[FloatArray, ComplexArray]] = {}  # by grid size

    def evaluate(sigma: float, rows: IntArray) -> FloatArray:
        kernel = reflected_gaussian(sigma)
        if kernel.size not in spectra:
            ones, residual = split_onto_grid(p, np.stack([w, w * (p - y)]), kernel.size)
            spectra[kernel.size] = (ones[None], reflected_spectra(residual[None]))
        ones, residual_spectra = spectra[kernel.size]
        return kernel.smooth_ece(residual_spectra, ones)

    sigma, value = search_width(evaluate, 1)
    return SmoothEce(float(value[0]), float(sigma[0]))


def smooth_ece_at(p: FloatArray, y: FloatArray, w: FloatArray | None, sigma: float) -> float:
    """The smooth ECE at the fixed width ``sigma`` >= 0.001: relplot's
    ``metrics.smooth_ece(p, y, sigma)``."""
    p, y, w = check_probabilities(p, y, w)
    kernel = reflected_gaussian(_check_sigma(sigma))
    ones, residual = split_onto_grid(p, np.stack([w, w * (p - y)]), kernel.size)
    return float(kernel.smooth_ece(reflected_spectra(residual[None]), ones[None])[0])


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
    ones, positives = split_onto_grid(p, np.stack([w, w * y]), grid_size(sigma))
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
    weights or labels. Splitting rows onto a grid is a sparse product (each row gives the two
    grid points around its p their shares of its weight), so a chunk's columns are split
    together without reordering them; then each step of the width search smooths the
    resamples at each distinct width together (one FFT). The contents of weights and labels
    are trusted: the service draws them.
    """

    def __init__(self, p: FloatArray, y: FloatArray, w: FloatArray) -> None:
        self._p, self._y, self._w = p, y, w
        self._splits: dict[tuple[int, str, type], csc_matrix] = {}
        self._fixed: dict[int, tuple[FloatArray, ...]] = {}

    def values(
        self, weights: NDArray[np.floating] | None, labels: NDArray[np.floating] | None = None
    ) -> FloatArray:
        """Each resample's smooth ECE with its own width, for the n x b ``weights``; with
        ``labels`` (n x b) the resamples are those labels under the sample weights instead
        (``weights`` then unread)."""
        if labels is None and weights is None:
            raise CalibrationError("give the resamples' weights or labels", loc=("weights",))
        count = (weights if labels is None else labels).shape[1]  # type: ignore[union-attr]
        spectra: dict[int, tuple[FloatArray, ComplexArray]] = {}  # by grid size

        def evaluate(sigma: float, rows: IntArray) -> FloatArray:
            kernel: ReflectedGaussian = reflected_gaussian(sigma)
            if kernel.size not in spectra:
                ones, residual = self._residual_grids(kernel.size, weights, labels)
                spectra[kernel.size] = (
                    np.broadcast_to(ones, (count, kernel.size)),
                    reflected_spectra(residual),
                )
            ones, residual_spectra = spectra[kernel.size]
            return kernel.smooth_ece(residual_spectra[rows], ones[rows])

        return search_width(evaluate, count)[1]

    def curves(self, weights: NDArray[np.floating], sigma: float, mesh: int = MESH) -> FloatArray:
        """Each resample's smoothed fraction of positives at width ``sigma``, at ``mesh``
        points linspace(0, 1, mesh): b x mesh, rows of :func:`smooth_curve`'s ``mu``."""
        size = grid_size(_check_sigma(sigma))
        ones, positives = self._grids(size, ("share", "share_y"), weights)
        matrix = mesh_matrix(float(sigma), mesh)
        curves: FloatArray = positives @ matrix.T / (ones @ matrix.T + DENSITY_EPS)
        return curves

    def _residual_grids(
        self,
        size: int,
        weights: NDArray[np.floating] | None,
        labels: NDArray[np.floating] | None,
    ) -> tuple[FloatArray, FloatArray]:
        """The grids of weight (b x G, or 1 x G for consistency resamples) and of weighted
        residual p - y (b x G) of each resample."""
        if labels is None:
            assert weights is not None
            ones, residual = self._grids(size, ("share", "share_residual"), weights)
            return ones, residual
        if size not in self._fixed:  # the sample weights' grids, the same for every resample
            self._fixed[size] = self._grids(size, ("share", "share_p"), self._w[:, None])
        ones, predicted = self._fixed[size]
        (positives,) = self._grids(size, ("share_w",), labels)
        return ones, predicted - positives

    def _grids(
        self, size: int, kinds: tuple[str, ...], columns: NDArray[np.floating]
    ) -> tuple[FloatArray, ...]:
        """Each kind's grid (b x G) of the n x b ``columns``: one sparse product, in float32
        for float32 columns (the resamples' counts and labels: 3.6 times faster, measured,
        than letting scipy convert them to float64), else in float64."""
        dtype = np.float32 if columns.dtype == np.float32 else np.float64
        key = (size, ",".join(kinds), dtype)
        if key not in self._splits:
            self._splits[key] = self._split(size, kinds).astype(dtype)
        stacked = np.asarray(self._splits[key] @ columns, dtype=np.float64).T
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
