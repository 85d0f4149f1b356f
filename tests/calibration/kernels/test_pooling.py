"""pool_ties: the sorted path every fit now takes agrees with the sort-it-yourself paths."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.calibration.kernels.pooling import SMALLEST_GAP, count_distinct, is_sorted, pool_ties


def _reference(
    f: np.ndarray, y: np.ndarray, w: np.ndarray, min_gap: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pools by a plain loop over the sorted positive-weight points (the definition: a point
    starts a new pool when it exceeds the previous point by at least ``min_gap``)."""
    keep = w > 0
    order = np.argsort(f[keep], kind="stable")
    fs, ys, ws = f[keep][order], y[keep][order], w[keep][order]
    firsts, weights, positives = [], [], []
    previous = -np.inf
    for score, label, weight in zip(fs, ys, ws, strict=True):
        if score - previous >= min_gap:
            firsts.append(score)
            weights.append(0.0)
            positives.append(0.0)
        weights[-1] += weight
        positives[-1] += weight * label
        previous = score
    return np.array(firsts), np.array(weights), np.array(positives)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(-6, 6), min_size=1, max_size=60),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["equal", "varied", "zeros"]),
    st.sampled_from([SMALLEST_GAP, 1.5]),
)
def test_every_path_pools_as_the_definition(
    raw: list[int], seed: int, weighting: str, min_gap: float
) -> None:
    rng = np.random.default_rng(seed)
    f = np.array(raw, dtype=np.float64) / 2
    y = (rng.random(f.size) < 0.5).astype(np.float64)
    w = {
        "equal": np.full(f.size, 0.75),
        "varied": rng.uniform(0.1, 3.0, f.size),
        "zeros": rng.choice([0.0, 1.0, 2.0], f.size),
    }[weighting]
    if not (w > 0).any():
        return
    expected = _reference(f, y, w, min_gap)
    order = np.argsort(f, kind="stable")
    for scores, labels, weights in ((f, y, w), (f[order], y[order], w[order])):
        pooled = pool_ties(scores, labels, weights, min_gap=min_gap)
        for got, want in zip(pooled, expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert is_sorted(f[order])
    assert count_distinct(np.sort(f)) == np.unique(f).size
