"""Method ``auto``: choose between Platt scaling and isotonic regression by cross-validation.

*Predicting Good Probabilities With Supervised Learning* (section 6, learning curves) finds
Platt scaling better on small calibration sets and isotonic regression better once there are
enough points; which side of that line a batch falls on is decided on the batch itself, by
k-fold cross-validated log loss.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app.calibration.base import Calibrator, FloatArray, JSONValue, check_param_keys, int_param
from app.calibration.crossval import effective_folds, predict_folds, stratified_folds
from app.calibration.isotonic import IsotonicCalibrator
from app.calibration.metrics import log_loss
from app.calibration.platt import PlattCalibrator

# Simplest first: a tie goes to the earlier candidate.
CANDIDATES: dict[str, Callable[[], Calibrator]] = {
    "platt": lambda: PlattCalibrator.from_params({}),
    "isotonic": lambda: IsotonicCalibrator.from_params({}),
}
TIE_RTOL = 1e-12
METRIC = "log_loss"


@dataclass(frozen=True)
class Selection:
    """The outcome of ``auto``: the chosen candidate, each candidate's CV log loss and OOF."""

    chosen: str
    cv_folds: int
    log_losses: dict[str, float]
    out_of_fold: dict[str, FloatArray]

    def record(self) -> dict[str, JSONValue]:
        """What a version stores as ``selection``."""
        return {
            "chosen": self.chosen,
            "cv_folds": self.cv_folds,
            "metric": METRIC,
            "candidates": {name: {METRIC: loss} for name, loss in self.log_losses.items()},
        }


def auto_params(params: Mapping[str, object]) -> dict[str, JSONValue]:
    """Validate the parameters of ``auto``: ``{"cv": int in 2..20, default 5}``."""
    check_param_keys("auto", params, ("cv",))
    return {"cv": int_param(params, "cv", 2, 20, 5)}


def select_method(
    scores: FloatArray,
    labels: FloatArray,
    sample_weight: FloatArray,
    *,
    cv: int = 5,
    n_jobs: int = 1,
) -> Selection:
    """Score every candidate (default params) by weighted ``cv``-fold log loss; pick the best.

    All candidates see the same folds (:func:`stratified_folds`, k from
    :func:`effective_folds`). A candidate wins only when its loss is lower by more than a
    relative 1e-12; otherwise the earlier, simpler one (Platt) is kept.
    """
    k = effective_folds(labels, cv)
    folds = stratified_folds(labels, k, sample_weight=sample_weight)
    out_of_fold = {
        name: predict_folds(make, scores, labels, sample_weight, folds, n_jobs)
        for name, make in CANDIDATES.items()
    }
    losses = {name: log_loss(p, labels, sample_weight) for name, p in out_of_fold.items()}
    chosen = next(iter(losses))
    for name, loss in losses.items():
        best = losses[chosen]
        if loss < best - TIE_RTOL * max(abs(loss), abs(best)):
            chosen = name
    return Selection(chosen, k, losses, out_of_fold)
