"""Method ``auto``: choose a calibration method by cross-validated log loss, for any batch.

*Predicting Good Probabilities With Supervised Learning* (section 6, learning curves) finds
Platt scaling better on small calibration sets and isotonic regression better once there are
enough points; which side of that line a batch falls on is decided on the batch itself. One
selector serves binary and k-class batches: every eligible candidate is cross-validated on
the same stratified folds, scored by its mean out-of-fold log loss with a standard error,
and the winner is refitted on the whole batch by the caller.

Every candidate is fitted with bounded outputs (:mod:`app.calibration.bounds`): measured on
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
    ParamError,
    check_param_keys,
    int_param,
)
from app.calibration.bounds import effective_size
from app.calibration.crossval import cross_validate
from app.calibration.methods import CAPABILITIES
from app.calibration.multiclass_metrics import is_probability_matrix
from app.calibration.pooling import is_sorted

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
class Candidate:
    """One entry of ``auto``'s catalogue: a label for the record, a method and its params."""

    label: str
    method: str
    params: dict[str, JSONValue]


_LAPLACE: dict[str, JSONValue] = {"bound": "laplace"}
CATALOGUE: tuple[Candidate, ...] = (
    Candidate("temperature", "temperature", _LAPLACE),
    Candidate("bostrom", "bostrom", _LAPLACE),
    Candidate("platt", "platt", _LAPLACE),
    Candidate("beta", "beta", _LAPLACE),
    Candidate("histogram_binning", "histogram_binning", _LAPLACE),
    Candidate("venn_abers", "venn_abers", {}),
    Candidate("isotonic", "isotonic", _LAPLACE),
    Candidate("venn_abers_cross", "venn_abers", {"mode": "cross"}),
    Candidate("platt_trim_cv", "platt", {"trim": "cv", **_LAPLACE}),
    Candidate("isotonic_trim_trainset", "isotonic", {"trim": "trainset", **_LAPLACE}),
)
"""Every candidate ``auto`` knows, simplest first: a tie goes to the earlier one. Venn-ABERS
never answers 0 or 1 by construction; every other candidate has the Laplace bound."""
DEFAULT_CANDIDATES: tuple[str, ...] = ("temperature", "bostrom", "platt", "beta", "venn_abers")
"""The candidates tried unless ``params.candidates`` names others. Chosen on real data
(``make bench-quality``: 12 data sets x 6 model families x 5 seeds, calibration sets of
142-1000 rows): with platt, beta and venn_abers, ``auto``'s mean test log loss is 0.2864
and no case is worse than Platt's by more than 0.010 nats. Adding bounded isotonic or
histogram binning makes it worse (0.2873 and 0.2880, and 6 and 9 cases more than 0.02 nats
worse than Platt): on a few hundred points they win the cross-validation by luck, where
Venn-ABERS, an isotonic fit that hedges over the test point's label, does not. Cross
Venn-ABERS gained 0.0001 for five times the fit; the trimmed variants cost 10-100x and never
won. k-class batches use the same methods one-vs-rest, beside temperature and bostrom."""
VENN_ABERS_MAX_DISTINCT = 50_000
"""Above this many distinct scores (rows, for a matrix) the default set swaps venn_abers for
bounded isotonic: its exact fit is a sequential sweep (1.75 us per distinct score, 70x an
isotonic fit), and there the two differ by less than 2e-4 nats of test log loss (measured on
naive-Bayes-like scores: -0.0009 at 10^4 points, -0.0003 at 3 x 10^4, -0.0001 at 10^5)."""
_BY_LABEL = {candidate.label: candidate for candidate in CATALOGUE}


