"""Trimmed calibration: fit on the points nearest the decision boundary, judge on all of them.

Rüping, *Robust Probabilistic Calibration* (section 3.1): the points the classifier is most sure
about have the largest say in a monotone scaling function, so a few far-away outliers can bend
the whole fit. Trimmed calibration keeps only the fraction tau of the points with the smallest
|f - c| (c the decision threshold), fits the plain method on them, and chooses tau in
[tau_min, 1] by the fit's loss over *all* points: on the batch itself (trainset-trimmed) or by
k-fold cross-validation (CV-trimmed). tau = 1 is plain calibration, so it is always a candidate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed
from numpy.typing import NDArray

from app.calibration.base import (
    Calibrator,
    FloatArray,
    JSONValue,
    ParamError,
    StateError,
    check_state_keys,
    choice_param,
    int_param,
    state_float,
    state_floats,
)
from app.calibration.budget import checkpoint, in_context
from app.calibration.crossval import effective_folds, stratified_folds
from app.calibration.metrics import brier_score, log_loss

TRIM_MODES = ("none", "trainset", "cv")
TRIM_LOSSES = ("brier", "log_loss")
TRIM_KEYS = ("trim", "trim_tau_min", "trim_grid", "trim_center", "trim_loss", "trim_folds")
TRIM_STATE_KEYS = ("tau", "center", "radius", "grid_losses")
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
class TrimSpec:
    """The trimming parameters shared by ``platt`` and ``isotonic``.

    Parameters
    ----------
    mode : {"none", "trainset", "cv"}, default "none"
        How tau is chosen: Rüping's trainset-trimmed or CV-trimmed calibration; ``"none"`` fits
        the plain method (the paper found CV best for Platt, trainset best for isotonic).
    tau_min : float in (0, 1], default 0.9
        The smallest kept fraction tried (the paper's value, *Robust Probabilistic
        Calibration* section 3.1); the grid is ``linspace(tau_min, 1, grid)``, just [1] at 1.
    grid : int in 11..101, default 11
        Number of tau values tried.
    center : float or None, default None
        The centre c of |f - c|. ``None``: 0.5 when every (positively weighted) score lies in
        [0, 1], i.e. probabilities, otherwise 0, i.e. margins.
    loss : {"brier", "log_loss"}, default "brier"
        The criterion for tau. The squared loss by default: it is bounded by 1 while the
        cross-entropy is infinite for a confident wrong prediction, which is exactly what the
        trimmed-away outliers receive, so a handful of them would dominate the criterion; and
        in the paper's Table 2 CV-trimmed Platt wins more clearly on MSE than on cross-entropy.
    folds : int in 2..20, default 10
        Folds of the ``"cv"`` criterion (the paper's 10), reduced by
        :func:`~app.calibration.crossval.effective_folds` for a rare class.
    """

    mode: str = "none"
    tau_min: float = 0.9
    grid: int = 11
    center: float | None = None
    loss: str = "brier"
    folds: int = 10

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> TrimSpec:
        """Read the ``trim*`` keys of ``params``; :class:`ParamError` names a bad value."""
        mode = choice_param(params, "trim", TRIM_MODES, "none")
        tau_min = _number_param(params, "trim_tau_min", 0.9)
        if tau_min is None or not 0.0 < tau_min <= 1.0:
            raise ParamError(
                "trim_tau_min", f"must be a number in (0, 1], not {params['trim_tau_min']!r}"
            )
        return cls(
            mode=mode,
            tau_min=tau_min,
            grid=int_param(params, "trim_grid", 11, 101, 11),
            center=_number_param(params, "trim_center", None),
            loss=choice_param(params, "trim_loss", TRIM_LOSSES, "brier"),
            folds=int_param(params, "trim_folds", 2, 20, 10),
        )

    @property
    def params(self) -> dict[str, JSONValue]:
        """The ``trim*`` parameters with their effective values; ``{}`` when ``mode="none"``.

        Untrimmed calibrators list no trim keys, so their params read exactly as before.
        """
        if self.mode == "none":
            return {}
        return {
            "trim": self.mode,
            "trim_tau_min": self.tau_min,
            "trim_grid": self.grid,
            "trim_center": self.center,
            "trim_loss": self.loss,
            "trim_folds": self.folds,
        }

    def taus(self) -> FloatArray:
        """The kept fractions tried, increasing: ``linspace(tau_min, 1, grid)``, [1] at 1."""
        if self.tau_min >= 1.0:
            return np.ones(1)
        return np.linspace(self.tau_min, 1.0, self.grid)


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


def trim_record_from_state(value: object) -> dict[str, JSONValue]:
    """Validate a stored ``"trim"`` record; :class:`StateError` names the bad field."""
    if not isinstance(value, Mapping):
        raise StateError(f"state.trim: must be an object, not {type(value).__name__}")
    check_state_keys(value, TRIM_STATE_KEYS)
    tau, radius = state_float(value, "tau"), state_float(value, "radius")
    if not 0.0 < tau <= 1.0 or radius < 0.0:
        raise StateError("state.trim: tau must be in (0, 1] and radius >= 0")
    return {
        "tau": tau,
        "center": state_float(value, "center"),
        "radius": radius,
        "grid_losses": state_floats(value, "grid_losses").tolist(),
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
        results = Parallel(n_jobs=-1, prefer="threads")(
            delayed(in_context(run))(*job) for job in jobs
        )
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


def trim_state(record: dict[str, JSONValue] | None) -> dict[str, JSONValue]:
    """``{"trim": record}`` to add to a fitted state, ``{}`` for an untrimmed fit."""
    return {} if record is None else {"trim": record}


def read_trim_state(
    state: Mapping[str, object],
) -> tuple[tuple[str, ...], dict[str, JSONValue] | None]:
    """The extra state key (``("trim",)`` or ``()``) and the validated record, if any.

    States without ``"trim"`` (plain fits, artifacts stored before trimming) read as before.
    """
    if not isinstance(state, Mapping) or "trim" not in state:
        return (), None
    return ("trim",), trim_record_from_state(state["trim"])


def _number_param(params: Mapping[str, object], key: str, default: float | None) -> float | None:
    """``params[key]`` (or ``default``): a finite number or ``None``; else :class:`ParamError`."""
    value = params.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ParamError(key, f"must be a finite number, not {value!r}")
    return float(value)
