"""Method ``auto``: choose a calibration method by cross-validated log loss on the batch.

*Predicting Good Probabilities With Supervised Learning* (section 6, learning curves) finds
Platt scaling better on small calibration sets and isotonic regression better once there are
enough points; which side of that line a batch falls on is decided on the batch itself, by
k-fold cross-validated log loss over the candidates of :data:`CANDIDATES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from joblib import Parallel, delayed

from app.calibration.base import (
    CalibrationError,
    Calibrator,
    FloatArray,
    JSONValue,
    ParamError,
    check_param_keys,
    int_param,
)
from app.calibration.beta import BetaCalibrator
from app.calibration.binning import HistogramBinning
from app.calibration.crossval import effective_folds, stratified_folds
from app.calibration.isotonic import IsotonicCalibrator
from app.calibration.metrics import log_loss
from app.calibration.platt import PlattCalibrator


class Candidate(NamedTuple):
    """One entry of ``auto``'s table: a label for the record, a method and its params."""

    label: str
    method: str
    params: dict[str, JSONValue]


# Simplest first: a tie goes to the earlier candidate. "beta" is a candidate only when every
# score lies in (0, 1). The trimmed variants (Rüping's trimming, a parameter of platt and
# isotonic) are left out for as long as their method rejects the ``trim`` parameter.
CANDIDATES: tuple[Candidate, ...] = (
    Candidate("platt", "platt", {}),
    Candidate("beta", "beta", {}),
    Candidate("histogram_binning", "histogram_binning", {}),
    Candidate("isotonic", "isotonic", {}),
    Candidate("platt_trim_cv", "platt", {"trim": "cv"}),
    Candidate("isotonic_trim_trainset", "isotonic", {"trim": "trainset"}),
)
_CANDIDATE_CLASSES: dict[
    str, type[PlattCalibrator | BetaCalibrator | HistogramBinning | IsotonicCalibrator]
] = {
    cls.method: cls
    for cls in (PlattCalibrator, BetaCalibrator, HistogramBinning, IsotonicCalibrator)
}
TIE_RTOL = 1e-12
METRIC = "log_loss"


def make_candidate(candidate: Candidate) -> Calibrator:
    """An unfitted calibrator for ``candidate``; :class:`ParamError` if its params are invalid."""
    return _CANDIDATE_CLASSES[candidate.method].from_params(candidate.params)


@dataclass(frozen=True)
class Selection:
    """The outcome of ``auto``: the chosen candidate, each candidate's CV log loss and OOF."""

    chosen: Candidate
    cv_folds: int
    candidates: tuple[Candidate, ...]
    log_losses: dict[str, float]
    out_of_fold: dict[str, FloatArray]

    def record(self) -> dict[str, JSONValue]:
        """What a version stores as ``selection``."""
        return {
            "chosen": self.chosen.label,
            "cv_folds": self.cv_folds,
            "metric": METRIC,
            "candidates": {
                c.label: {METRIC: self.log_losses[c.label], "method": c.method, "params": c.params}
                for c in self.candidates
            },
        }


def auto_params(params: Mapping[str, object]) -> dict[str, JSONValue]:
    """Validate the parameters of ``auto``: ``{"cv": int in 2..20, default 5}``."""
    check_param_keys("auto", params, ("cv",))
    return {"cv": int_param(params, "cv", 2, 20, 5)}


def eligible_candidates(scores: FloatArray) -> tuple[Candidate, ...]:
    """The candidates for this batch: beta only for scores in (0, 1), and only those whose
    method accepts their params (the trimmed variants need the ``trim`` parameter)."""
    in_unit_interval = bool(np.all((scores > 0.0) & (scores < 1.0)))
    eligible = []
    for candidate in CANDIDATES:
        if candidate.method == "beta" and not in_unit_interval:
            continue
        try:
            make_candidate(candidate)
        except ParamError:
            continue
        eligible.append(candidate)
    return tuple(eligible)


def select_method(
    scores: FloatArray,
    labels: FloatArray,
    sample_weight: FloatArray,
    *,
    cv: int = 5,
    n_jobs: int = 1,
) -> Selection:
    """Score every eligible candidate by weighted ``cv``-fold log loss; pick the best.

    All candidates see the same folds (:func:`stratified_folds`, k from
    :func:`effective_folds`); with ``n_jobs != 1`` the candidate x fold fits run in joblib
    threads. A candidate wins only when its loss is lower by more than a relative 1e-12;
    otherwise the earlier, simpler one is kept.
    """
    candidates = eligible_candidates(scores)
    k = effective_folds(labels, cv)
    folds = stratified_folds(labels, k, sample_weight=sample_weight)
    train_weight = float(sample_weight.sum()) - np.bincount(
        folds, weights=sample_weight, minlength=k
    )
    if np.any(train_weight <= 0):
        raise CalibrationError(
            "sample_weight: cross-validation needs positive weight outside every fold; "
            "give at least two points a positive weight"
        )

    def fit_fold(candidate: Candidate, fold: int) -> FloatArray:
        train = folds != fold
        calibrator = make_candidate(candidate).fit(
            scores[train], labels[train], sample_weight[train]
        )
        return calibrator.predict(scores[~train])

    jobs = [(c, fold) for c in candidates for fold in range(k)]
    if n_jobs == 1:
        predicted = [fit_fold(c, fold) for c, fold in jobs]
    else:
        predicted = Parallel(n_jobs=n_jobs, prefer="threads")(
            delayed(fit_fold)(c, fold) for c, fold in jobs
        )
    out_of_fold = {c.label: np.empty(scores.size, dtype=np.float64) for c in candidates}
    for (c, fold), values in zip(jobs, predicted, strict=True):
        out_of_fold[c.label][folds == fold] = values
    losses = {label: log_loss(p, labels, sample_weight) for label, p in out_of_fold.items()}
    chosen = candidates[0]
    for candidate in candidates:
        loss, best = losses[candidate.label], losses[chosen.label]
        if loss < best - TIE_RTOL * max(abs(loss), abs(best)):
            chosen = candidate
    return Selection(chosen, k, candidates, losses, out_of_fold)
