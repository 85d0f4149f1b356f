"""Method ``auto``: choose a calibration method by cross-validated log loss, for any batch.

*Predicting Good Probabilities With Supervised Learning* (section 6, learning curves) finds
Platt scaling better on small calibration sets and isotonic regression better once there are
enough points; which side of that line a batch falls on is decided on the batch itself. One
selector serves binary and k-class batches: every eligible candidate is cross-validated on
the same stratified folds, scored by its mean out-of-fold log loss with a standard error,
and the winner is refitted on the whole batch by the caller.

Every candidate is fitted with bounded outputs (:mod:`app.calibration.kernels.bounds`): measured on
real classifiers (``make bench-quality``), candidates that answer exactly 0 or 1 win a
cross-validation of a few hundred points by luck and then lose heavily on new data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import (
    FloatArray,
    JSONValue,
)
from app.calibration.kernels.bounds import effective_size
from app.calibration.kernels.crossval import cross_validate
from app.calibration.kernels.weights import weighted_mean
from app.calibration.methods.candidates import Candidate

LOG_EPS = 1e-15
"""Probabilities are clipped to [eps, 1 - eps] in the log loss, as everywhere else."""
TIE_RTOL = 1e-12
"""Losses this close (relative) are equal, whatever the rule."""
TIE_SE = 0.5
"""A candidate must beat a simpler one by more than this many standard errors of their paired
per-point difference in out-of-fold log loss. Measured: on 100-point batches whose truth is a
sigmoid, Platt is chosen 19 times in 20 (15 with a plain minimum) and the test regret halves
(0.0037 to 0.0022 nats); on the real-data benchmark the mean test log loss moves by 0.0001
(0.2864 to 0.2865) and the worst case against Platt stays +0.010. A whole standard error cost
0.0003 there, and two 0.0024."""


@dataclass(frozen=True)
class Selection:
    """The outcome of ``auto``: the chosen candidate and every candidate's CV record."""

    chosen: Candidate
    cv_folds: int
    candidates: tuple[Candidate, ...]
    log_losses: dict[str, float]
    standard_errors: dict[str, float]
    excess: dict[str, tuple[float, float]]
    """Each candidate's mean paired excess over the lowest loss, and its standard error."""
    out_of_fold: dict[str, FloatArray]
    skipped: dict[str, str]

    def record(self) -> dict[str, JSONValue]:
        """What a version stores as ``selection``."""
        return {
            "chosen": self.chosen.label,
            "cv_folds": self.cv_folds,
            "metric": "log_loss",
            "rule": f"the simplest candidate within {TIE_SE:g} standard error (paired, per "
            "point) of the lowest mean out-of-fold log loss",
            "candidates": {
                c.label: {
                    "log_loss": self.log_losses[c.label],
                    "log_loss_se": self.standard_errors[c.label],
                    "excess": self.excess[c.label][0],
                    "excess_se": self.excess[c.label][1],
                    "method": c.method,
                    "params": dict(c.params),
                }
                for c in self.candidates
            },
            **({"skipped": dict(self.skipped)} if self.skipped else {}),
        }


def select(
    candidates: Sequence[Candidate],
    make: Callable[[Candidate], Any],
    scores: FloatArray,
    labels: NDArray[Any],
    sample_weight: FloatArray,
    folds: NDArray[np.intp],
    *,
    skipped: Mapping[str, str] | None = None,
    n_jobs: int = 1,
) -> Selection:
    """Cross-validate every candidate on ``folds``; choose by log loss with a near-tie margin.

    The chosen candidate is the simplest (earliest) whose mean out-of-fold log loss exceeds
    the lowest by at most :data:`TIE_SE` standard errors of their paired per-point difference.

    ``make(candidate)`` builds an unfitted calibrator; ``labels`` are what it fits on (0.0/1.0
    for a binary batch, class indices for a k-class one). The folds run in joblib threads
    when ``n_jobs != 1``, each fitting every candidate on its training part.
    """
    makers = [partial(make, candidate) for candidate in candidates]
    predictions = cross_validate(makers, scores, labels, sample_weight, folds, n_jobs)
    out_of_fold = {c.label: p for c, p in zip(candidates, predictions, strict=True)}
    k = int(folds.max()) + 1
    point_losses = {label: point_log_loss(p, labels) for label, p in out_of_fold.items()}
    losses, errors = {}, {}
    for label, values in point_losses.items():
        losses[label], errors[label] = mean_and_error(values, sample_weight)
    best = min(candidates, key=lambda c: losses[c.label])  # the first of equal minima
    excess = {
        c.label: mean_and_error(point_losses[c.label] - point_losses[best.label], sample_weight)
        for c in candidates
    }
    margin = TIE_RTOL * abs(losses[best.label])
    chosen = next(  # simplest first: the first within the margin of the best (at least best)
        c for c in candidates if excess[c.label][0] <= TIE_SE * excess[c.label][1] + margin
    )
    return Selection(
        chosen, k, tuple(candidates), losses, errors, excess, out_of_fold, dict(skipped or {})
    )


def point_log_loss(p: FloatArray, labels: NDArray[Any]) -> FloatArray:
    """-log of the probability given to each point's label (clipped to [eps, 1 - eps]).

    ``p`` is a vector of P(label 1) for a binary batch (labels 0/1), or an n x k matrix
    (labels 0..k-1).
    """
    if p.ndim == 1:
        given = np.where(labels == 1, p, 1.0 - p)
    else:
        given = p[np.arange(labels.size), labels.astype(np.intp)]
    loss: FloatArray = -np.log(np.clip(given, LOG_EPS, 1.0 - LOG_EPS))
    return loss


def mean_and_error(values: FloatArray, weights: FloatArray) -> tuple[float, float]:
    """The weighted mean of ``values`` and its standard error, sqrt(var_w / (n_eff - 1)), with
    n_eff Kish's effective size (the usual s / sqrt(n) for equal weights); on relative weights
    (:func:`~app.calibration.kernels.weights.relative_weights`), so both are the same for weights
    times any constant."""
    mean = weighted_mean(values, weights)
    variance = weighted_mean((values - mean) ** 2, weights)
    return mean, float(np.sqrt(variance / max(effective_size(weights) - 1.0, 1.0)))
