"""A binary version's fitting scores, kept in a kilobyte: the bins that traffic's raw scores
are counted in, and what PSI and KS compare those counts with.

The bins are cut at the batch's percentiles (:data:`LEVELS`; fewer when ties merge them),
left-closed, [e_{j-1}, e_j). The population stability index compares shares over the
batch's deciles (:data:`PSI_BINS`), whose edges are percentiles too (level i / 10 is the
same double as 10 i / 100), so its counts are sums of the percentile bins' and the PSI is the
rows' own. The Kolmogorov-Smirnov statistic is read at the percentile edges only: sup over
j of |F_batch(e_j-) - F_traffic(e_j-)|, which is at most the rows' statistic, and below it
by at most the largest share of the batch and the traffic within one bin (about 1/100 plus
the traffic's share there; the monitoring docs give measured figures).

A weighted batch (a weighted fit, an adjusted version's new class shares) takes the
inverted-CDF quantiles of its weights, as the rows' PSI does.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray

PSI_BINS = 10
PSI_FLOOR = 1e-4
"""Bin shares are floored at this before the logarithm (an empty bin would be infinite)."""
LEVELS = 100
"""The batch's quantiles that cut the score bins."""


class ScoreReference:
    """The score bins of one version's fitting batch and the batch's place in them:
    ``edges`` (the percentiles), ``below`` (the batch's share under each edge), the PSI's
    decile edges ``psi_inner`` and the batch's floored share in each, ``expected``; and its
    class shares, weighted (``priors``: the training priors of label shift)."""

    def __init__(
        self,
        edges: FloatArray,
        below: FloatArray,
        psi_inner: FloatArray,
        expected: FloatArray,
        priors: FloatArray,
    ) -> None:
        self.edges, self.below = edges, below
        self.psi_inner, self.expected = psi_inner, expected
        self.priors = priors
        # the decile of each score bin: of its lower edge (a decile edge is a score edge)
        lower = np.concatenate([[-np.inf], edges])
        self.decile = np.searchsorted(psi_inner, lower, side="right")

    @classmethod
    def of_batch(
        cls, scores: FloatArray, labels: NDArray[np.int64], weights: FloatArray | None = None
    ) -> ScoreReference:
        """The reference of a binary fitting batch's scores (at least one), labels and
        weights."""
        labels = np.asarray(labels, dtype=np.int64)
        scores = np.asarray(scores, dtype=np.float64)
        if weights is not None and np.all(weights == weights[0]):
            weights = None  # equal weights: the plain batch
        deciles = np.arange(1, PSI_BINS) / PSI_BINS
        levels = np.arange(1, LEVELS) / LEVELS
        if weights is None:
            psi_inner = np.unique(np.quantile(scores, deciles))
            edges = np.unique(np.quantile(scores, levels))
            w = np.full(scores.size, 1.0 / scores.size)
        else:
            w = np.asarray(weights, dtype=np.float64) / weights.sum()
            psi_inner = np.unique(np.quantile(scores, deciles, weights=w, method="inverted_cdf"))
            edges = np.unique(np.quantile(scores, levels, weights=w, method="inverted_cdf"))
        order = np.argsort(scores, kind="stable")
        cumulative = np.concatenate([[0.0], np.cumsum(w[order])])
        below = cumulative[np.searchsorted(scores[order], edges, side="left")]
        which = np.searchsorted(psi_inner, scores, side="right")
        shares = np.bincount(which, w, minlength=psi_inner.size + 1)
        priors = np.bincount(labels, w, minlength=2)[:2].astype(np.float64)
        return cls(edges, np.minimum(below, 1.0), psi_inner, np.maximum(shares, PSI_FLOOR), priors)

    @property
    def bins(self) -> int:
        """How many score bins: one more than the edges."""
        return int(self.edges.size + 1)

    def bin_of(self, scores: FloatArray) -> NDArray[np.intp]:
        """The score bin of each raw score."""
        return np.searchsorted(self.edges, scores, side="right")

    def shift(self, counts: NDArray[np.int64]) -> dict[str, float] | None:
        """``psi`` and ``ks`` of traffic whose raw scores fell ``counts`` in the bins; None
        without traffic."""
        n = int(counts.sum())
        if n == 0:
            return None
        deciles = np.bincount(self.decile, counts, minlength=self.psi_inner.size + 1)
        a = np.maximum(deciles / n, PSI_FLOOR)
        e = self.expected
        traffic_below = np.cumsum(counts)[:-1] / n  # under each edge
        ks = float(np.max(np.abs(traffic_below - self.below), initial=0.0))
        return {"psi": float(np.sum((a - e) * np.log(a / e))), "ks": ks}

    def to_bytes(self) -> bytes:
        sizes = np.array([self.edges.size, self.psi_inner.size], dtype="<u4")
        values = np.concatenate(
            [self.edges, self.below, self.psi_inner, self.expected, self.priors]
        )
        return sizes.tobytes() + values.astype("<f8").tobytes()

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> ScoreReference:
        m, k = np.frombuffer(data, dtype="<u4", count=2).tolist()
        values = np.frombuffer(data, dtype="<f8", offset=8).astype(np.float64)
        edges, below = values[:m], values[m : 2 * m]
        psi_inner = values[2 * m : 2 * m + k]
        expected, priors = values[2 * m + k : 2 * m + 2 * k + 1], values[2 * m + 2 * k + 1 :]
        return cls(edges, below, psi_inner, expected, priors)
