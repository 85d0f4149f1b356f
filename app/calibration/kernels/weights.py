"""Sample weights as relative weights: whole, or a block of rows at a time.

Every method and measure reads the weights through :func:`relative_weights`, so any finite
weights work whatever their unit. The measures of :mod:`~app.calibration.measures.metrics` work
through a batch of up to 10^7 rows :data:`BLOCK` rows at a time (:func:`relative_blocks`), with a
:func:`~app.calibration.kernels.budget.checkpoint` per block, so a diagnostics job past its budget
or whose client left stops within a block.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray
from app.calibration.kernels.budget import checkpoint

BLOCK = 1 << 16
"""Rows per block: enough to amortise numpy's cost per call, few enough to stay in cache."""


def relative_weights(sample_weight: FloatArray) -> tuple[FloatArray, int]:
    """(w 2^-e, e): the weights divided by the power of two that brings the largest into [0.5, 1).

    Sample weights are relative: a weighted fit or mean depends on their ratios, not on their
    unit. Every computation that needs only the ratios reads the weights through this function
    first: the logistic fits of Platt and beta, isotonic regression, histogram binning,
    temperature scaling, Boström's correction, Kish's effective size (so the Laplace bound)
    and the measures of :mod:`~app.calibration.measures.metrics`. (Venn-ABERS divides by the largest
    weight instead, which makes any equal weights exactly 1 for its exact hull arithmetic.)
    So any finite weights work, whatever their unit. Without it, subnormal weights (below
    2.2e-308) lose digits in every product, and a sum of them is too small to divide by
    (1 / 6e-309 overflows), while weights near 1e308 overflow in squares and sums. The
    alternative, refusing subnormal weights, would refuse ``c * w`` for a valid ``w`` and
    leave the large end broken.

    Dividing by a power of two is exact, so weights of ordinary size give the same results,
    bit for bit, as the weights as given, and ``c * w`` gives ``w``'s results up to the rounding
    of ``c * w`` itself. Only a weight more than 2^1021 times below the largest loses digits
    (it becomes subnormal), and one 2^1075 times below becomes 0: next to the largest, either
    vanishes from any sum anyway.

    Not scale-invariant, by definition: the few places that add pseudo-counts to weighted
    counts (Laplace's rule of succession) count the weights in the caller's units, via
    :func:`unit_weight`: Platt's smoothed targets (N+ + 1) / (N+ + 2) and 1 / (N- + 2), as
    scikit-learn computes them (weights of 1e-300 pull every target to 1/2, and weights of
    1e300 make them the hard 0/1), and histogram binning's ``smoothing="laplace"``. So
    ``platt`` with its default targets, the binning with Laplace smoothing, and ``auto``
    whenever it tries Platt are not scale-invariant. A reliability bin also reports its
    ``weight`` in the caller's units. Everything else is scale-invariant, including beta's
    negligible ridge, which is counted per unit of mean weight.
    """
    exponent = math.frexp(float(sample_weight.max()))[1]
    with np.errstate(under="ignore"):
        relative: FloatArray = np.ldexp(sample_weight, -exponent)
    return relative, exponent


_UNIT_WEIGHT_CAP = 1000


def unit_weight(exponent: int) -> float:
    """A weight of 1 in the caller's units, in the units of :func:`relative_weights`: 2^-e.

    Used for pseudo-counts added to relative weighted counts (e.g. (N+ + 1) / (N+ + 2) is
    (n + u) / (n + 2u) with n = N+ 2^-e and u this). Capped at 2^1000, reached for weights
    below ~1e-301: a relative sum is at most the number of points, so past the cap it falls
    below float64's resolution next to the pseudo-count either way. The cap changes no
    result, and it keeps the count from overflowing.
    """
    return math.ldexp(1.0, min(-exponent, _UNIT_WEIGHT_CAP))


def weighted_mean(values: FloatArray, w: FloatArray) -> float:
    """sum w_i values_i / sum w_i, on relative weights: the same for w times any constant."""
    return blockwise_mean(lambda block: values[block], w)


def blockwise_mean(values: Callable[[slice], FloatArray], w: FloatArray) -> float:
    """:func:`weighted_mean` of values computed a block of rows at a time, ``values(block)``.

    Neither the values nor the relative weights exist as n-sized arrays.
    """
    total = weight = 0.0
    for block, relative in relative_blocks(w):
        total += float(np.sum(relative * values(block)))
        weight += float(relative.sum())
    return total / weight


def row_blocks(n: int) -> Iterator[slice]:
    """The rows 0..n, :data:`BLOCK` at a time, each block starting at a
    :func:`~app.calibration.kernels.budget.checkpoint`: so that a computation over a large
    batch holds no temporary of its size, and stops within a block once its job is over
    budget or unwanted."""
    for start in range(0, n, BLOCK):
        checkpoint()
        yield slice(start, start + BLOCK)


def relative_blocks(
    w: FloatArray, order: NDArray[np.intp] | None = None
) -> Iterator[tuple[slice, FloatArray]]:
    """(block, relative weights of the rows w[block], or of w[order[block]]): the values of
    :func:`relative_weights` a block at a time.

    Each block starts at a :func:`~app.calibration.kernels.budget.checkpoint`, so a measure that
    works through a large batch stops within a block once its job is over budget or unwanted.
    """
    _, exponent = relative_weights(w.max(keepdims=True))
    for block in row_blocks(w.size):
        with np.errstate(under="ignore"):
            relative = np.ldexp(w[block] if order is None else w[order[block]], -exponent)
        yield block, relative
