"""Batches of several blocks: the measures against direct references, and what they allocate.

The measures work through a batch :data:`~app.calibration.kernels.weights.BLOCK` rows at a time;
these batches span three blocks (the last partial), with ties across the blocks' boundaries and
points exactly on bin edges, and the references are the unblocked formulas.
"""

from __future__ import annotations

import contextvars
import functools
import math
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.metrics import roc_auc_score

from app.calibration.kernels.budget import Abandoned, Budget, enter
from app.calibration.kernels.weights import BLOCK, weighted_mean
from app.calibration.measures.auc import roc_auc
from app.calibration.measures.diagnostics import headline, reliability_report
from app.calibration.measures.metrics import brier_score, log_loss
from app.calibration.measures.reliability import reliability_bins
from tests.calibration.batches import random_weights

N = 2 * BLOCK + 1234
Arrays = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]


def _batch(seed: int, *, decimals: int | None = None, weighted: bool = False) -> Arrays:
    rng = np.random.default_rng(seed)
    p = rng.beta(0.8, 1.3, N)
    if decimals is not None:
        p = np.round(p, decimals)  # tie groups thousands of rows long, across blocks
    y = (rng.random(N) < p).astype(np.float64)
    y[:2] = [0.0, 1.0]
    w = random_weights(rng, N) if weighted else np.ones(N)
    return p, y, w


def _exact_auc(p: NDArray[np.float64], y: NDArray[np.float64]) -> Fraction:
    """Mann-Whitney in exact arithmetic, over the distinct scores (few when rounded)."""
    values, pool = np.unique(p, return_inverse=True)
    positives = np.bincount(pool, weights=y, minlength=values.size).astype(int)
    negatives = np.bincount(pool, minlength=values.size) - positives
    below = np.concatenate([[0], np.cumsum(negatives)[:-1]])
    numerator = sum(
        Fraction(int(a) * (2 * int(b) + int(c)), 2)
        for a, b, c in zip(positives, below, negatives, strict=True)
    )
    return numerator / (int(positives.sum()) * int(negatives.sum()))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("decimals", [None, 2, 0])
def test_auc_matches_sklearn_across_blocks(weighted: bool, decimals: int | None) -> None:
    p, y, w = _batch(1, decimals=decimals, weighted=weighted)
    sw = w if weighted else None
    assert roc_auc(p, y, sw) == pytest.approx(roc_auc_score(y, p, sample_weight=sw), rel=1e-12)


