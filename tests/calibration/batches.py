"""Random binary batches for the calibration tests."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Batch = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]


def sigmoid_batch(
    rng: np.random.Generator, n: int, *, slope: float = 2.0, spread: float = 1.5, decimals: int = -1
) -> Batch:
    """Scores ~ N(0, spread), P(y=1 | f) = expit(slope f - 0.5): a sigmoid distortion.

    ``decimals >= 0`` rounds the scores, producing heavy ties. Unit weights.
    """
    f = rng.normal(scale=spread, size=n)
    if decimals >= 0:
        f = np.round(f, decimals)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(slope * f - 0.5)))).astype(np.float64)
    y[:2] = [0.0, 1.0]  # both classes, always
    return f, y, np.ones(n)


def random_weights(
    rng: np.random.Generator, n: int, *, zero_fraction: float = 0.1
) -> NDArray[np.float64]:
    """Weights uniform in (0, 3), about ``zero_fraction`` of them 0, the first two positive."""
    w = rng.uniform(0.0, 3.0, size=n)
    w[rng.random(n) < zero_fraction] = 0.0
    w[:2] = 1.0
    return w
