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
from typing import Any

import numpy as np
from joblib import Parallel, delayed
from numpy.typing import NDArray

from app.calibration.base import FloatArray, JSONValue, ParamError, check_param_keys, int_param
from app.calibration.bounds import effective_size
from app.calibration.methods import CAPABILITIES
from app.calibration.multiclass_metrics import is_probability_matrix

LOG_EPS = 1e-15
"""Probabilities are clipped to [eps, 1 - eps] in the log loss, as everywhere else."""
TIE_RTOL = 1e-12
"""Losses this close (relative) are equal, whatever the rule."""


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
    Candidate("isotonic", "isotonic", _LAPLACE),
    Candidate("platt_trim_cv", "platt", {"trim": "cv", **_LAPLACE}),
    Candidate("isotonic_trim_trainset", "isotonic", {"trim": "trainset", **_LAPLACE}),
)
"""Every candidate ``auto`` knows, simplest first: a near-tie goes to the earlier one."""
DEFAULT_CANDIDATES: tuple[str, ...] = ("temperature", "platt", "bostrom", "beta", "isotonic")
"""The candidates tried unless ``params.candidates`` names others (see the README's
benchmark: the trimmed variants cost 10-100x the others and never won on real data)."""
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
            if label not in _BY_LABEL:
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
    chosen, skipped = [], {}
    for candidate in CATALOGUE:
        if candidate.label not in spec.candidates:
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
            "rule": "lowest mean out-of-fold log loss; a tie within 1e-12 goes to the simpler",
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
    """Cross-validate every candidate on ``folds`` and choose the one of lowest log loss.

    ``make(candidate)`` builds an unfitted calibrator; ``labels`` are what it fits on (0.0/1.0
    for a binary batch, class indices for a k-class one). The folds run in joblib threads
    when ``n_jobs != 1``, each fitting every candidate on its training part.
    """
    k = int(folds.max()) + 1
    held_out = [np.flatnonzero(folds == fold) for fold in range(k)]

    def fit_fold(fold: int) -> list[FloatArray]:
        """Every candidate fitted on the fold's training part (copied once for all of them)."""
        train = tuple(
            np.compress(folds != fold, a, axis=0) for a in (scores, labels, sample_weight)
        )
        rows = np.take(scores, held_out[fold], axis=0)
        return [make(candidate).fit(*train).predict(rows) for candidate in candidates]

    if n_jobs == 1:
        predicted = [fit_fold(fold) for fold in range(k)]
    else:
        predicted = Parallel(n_jobs=n_jobs, prefer="threads")(
            delayed(fit_fold)(fold) for fold in range(k)
        )
    out_of_fold = {c.label: np.empty(scores.shape, dtype=np.float64) for c in candidates}
    for rows, per_candidate in zip(held_out, predicted, strict=True):
        for candidate, values in zip(candidates, per_candidate, strict=True):
            out_of_fold[candidate.label][rows] = values
    losses, errors = {}, {}
    for label, p in out_of_fold.items():
        losses[label], errors[label] = mean_and_error(point_log_loss(p, labels), sample_weight)
    chosen = candidates[0]
    for candidate in candidates[1:]:
        loss, best = losses[candidate.label], losses[chosen.label]
        if loss < best - TIE_RTOL * max(abs(loss), abs(best)):
            chosen = candidate
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
