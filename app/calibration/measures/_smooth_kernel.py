"""The reflected Gaussian kernel of the smooth ECE, on the grid and mesh of the reference code.

Błasiok & Nakkiran, *Smooth ECE: Principled Reliability Diagrams via Kernel Smoothing*, ICLR
2024 (section 4 and appendix on the discretised estimator); the arithmetic is that of their
package ``relplot`` 1.0.3 in its default configuration (no logit scaling,
``ReflectedGaussianKernel``), so that the numbers agree with it:

- A kernel of width sigma works on the grid of G = max(2000, round(20 / sigma)) // 2 + 1 points
  i / (G - 1), G = 1001 for every sigma >= 0.01 (``GaussianKernel.apply``). A row at p adds its
  value to the grid points i and i + 1 around p, in shares 1 - frac and frac, where
  i + frac = p (G - 1) (``smooth_round_to_grid``).
- The grid is convolved with the Gaussian density of variance sigma^2 sampled at the grid's
  points and centred on its middle one (``kernel_ev``), the grid being reflected at both ends
  without repeating the end points (``ReflectedGaussianKernel.convolve``), and read at the mesh
  linspace(0, 1, M) by linear interpolation (``interpolate``); M = max(round(10 / sigma), 200)
  for the smooth ECE (``metrics.smooth_ece``).

Reflected that way the grid is periodic with period P = 2G - 2, and the kernel's G points fit in
one period, so the convolution is circular on P points: a real FFT does it
(:class:`ReflectedGaussian`; the grid's own transform is a type-I DCT, the reflection being
even). Its rounding error is absolute (about 1e-16 of the largest
smoothed value), which the smooth ECE's sums do not notice; a ratio of two smoothed curves far
from the data would, so the curves use the kernel as a matrix (:func:`mesh_matrix`), whose
products keep their relative accuracy in the tails, as relplot's direct convolution does.

The bootstrap's grids, in single precision, are read at the mesh through a small product
where that is cheaper (:mod:`app.calibration.measures._mesh_basis`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import scipy.fft
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

from app.calibration.base import FloatArray
from app.calibration.kernels.weights import row_blocks
from app.calibration.measures._mesh_basis import BASIS_ROWS, mesh_basis

IntArray = NDArray[np.intp]
ComplexArray = NDArray[np.complex128]

DENSITY_EPS = 1e-4
"""Added to the smoothed density at each mesh point (relplot's ``BaseKernelMixin.smooth``)."""
WIDTH_EPS = 1e-3
"""Widths below this pass the search's test unexamined (relplot's ``smECE(eps=0.001)``)."""
MESH = 200
"""The least mesh of the smooth ECE (``config.smECE_mesh_pts``) and the curves' mesh."""
REFINE = 10
"""Bisection steps of the width search (``search_param(start=1, refine=10)``)."""


def grid_size(sigma: float) -> int:
    """G, the number of grid points of a kernel of width ``sigma``."""
    return max(2000, round(20.0 / sigma)) // 2 + 1


BASE_GRID = grid_size(1.0)
"""1001: the grid of every width from about 0.01 up."""
FINEST_GRID = grid_size(2.0**-9)
"""5121: the grid of the narrowest width the search examines (its midpoints are multiples of
2^-10, and 2^-10 < 0.001 passes the test unexamined)."""


def mesh_size(sigma: float) -> int:
    """M, the number of mesh points at which the smooth ECE of width ``sigma`` is summed."""
    return max(round(10.0 / sigma), MESH)


def grid_cells(x: FloatArray, size: int) -> tuple[IntArray, FloatArray]:
    """The grid point at or below each x (the last but one for x = 1) and x's fraction of the
    way to the next point, as ``smooth_round_to_grid`` and ``interpolate`` compute them."""
    cell = (x * (size - 1)).astype(np.intp).clip(0, size - 2)
    return cell, x * (size - 1) - cell


def split_onto_grid(
    p: FloatArray, values: Callable[[slice], Sequence[FloatArray]], size: int
) -> FloatArray:
    """Each of the k quantities ``values(rows)`` gives for a block of rows, split onto the
    grid at p: a k x G array. The rows go a block at a time
    (:func:`~app.calibration.kernels.weights.row_blocks`), so no temporary holds a value per
    row of a large batch (whole, a 6 x 10^6-row batch's grids took ~300 MB of them)."""
    grids: FloatArray | None = None
    for rows in row_blocks(max(p.size, 1)):  # a loop over blocks of rows
        cell, frac = grid_cells(p[rows], size)
        found = np.stack(
            [  # a loop over the k quantities, not over rows
                np.bincount(cell, row * (1.0 - frac), size)
                + np.bincount(cell + 1, row * frac, size)
                for row in values(rows)
            ]
        )
        if grids is None:
            grids = found
        else:
            grids += found
    assert grids is not None  # one block at least
    return grids


def reflected_spectra(grids: NDArray[np.floating]) -> NDArray[np.floating]:
    """The real FFT of each grid (b x G) reflected at its ends into one period of 2G - 2.

    The reflected period is even, so its transform is real: the type-I discrete cosine
    transform of the grid, which scipy computes without building the period (four times
    faster than the real FFT of it at G = 2561, measured; equal to it within 1e-15).
    """
    spectra: NDArray[np.floating] = scipy.fft.dct(grids, type=1, axis=1)
    return spectra


@dataclass(frozen=True, eq=False)
class ReflectedGaussian:
    """relplot's ``ReflectedGaussianKernel(sigma)`` on its grid, read at the smooth ECE's mesh.

    ``spectrum`` is the FFT of the kernel wrapped onto the period (``spectrum32`` the same in
    single precision, for grids in float32); ``cell`` and ``frac`` place the mesh points on
    the grid; ``mass[a]`` is the sum over the mesh of the smoothed unit
    vector at grid point a, so that the summed density of a grid v is ``v @ mass``
    (``mass32`` the same in single precision: a product of float32 grids with float64 weights
    is no BLAS product, and took a third of a search's time).
    """

    sigma: float
    spectrum: ComplexArray
    spectrum32: NDArray[np.complex64]
    cell: IntArray
    frac: FloatArray
    mass: FloatArray
    mass32: NDArray[np.float32]

    @property
    def size(self) -> int:
        """G, the grid's number of points."""
        return self.mass.size

    @property
    def mesh(self) -> int:
        """M, the mesh's number of points."""
        return self.cell.size

    def on_mesh(self, spectra: NDArray[np.floating]) -> FloatArray:
        """The smoothed grids, whose :func:`reflected_spectra` are given, at the mesh (b x M);
        float32 spectra (the bootstrap's) are transformed in single precision, or, from
        :data:`~app.calibration.measures._mesh_basis.BASIS_ROWS` rows, multiplied by the
        width's :func:`~app.calibration.measures._mesh_basis.mesh_basis` if it has one."""
        single = spectra.dtype == np.float32
        basis = mesh_basis(self) if single and spectra.shape[0] >= BASIS_ROWS else None
        if basis is not None:
            read: FloatArray = spectra[:, : basis.shape[0]] @ basis
            return read
        kernel = self.spectrum32 if single else self.spectrum
        smoothed = np.fft.irfft(spectra * kernel, 2 * self.size - 2, axis=1)
        return smoothed[:, self.cell] * (1.0 - self.frac) + smoothed[:, self.cell + 1] * self.frac


def kernel_samples(sigma: float, size: int) -> FloatArray:
    """The Gaussian density of variance sigma^2 at linspace(0, 1, G) - 1/2 (``kernel_ev``)."""
    x = np.linspace(0.0, 1.0, size)
    samples: FloatArray = np.exp(-(x - 0.5) * (x - 0.5) / (2.0 * sigma**2))
    samples /= np.sqrt(2.0 * np.pi) * sigma
    return samples


@lru_cache(maxsize=512)
def reflected_gaussian(sigma: float) -> ReflectedGaussian:
    """The kernel of width ``sigma`` (cached: a search meets at most 2^10 dyadic widths)."""
    size = grid_size(sigma)
    period = 2 * size - 2
    # the kernel's middle sample is its offset 0; offsets below it wrap to the period's end
    wrapped = np.roll(np.pad(kernel_samples(sigma, size), (0, period - size)), -(size // 2))
    spectrum = np.fft.rfft(wrapped)
    cell, frac = grid_cells(np.linspace(0.0, 1.0, mesh_size(sigma)), size)
    reading = np.bincount(cell, 1.0 - frac, size) + np.bincount(cell + 1, frac, size)
    # mass = the adjoint of (reflect, convolve, interpolate) applied to ones on the mesh:
    # correlate with the kernel, then fold the reflected half back onto the grid
    folded = np.fft.irfft(np.fft.rfft(reading, period) * spectrum.conj(), period)
    mass = folded[:size].copy()
    mass[1:-1] += folded[: size - 1 : -1]
    spectrum32 = spectrum.astype(np.complex64)
    mass32 = mass.astype(np.float32)
    kernel = ReflectedGaussian(sigma, spectrum, spectrum32, cell, frac, mass, mass32)
    for array in (spectrum, spectrum32, cell, frac, mass, mass32):
        array.flags.writeable = False
    return kernel


@lru_cache(maxsize=64)
def mesh_matrix(sigma: float, mesh: int) -> FloatArray:
    """The M x G matrix of (reflect, convolve, interpolate to linspace(0, 1, M)) at width sigma.

    Row m is (1 - frac) K[i] + frac K[i + 1] for the mesh point between grid points i and i + 1,
    where K[i, a] = k(i - a) + k(i + a) [a > 0] + k(i + a - 2G + 2) [a < G - 1] sums the kernel
    k over grid point a and its reflections at 0 and G - 1.
    """
    size = grid_size(sigma)
    reach = 2 * size - 2  # the offsets i - a, i + a and i + a - 2G + 2 lie in -reach..reach
    table = np.zeros(2 * reach + 1)  # table[reach + d] = k(d)
    table[reach - size // 2 : reach - size // 2 + size] = kernel_samples(sigma, size)
    forward = sliding_window_view(table, size)  # forward[s, a] = table[s + a]
    backward = sliding_window_view(table[::-1], size)  # backward[s, a] = table[2 reach - s - a]

    def rows(i: IntArray) -> FloatArray:
        direct = backward[reach - i]
        low = forward[reach + i].copy()
        low[:, 0] = 0.0  # grid point 0 is its own reflection at 0
        high = forward[i].copy()
        high[:, -1] = 0.0  # and G - 1 its own at G - 1
        return direct + low + high

    cell, frac = grid_cells(np.linspace(0.0, 1.0, mesh), size)
    matrix = rows(cell) * (1.0 - frac)[:, None] + rows(cell + 1) * frac[:, None]
    matrix.flags.writeable = False
    return matrix


Grids = Callable[[int, IntArray], tuple[NDArray[np.floating], NDArray[np.floating]]]
"""For a grid size G and some problems: their weight grids (a row each, or 1 x G shared by
all) and the :func:`reflected_spectra` of their weighted residual grids (a row each)."""


def smooth_eces(sigmas: FloatArray, rows: IntArray, grids: Grids) -> FloatArray:
    """relplot's ``smooth_ece(f, y, sigma)`` of the problems ``rows``, each at its own width
    ``sigmas`` (same length), from their ``grids``: the sum over the mesh of |smoothed
    residual| over the sum of the smoothed density plus 1e-4 at each mesh point (the sum of
    |r| dens for r = residual / dens is the sum of |residual|).

    The problems of one width are smoothed together (one inverse FFT) and read at their
    mesh; batching different widths into one transform, padded to the longest mesh, was
    measured slower.
    """
    value = np.empty(rows.size)
    widths, which = np.unique(sigmas, return_inverse=True)
    for k, sigma in enumerate(widths.tolist()):  # a loop over the distinct widths of a step
        kernel = reflected_gaussian(sigma)
        members = np.flatnonzero(which == k)
        ones, residual_spectra = grids(kernel.size, rows[members])
        mass = kernel.mass32 if ones.dtype == np.float32 else kernel.mass
        density = ones @ mass
        smoothed = kernel.on_mesh(residual_spectra)
        value[members] = np.abs(smoothed).sum(axis=1) / (density + kernel.mesh * DENSITY_EPS)
    return value


def search_width(grids: Grids, count: int) -> tuple[FloatArray, FloatArray]:
    """relplot's width search (``smECE``: ``search_param(check, start=1, refine=10)``), run for
    ``count`` problems at once: the widths and the smooth ECE at each.

    The test at sigma is sigma < 0.001 or sigma < smooth ECE(sigma); the search keeps the
    largest width that failed it, starting from 1, and halves the interval ten times. Each
    step evaluates every pending problem at its own midpoint in one :func:`smooth_eces`.
    """
    everyone = np.arange(count)
    at_one = smooth_eces(np.ones(count), everyone, grids)
    done = at_one > 1.0  # the test passed at the start: the width is 1
    start, end, value = np.ones(count), np.zeros(count), at_one.copy()
    for _ in range(REFINE):
        middle = (start + end) / 2.0
        passed = ~done & (middle < WIDTH_EPS)
        rows = np.flatnonzero(~done & ~passed)
        smooth = smooth_eces(middle[rows], rows, grids)
        below = middle[rows] < smooth
        passed[rows] = below
        value[rows[~below]] = smooth[~below]
        end = np.where(passed, middle, end)
        start = np.where(~done & ~passed, middle, start)
    return start, value