@dataclass(frozen=True)
class AutoSpec:
    """The validated parameters of ``auto``."""

    cv: int = 5
    candidates: tuple[str, ...] = DEFAULT_CANDIDATES
    explicit: bool = False
    """Whether ``params.candidates`` named the candidates (then every skip is recorded)."""

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> AutoSpec:
        """``cv``: folds, 2..20 (default 5); ``candidates``: labels of :data:`CATALOGUE`."""
        check_param_keys("auto", params, ("cv", "candidates"))
        cv = int_param(params, "cv", 2, 20, 5)
        explicit = "candidates" in params
        labels = params.get("candidates", list(DEFAULT_CANDIDATES))
        if not isinstance(labels, list) or not labels:
            raise ParamError("candidates", "must be a non-empty list of candidate names")
        for index, label in enumerate(labels):
            if not isinstance(label, str) or label not in _BY_LABEL:
                known = ", ".join(_BY_LABEL)
                raise ParamError(f"candidates[{index}]", f"unknown {label!r}; expected {known}")
        return cls(cv, tuple(dict.fromkeys(labels)), explicit)

    @property
    def params(self) -> dict[str, JSONValue]:
        """Every parameter with its effective value."""
        return {"cv": self.cv, "candidates": list(self.candidates)}


def eligible_candidates(
    spec: AutoSpec, scores: FloatArray
) -> tuple[tuple[Candidate, ...], dict[str, str]]:
    """The candidates of ``spec`` that can take this batch, in catalogue order, and why each
    other one was skipped: it needs probabilities (scores strictly inside (0, 1) for a binary
    method, also one-vs-rest; probability rows for a k-class one) and the batch holds none, or
    it fits no vector (no matrix) of scores, which is recorded only for a candidate named in
    ``params.candidates``: the default set holds both kinds."""
    matrix = scores.ndim == 2
    in_open_interval = bool(np.all((scores > 0.0) & (scores < 1.0)))
    labels = spec.candidates
    skipped = {}
    if not spec.explicit and "venn_abers" in labels:
        distinct = scores.shape[0] if matrix else _count_distinct(scores)
        if distinct > VENN_ABERS_MAX_DISTINCT:
            labels = tuple("isotonic" if label == "venn_abers" else label for label in labels)
            skipped["venn_abers"] = (
                f"{distinct} distinct scores, over {VENN_ABERS_MAX_DISTINCT}: bounded isotonic "
                "instead (as good there, 70x faster to fit)"
            )
    chosen = []
    for candidate in CATALOGUE:
        if candidate.label not in labels:
            continue
        can = CAPABILITIES[candidate.method]
        if (can.matrix == "none") if matrix else not can.vector:
            if spec.explicit:
                skipped[candidate.label] = f"fits no {'matrix' if matrix else 'vector'} of scores"
        elif can.probabilities and not (
            is_probability_matrix(scores) if can.matrix == "native" else in_open_interval
        ):
            skipped[candidate.label] = "needs probabilities"
        else:
            chosen.append(candidate)
    return tuple(chosen), skipped


def _count_distinct(scores: FloatArray) -> int:
    """Distinct values of a vector (one linear pass when sorted, as the fit passes them)."""
    ordered = scores if is_sorted(scores) else np.sort(scores)
    return 1 + int(np.count_nonzero(ordered[1:] != ordered[:-1])) if ordered.size else 0


@dataclass(frozen=True)
class Selection:
    """The outcome of ``auto``: the chosen candidate and every candidate's CV record."""

    chosen: Candidate
    cv_folds: int
    candidates: tuple[Candidate, ...]
    log_losses: dict[str, float]
    standard_errors: dict[str, float]
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
                    "method": c.method,
                    "params": c.params,
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
    chosen = best
    for candidate in candidates:  # simplest first: the first within the margin of the best
        excess, error = mean_and_error(
            point_losses[candidate.label] - point_losses[best.label], sample_weight
        )
        if excess <= TIE_SE * error + TIE_RTOL * abs(losses[best.label]):
            chosen = candidate
            break
    return Selection(chosen, k, tuple(candidates), losses, errors, out_of_fold, dict(skipped or {}))


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
    n_eff Kish's effective size (the usual s / sqrt(n) for equal weights)."""
    total = float(weights.sum())
    mean = float(weights @ values) / total
    variance = float(weights @ (values - mean) ** 2) / total
    return mean, float(np.sqrt(variance / max(effective_size(weights) - 1.0, 1.0)))
