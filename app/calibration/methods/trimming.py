"""Trimmed calibration: fit on the points nearest the decision boundary, judge on all of them.

Rüping, *Robust Probabilistic Calibration* (section 3.1): the points the classifier is most sure
about have the largest say in a monotone scaling function, so a few far-away outliers can bend
the whole fit. Trimmed calibration keeps only the fraction tau of the points with the smallest
|f - c| (c the decision threshold), fits the plain method on them, and chooses tau in
[tau_min, 1] by the fit's loss over *all* points: on the batch itself (trainset-trimmed) or by
k-fold cross-validation (CV-trimmed). tau = 1 is plain calibration, so it is always a candidate.

This module chooses tau (:func:`choose_tau`) and hands the method its kept points
(:func:`trim_batch`); the ``trim*`` parameters and the stored ``"trim"`` record are
:mod:`~app.calibration.methods.trim_spec`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed
from numpy.typing import NDArray

from app.calibration.base import Calibrator, FloatArray, JSONValue
from app.calibration.kernels.budget import checkpoint, in_context
from app.calibration.kernels.crossval import effective_folds, stratified_folds
from app.calibration.measures.metrics import brier_score, log_loss
from app.calibration.methods.trim_spec import TrimSpec

TIE_RTOL = 1e-12  # losses this close count as equal, and the larger tau (less trimming) wins
_LOSSES: dict[str, Callable[[FloatArray, FloatArray, FloatArray], float]] = {
    "brier": brier_score,
    "log_loss": log_loss,
}
_FLOAT_MAX = float(np.finfo(np.float64).max)
PARALLEL_MIN_SAMPLES = 100_000
"""Batches at least this large run their tau x fold trial fits in threads."""

FitPredict = Callable[[NDArray[np.intp], FloatArray], FloatArray]
"""fit_predict(train, eval_scores): fit the plain method on the points ``train``, predict."""


@dataclass(frozen=True)
class TrimResult:
    """The chosen kept fraction and the kept points (indices into the batch)."""

    tau: float
    center: float
    radius: float
    grid_losses: tuple[float, ...]
    kept: NDArray[np.intp]

    def record(self) -> dict[str, JSONValue]:
        """What the fitted state stores under ``"trim"`` (everything but ``kept``)."""
        return {
            "tau": self.tau,
            "center": self.center,
            "radius": self.radius,
            "grid_losses": list(self.grid_losses),
        }


def default_center(scores: FloatArray) -> float:
    """0.5 when every score lies in [0, 1] (probabilities), else 0 (margins)."""
    return 0.5 if bool(np.all((scores >= 0.0) & (scores <= 1.0))) else 0.0


def kept_count(tau: float, n: int) -> int:
    """ceil(tau n), at least 1; tau n is rounded to 1e-9 first so linspace's last-bit noise
    (0.9 * 100 = 90.00000000000001) does not keep an extra point."""
    return max(1, min(n, math.ceil(round(tau * n, 9))))


def trim_order(scores: FloatArray, center: float) -> NDArray[np.intp]:
    """Indices of ``scores`` by increasing |f - c|; ties keep input order (stable sort).

    The first ceil(tau n) of them are the points trimmed calibration keeps.
    """
    with np.errstate(over="ignore"):  # |1e308 - -1| is inf: still sorts last
        distance = np.abs(scores - center)
    order: NDArray[np.intp] = np.argsort(distance, kind="stable")
    return order


def choose_tau(
    fit_predict: FitPredict,
    scores: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    spec: TrimSpec,
) -> TrimResult:
    """Choose tau on the grid by the mean weighted loss over all points; keep ceil(tau n).

    *Robust Probabilistic Calibration*, section 3.1. Only points of positive weight take part
    (n counts them), so zero-weight points never change what is kept or fitted.
    ``"trainset"``: fit on the kept points, loss over all n. ``"cv"``: stratified folds; in
    each, trim and fit the training part (same centre), loss over the whole held-out fold,
    pooled over the folds. The lowest loss wins; near-ties (relative 1e-12) go to the larger
    tau. ``kept`` is the chosen tau's kept part of the whole batch, for the final refit.
    """
    positive = np.flatnonzero(weights > 0)
    f, y, w = scores[positive], labels[positive], weights[positive]
    center = default_center(f) if spec.center is None else spec.center
    taus = spec.taus()
    loss = _LOSSES[spec.loss]
    order = positive[trim_order(f, center)]  # indices into the whole batch
    # cv needs two points to split; on a single one every tau keeps that point anyway
    cross = spec.mode == "cv" and f.size >= 2
    folds = (
        stratified_folds(y, effective_folds(y, spec.folds))
        if cross
        else np.zeros(f.size, dtype=np.intp)
    )
    # Two sorts serve every fold and tau: a fold's trim order is the batch's with the held-out
    # points left out (a stable sort filtered keeps its order), and each trial fit gets its
    # kept points in score order, which makes the fit's own sort nearly free.
    fold_of = np.full(scores.size, -1, dtype=np.intp)
    fold_of[positive] = folds
    by_score = positive[np.argsort(f, kind="stable")]
    n_folds = int(folds.max()) + 1
    # one job per fold (cv), or per kept count (trainset: a single "fold" of every point)
    jobs: list[tuple[int, int | None]] = (
        [(fold, None) for fold in range(n_folds)]
        if cross
        else [(0, m) for m in dict.fromkeys(kept_count(float(tau), f.size) for tau in taus)]
    )

    def run(fold: int, only: int | None) -> list[tuple[int, NDArray[np.bool_], FloatArray]]:
        """Fit and predict the fold's held-out part for each kept count (``only``: one)."""
        held = folds == fold
        ranked = order[fold_of[order] != fold] if cross else order
        train_by_score = by_score[fold_of[by_score] != fold] if cross else by_score
        rank = np.empty(scores.size, dtype=np.intp)  # position in the fold's trim order
        rank[ranked] = np.arange(ranked.size)
        train_rank = rank[train_by_score]
        # small n: neighbouring taus keep the same points, fitted once
        wanted = dict.fromkeys(kept_count(float(tau), ranked.size) for tau in taus)
        fitted = []
        for m in wanted:
            if only is None or m == only:
                checkpoint()  # each kept count is a fit: the job may be over its budget
                kept = np.compress(train_rank < m, train_by_score)
                fitted.append((m, held, fit_predict(kept, f[held])))
        return fitted

    if f.size >= PARALLEL_MIN_SAMPLES and len(jobs) > 1:
        # numpy and scipy release the GIL in the sorts and array passes that dominate a fit
        in_job = in_context(run)  # here: joblib may draw the tasks from its own thread
        results = Parallel(n_jobs=-1, prefer="threads")(delayed(in_job)(*job) for job in jobs)
    else:
        results = [run(*job) for job in jobs]
    out = np.empty((taus.size, f.size))  # every tau's predictions, in `positive` order
    for fold_results in results:
        for m, held, values in fold_results:
            n_train = f.size - int(np.count_nonzero(held)) if cross else f.size
            for t, tau in enumerate(taus):
                if kept_count(float(tau), n_train) == m:
                    out[t, held] = values
    losses = np.array([loss(p, y, w) for p in out])
    best = float(losses.min())
    ties = losses <= best + TIE_RTOL * abs(best)
    chosen = int(np.flatnonzero(ties)[-1])
    kept = order[: kept_count(float(taus[chosen]), f.size)]
    with np.errstate(over="ignore"):
        radius = min(float(np.max(np.abs(scores[kept] - center))), _FLOAT_MAX)
    return TrimResult(float(taus[chosen]), center, radius, tuple(losses.tolist()), kept)


def trim_batch(
    make_plain: Callable[[], Calibrator],
    scores: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    spec: TrimSpec,
) -> tuple[FloatArray, FloatArray, FloatArray, dict[str, JSONValue] | None]:
    """The part of the batch to fit on and the ``"trim"`` record (``None`` when not trimming).

    ``make_plain`` builds the untrimmed calibrator whose own ``fit`` does every trial fit.
    With ``spec.mode == "none"`` the batch comes back unchanged; otherwise tau is chosen by
    :func:`choose_tau` and its kept points are returned, in input order.
    """
    if spec.mode == "none":
        return scores, labels, weights, None

    def fit_predict(train: NDArray[np.intp], eval_scores: FloatArray) -> FloatArray:
        return make_plain().fit(scores[train], labels[train], weights[train]).predict(eval_scores)

    result = choose_tau(fit_predict, scores, labels, weights, spec)
    kept = np.sort(result.kept)
    return scores[kept], labels[kept], weights[kept], result.record()