@pytest.mark.parametrize("decimals", [2, 0])
def test_auc_of_equal_weights_is_the_exact_ratio_rounded_once(decimals: int) -> None:
    p, y, _ = _batch(2, decimals=decimals)
    exact = float(_exact_auc(p, y))
    assert roc_auc(p, y) == exact
    assert roc_auc(p, y, np.full(N, 3.7)) == exact  # equal weights cancel
    assert roc_auc(np.full(N, 0.25), y, random_weights(np.random.default_rng(3), N)) == 0.5


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("n_bins", [2, 10, 37, 100])
def test_bins_are_searchsorted_and_bincount(weighted: bool, strategy: str, n_bins: int) -> None:
    p, y, w = _batch(4, decimals=2, weighted=weighted)  # quantile edges fall on data points
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    p[: edges.size] = edges  # and every uniform edge is a point
    p[edges.size : 2 * edges.size - 2] = np.nextafter(edges[1:-1], 1.0)
    p[2 * edges.size] = -0.0
    bins = reliability_bins(p, y, n_bins, strategy, w)
    if strategy == "quantile":
        edges = np.percentile(p, np.linspace(0.0, 1.0, n_bins + 1) * 100)
    index = np.searchsorted(edges[1:-1], p)
    count = np.bincount(index, minlength=n_bins)
    weight = np.bincount(index, weights=w, minlength=n_bins)
    assert [b.lower for b in bins] + [bins[-1].upper] == edges.tolist()
    assert [b.count for b in bins] == count.tolist()
    np.testing.assert_allclose([b.weight for b in bins], weight, rtol=1e-12)
    filled = [b for b in bins if b.weight > 0]
    share = weight[weight > 0]
    mean = np.bincount(index, weights=w * p, minlength=n_bins)[weight > 0] / share
    frac = np.bincount(index, weights=w * y, minlength=n_bins)[weight > 0] / share
    np.testing.assert_allclose([b.mean_predicted for b in filled], mean, rtol=1e-12)
    np.testing.assert_allclose([b.fraction_positive for b in filled], frac, rtol=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_means_across_blocks(weighted: bool) -> None:
    p, y, w = _batch(5, weighted=weighted)
    p[:3] = [0.0, 1.0, 1e-17]  # the log loss clips
    q = np.clip(p, 1e-15, 1 - 1e-15)
    assert brier_score(p, y, w) == pytest.approx(np.average((p - y) ** 2, weights=w), rel=1e-13)
    loss = -np.average(y * np.log(q) + (1 - y) * np.log1p(-q), weights=w)
    assert log_loss(p, y, w) == pytest.approx(loss, rel=1e-13)
    assert weighted_mean(y, w) == pytest.approx(np.average(y, weights=w), rel=1e-13)


@pytest.mark.parametrize("weights", ["uniform", "varied"])
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_a_report_allocates_a_few_batch_sized_arrays(weights: str, strategy: str) -> None:
    """A report on a decoded batch (int64 labels, uniform weights as a broadcast) allocates
    at most about 11 float arrays of the batch's size at its peak: the calibration slope's
    Newton solver holds its logits and six working arrays (the binned measures alone take
    about 2.5)."""
    n = 10**6
    rng = np.random.default_rng(6)
    p = rng.beta(0.8, 1.3, n)
    labels = (rng.random(n) < p).astype(np.int64)
    w = np.broadcast_to(1.0, (n,)) if weights == "uniform" else rng.uniform(0.1, 3.0, n)
    tracemalloc.start()
    try:
        reliability_report(p, labels, w, n_bins=10, strategy=strategy)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 12 * 8 * n


@dataclass
class _CountingBudget(Budget):
    """A job's budget that counts its checkpoints and runs out at the ``runs_out_at``-th."""

    runs_out_at: int = 0  # 0: never
    checks: int = 0

    def check(self) -> None:
        self.checks += 1
        if self.checks == self.runs_out_at:
            raise Abandoned("the job ran past its budget")


def _in_job(budget: Budget, measure: Callable[[], object]) -> None:
    """``measure()`` as a pooled job under ``budget`` would run it (in a context of its own)."""

    def run() -> None:
        enter(budget)
        measure()

    contextvars.copy_context().run(run)


_MEASURES: dict[str, Callable[[Arrays], object]] = {
    "report": lambda b: reliability_report(
        b[0], b[1].astype(np.int64), b[2], n_bins=10, strategy="quantile"
    ),
    "headline": lambda b: headline(b[0], b[1].astype(np.int64), b[2]),
    "multiclass report": lambda b: reliability_report(
        np.column_stack([1.0 - b[0], b[0]]),
        b[1].astype(np.int64),
        b[2],
        n_bins=10,
        strategy="uniform",
    ),
    # nearly all positive: the equal-weight AUC's own loop over the positives spans 3 blocks
    "auc": lambda b: roc_auc(b[0], np.where(np.arange(N) < 1000, 0.0, 1.0), b[2]),
}


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("measure", list(_MEASURES))
def test_a_measure_stops_within_a_block_once_its_job_is_over_budget(
    measure: str, weighted: bool
) -> None:
    """A diagnostics job past its budget, or whose client left, stops within a block of rows:
    every pass over the batch reaches a checkpoint at each of its blocks, and the job stops at
    whichever checkpoint finds the budget spent, the first as well as the last."""
    batch = _batch(7, weighted=weighted)
    compute = functools.partial(_MEASURES[measure], batch)
    complete = _CountingBudget(seconds=60.0)
    _in_job(complete, compute)
    assert complete.checks >= math.ceil(N / BLOCK)
    for runs_out_at in (1, complete.checks):
        with pytest.raises(Abandoned):
            _in_job(_CountingBudget(seconds=60.0, runs_out_at=runs_out_at), compute)
