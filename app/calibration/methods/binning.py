"""Histogram binning: equal-frequency bins of the score, each mapped to its rate of positives.

Zadrozny & Elkan (2001), *Obtaining calibrated probability estimates from decision trees and
naive Bayesian classifiers* (the binning method also described in Niculescu-Mizil & Caruana,
*Predicting Good Probabilities With Supervised Learning*): sort the training scores, cut them
into bins of equal (weighted) size, and predict for a score the fraction of positives in its
bin. Nothing forces the bin values to rise with the score, so unlike isotonic regression the
output is NOT guaranteed to be non-decreasing.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import ClassVar, Self

import numpy as np

from app.calibration.base import (
    Capabilities,
    FloatArray,
    JSONValue,
    ParamError,
    StateError,
    check_param_keys,
    check_state_keys,
    choice_param,
    int_param,
    state_floats,
    state_int,
)
from app.calibration.kernels.bounds import BOUND_KEY, OutputBound
from app.calibration.kernels.crossval import effective_folds, predict_folds, stratified_folds
from app.calibration.kernels.knots import Knots
from app.calibration.kernels.pooling import pool_ties
from app.calibration.kernels.weights import relative_weights, unit_weight
from app.calibration.measures.metrics import log_loss

SMOOTHINGS = ("none", "laplace")
CV_GRID = (5, 10, 15, 20, 30, 50)
"""The bin counts ``n_bins: "cv"`` chooses from, by 5-fold cross-validated log loss."""
CV_FOLDS = 5
DEFAULT_BINS = 10
MAX_BINS = 1000


class HistogramBinning:
    """Equal-frequency histogram binning (Zadrozny & Elkan 2001).

    Parameters
    ----------
    n_bins : int in 2..1000 or "cv", default 10
        Bins requested. Bin edges are training scores at the weighted quantiles j/n_bins; tied
        scores never straddle an edge, so a batch with few distinct scores gets fewer (never
        empty) bins. ``"cv"`` picks the count from :data:`CV_GRID` with the lowest weighted
        5-fold cross-validated log loss on the training batch (stratified folds, seed 0; a tie
        goes to the fewer bins; with fewer than 2 points of positive weight, 10).
    smoothing : {"none", "laplace"}, default "none"
        A bin's value: ``"none"`` is pos / n, ``"laplace"`` is (pos + 1) / (n + 2) (Laplace's
        rule of succession, pulling small bins toward 1/2), where n and pos are the bin's
        summed weight and summed weight of positives. So ``"laplace"`` depends on the weights'
        unit (weights of 1e-300 give every bin 1/2), ``"none"`` does not
        (:func:`~app.calibration.kernels.weights.relative_weights`).
    bound : {"none", "laplace"}, default "none"
        ``"laplace"`` clips the outputs into [1 / (n + 2), (n + 1) / (n + 2)]
        (:class:`~app.calibration.kernels.bounds.OutputBound`): without smoothing, a bin holding one
        class otherwise answers exactly 0 or 1. Listed in ``params`` and the state
        (``"bound": [low, high]``) only when bounded.

    Attributes
    ----------
    edges : ndarray
        [lowest training score, inner edges..., highest training score]; a score f falls in
        bin j when edges[j] <= f < edges[j + 1] for the inner edges, scores outside the
        training range fall in the end bins.
    values : ndarray
        One probability per bin (len(edges) - 1 of them).
    bins_requested : int
        ``n_bins`` as given, or the count chosen by cross-validation. The state is
        ``{"edges": [...], "values": [...], "n_bins": bins_requested}``.
    """

    method: ClassVar[str] = "histogram_binning"
    capabilities: ClassVar[Capabilities] = Capabilities(bound=True)

    def __init__(
        self,
        n_bins: int | str = DEFAULT_BINS,
        smoothing: str = "none",
        bound: OutputBound | None = None,
    ) -> None:
        self.n_bins = n_bins
        self.smoothing = smoothing
        self.bound = OutputBound() if bound is None else bound
        self.bins_requested = DEFAULT_BINS if n_bins == "cv" else int(n_bins)
        self.edges: FloatArray = np.zeros(2)
        self.values: FloatArray = np.full(1, 0.5)
        self._inner: tuple[FloatArray, Knots] | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> Self:
        """Validate ``params``; :class:`ParamError` names a bad or unknown key."""
        check_param_keys(cls.method, params, ("n_bins", "smoothing", BOUND_KEY))
        n_bins = params.get("n_bins", DEFAULT_BINS)
        smoothing = choice_param(params, "smoothing", SMOOTHINGS, "none")
        bound = OutputBound.from_params(params)
        if n_bins == "cv":
            return cls("cv", smoothing, bound)
        try:
            return cls(int_param(params, "n_bins", 2, MAX_BINS, DEFAULT_BINS), smoothing, bound)
        except ParamError:
            raise ParamError(
                "n_bins", f"must be an integer in 2..{MAX_BINS} or 'cv', not {n_bins!r}"
            ) from None

    @property
    def params(self) -> dict[str, JSONValue]:
        """Every parameter with its effective value."""
        return {"n_bins": self.n_bins, "smoothing": self.smoothing, **self.bound.params}

    def fit(self, scores: FloatArray, labels: FloatArray, sample_weight: FloatArray) -> Self:
        """Choose the bin count if ``n_bins`` is ``"cv"``, then bin the batch; ``self``."""
        self.bound = self.bound.fitted(sample_weight)
        if self.n_bins == "cv":
            self.bins_requested = _choose_bins(
                self.smoothing, self.bound, scores, labels, sample_weight
            )
        # relative weights (exact), so that subnormal ones keep their digits in the cuts
        w, exponent = relative_weights(sample_weight)
        f, weight, positive = pool_ties(scores, labels, w)
        # weighted equal-frequency cuts: the pooled score at which the weight before it first
        # reaches j/n_bins of the total starts bin j (Zadrozny & Elkan's equal-frequency bins)
        before = np.cumsum(weight) - weight
        quantiles = np.arange(1, self.bins_requested) * (float(weight.sum()) / self.bins_requested)
        starts = np.minimum(np.searchsorted(before, quantiles, side="left"), f.size - 1)
        inner = np.unique(f[starts])
        inner = inner[inner > f[0]]  # the first bin must hold the lowest score
        self.edges = np.concatenate([f[:1], inner, f[-1:]])
        index = np.searchsorted(inner, f, side="right")
        n = np.bincount(index, weights=weight, minlength=inner.size + 1)
        pos = np.bincount(index, weights=positive, minlength=inner.size + 1)
        if self.smoothing == "laplace":
            one = unit_weight(exponent)  # the rule's pseudo-counts are in the caller's units
            self.values = (pos + one) / (n + 2.0 * one)
        else:
            self.values = np.clip(pos / n, 0.0, 1.0)  # every bin holds weight > 0
        return self

    def predict(self, scores: FloatArray) -> FloatArray:
        """The value of each score's bin; scores outside the training range get an end bin."""
        f = np.asarray(scores, dtype=np.float64)
        p: FloatArray = self.values[self._inner_edges().count_at_most(f)]
        return self.bound.apply(p)

    def _inner_edges(self) -> Knots:
        """The inner edges, indexed once per fitted map."""
        inner = self._inner
        if inner is None or inner[0] is not self.edges:
            inner = self._inner = (self.edges, Knots(self.edges[1:-1]))
        return inner[1]

    def state(self) -> dict[str, JSONValue]:
        """``{"edges": [...], "values": [...], "n_bins": int}``."""
        return {
            "edges": self.edges.tolist(),
            "values": self.values.tolist(),
            "n_bins": self.bins_requested,
            **self.bound.state(),
        }

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild a fitted calibrator; :class:`StateError` unless the bins are consistent."""
        calibrator = cls.from_params(params)
        bounded, calibrator.bound = calibrator.bound.read_state(state)
        check_state_keys(state, ("edges", "values", "n_bins", *bounded))
        edges, values = state_floats(state, "edges"), state_floats(state, "values")
        n_bins = state_int(state, "n_bins")
        if edges.size != values.size + 1:
            raise StateError(f"state.values: has {values.size} values for {edges.size} edges")
        if values.size > max(n_bins, 1) or not 2 <= n_bins <= MAX_BINS:
            raise StateError(f"state.n_bins: {n_bins} does not fit {values.size} bins")
        # all but the highest edge strictly increasing; the last bin may hold a single score
        if np.any(edges[1:-1] <= edges[:-2]) or edges[-1] < edges[-2]:
            raise StateError("state.edges: must be increasing")
        if np.any((values < 0.0) | (values > 1.0)):
            raise StateError("state.values: must lie within [0, 1]")
        calibrator.edges, calibrator.values, calibrator.bins_requested = edges, values, n_bins
        return calibrator


def _choose_bins(
    smoothing: str,
    bound: OutputBound,
    scores: FloatArray,
    labels: FloatArray,
    sample_weight: FloatArray,
) -> int:
    """The bin count of :data:`CV_GRID` with the lowest cross-validated log loss (each fold's
    fit bounded by the same rule as the final one)."""
    if np.count_nonzero(sample_weight) < 2:
        return DEFAULT_BINS
    k = effective_folds(labels, CV_FOLDS)
    folds = stratified_folds(labels, k, sample_weight=sample_weight)
    best, best_loss = CV_GRID[0], np.inf
    for n_bins in CV_GRID:
        p = predict_folds(
            partial(HistogramBinning, n_bins, smoothing, bound),
            scores,
            labels,
            sample_weight,
            folds,
        )
        loss = log_loss(p, labels, sample_weight)
        if loss < best_loss:
            best, best_loss = n_bins, loss
    return best
