"""The smooth ECE's smoothing read at the mesh as one small product, for the bootstrap's
single-precision grids (:mod:`app.calibration.measures._smooth_kernel`).

A grid's smoothing at width sigma is the inverse transform of its spectrum times the kernel's
over the reflected period 2G - 2. The Gaussian's coefficients fall as
exp(-pi^2 sigma^2 k^2 / 2), so at the widths a search mostly meets a few dozen to a few
hundred frequencies carry everything single precision (rounding 6e-8) can hold: the reading
at the mesh is then the product of the kept coefficients with a K x M matrix
(:func:`mesh_basis`) instead of a transform of the whole period and a gather, at 10 to 40
times less work a resample (measured at widths 0.01 to 0.06); a few 1e-6 of the largest
smoothed value from the float64 transform. Wide kernels are cut off by the grid's ends and
keep most frequencies; there the product gains about 2 times.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from app.calibration.measures._smooth_kernel import ReflectedGaussian

TRUNCATION = 1e-7
"""The share of the kernel's largest coefficient below which a frequency is dropped: its terms
are then below single precision's rounding of the sum (measured: a cut at 1e-6 moves nothing
by more than the rounding itself)."""
BASIS_ROWS = 32
"""The fewest rows smoothed at once through a basis (fewer take the transform): small reports
meet many widths, each a basis to build (up to 4 ms) for a few rows."""
MAX_BASIS = 2**18
"""The most entries of a basis (1 MB): narrower kernels keep too many frequencies for a product
to beat the transform, and go through it."""
CACHE_BYTES = 32 << 20
"""The bases kept, at most, in bytes: the least recently used go first. A search's widths are
dyadic, so the same few hundred recur from report to report."""

Basis = NDArray[np.float32]
_kept: OrderedDict[float, Basis | None] = OrderedDict()
_kept_bytes = 0
_lock = threading.Lock()


def mesh_basis(kernel: ReflectedGaussian) -> Basis | None:
    """The K x M matrix that takes the first K coefficients of a grid's reflected spectrum (its
    type-I DCT: real, even) to its smoothing by ``kernel`` read at the mesh; K the frequencies
    whose kernel coefficient is at least :data:`TRUNCATION` of the largest in magnitude. None
    past :data:`MAX_BASIS` entries. Cached by width, :data:`CACHE_BYTES` in all.

    The inverse real transform of the period P = 2G - 2 at grid point i is
    sum_k w_k Re(S_k c_k e^(2 pi i k i / P)) / P, with w_k = 1 at k = 0 and k = G - 1 (the
    Nyquist term) and 2 between. S is real; c, the kernel's, is real when G is odd (the
    kernel's middle sample is its offset 0) and not when G is even (half a step off), so each
    term is S_k (Re c_k cos - Im c_k sin); row k of the matrix is that term at the mesh point's
    two grid points, in their shares.
    """
    global _kept_bytes
    with _lock:
        if kernel.sigma in _kept:
            _kept.move_to_end(kernel.sigma)
            return _kept[kernel.sigma]
    basis = _basis(kernel)
    with _lock:
        if kernel.sigma not in _kept:
            _kept[kernel.sigma] = basis
            _kept_bytes += 0 if basis is None else basis.nbytes
            while _kept_bytes > CACHE_BYTES:
                _, dropped = _kept.popitem(last=False)
                _kept_bytes -= 0 if dropped is None else dropped.nbytes
    return basis


def _basis(kernel: ReflectedGaussian) -> Basis | None:
    """:func:`mesh_basis`, built."""
    coefficients = kernel.spectrum
    magnitude = np.abs(coefficients)
    kept = int(np.flatnonzero(magnitude >= TRUNCATION * magnitude.max())[-1]) + 1
    if kept * kernel.mesh > MAX_BASIS:
        return None
    size, period = kernel.size, 2 * kernel.size - 2
    k = np.arange(kept)[:, None]
    angles = 2.0 * np.pi * np.arange(period) / period  # the angle of k i, taken mod the period
    cos, sin = np.cos(angles), np.sin(angles)
    low, high = k * kernel.cell % period, k * (kernel.cell + 1) % period
    shares = 1.0 - kernel.frac, kernel.frac
    cosines = cos[low] * shares[0] + cos[high] * shares[1]
    sines = sin[low] * shares[0] + sin[high] * shares[1]
    weights = np.where((k == 0) | (k == size - 1), 1.0, 2.0) / period
    head = coefficients[:kept, None]
    basis: Basis = (weights * (head.real * cosines - head.imag * sines)).astype(np.float32)
    basis.flags.writeable = False
    return basis
