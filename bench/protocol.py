"""The pieces of the papers' protocol that know nothing about the service: the split, the two
measures and the two baselines of ``bench.quality``.

Niculescu-Mizil & Caruana, *Predicting Good Probabilities With Supervised Learning*
(section 4): train on 4000 rows, calibrate on 1000 other rows, test on the rest. A data set too
small for that gets proportional splits: train ``min(4000, n // 2)``, calibrate
``min(1000, n // 4)``, test the rest, so breast_cancer (569 rows) is split 284 / 142 / 143 and
digits (1797) 898 / 449 / 450.

Baselines:

- ``raw``: a model's own probabilities as they are; margins (boosted stumps and trees, SVM)
  min-max scaled with the *calibration* set's minimum and maximum, as the paper scales SVM
  margins (footnote 2), then clipped to [1e-15, 1 - 1e-15];
- ``sklearn_cv``: what a scikit-learn user would glue together: sigmoid
  (``_SigmoidCalibration``) or ``IsotonicRegression(out_of_bounds="clip")``, whichever has
  the lower 5-fold stratified cross-validated log loss on the calibration set, refitted on all
  of it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from sklearn.calibration import _SigmoidCalibration
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import StratifiedKFold

FloatArray = NDArray[np.float64]
EPS = 1e-15
"""Probabilities are clipped to [EPS, 1 - EPS] before log loss (docs/methods.md, "Measures")."""


def log_loss(labels: FloatArray, probabilities: FloatArray) -> float:
    """Mean binary cross-entropy, probabilities clipped to [EPS, 1 - EPS] (docs/methods.md)."""
    p = np.clip(probabilities, EPS, 1.0 - EPS)
    return float(-np.mean(labels * np.log(p) + (1.0 - labels) * np.log(1.0 - p)))


def brier(labels: FloatArray, probabilities: FloatArray) -> float:
    """Mean squared difference between probability and 0/1 label."""
    return float(np.mean((probabilities - labels) ** 2))


def split(n: int, seed: int) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
    """Shuffled train / calibration / test indices: up to 4000 / up to 1000 / the rest."""
    order = np.random.default_rng(seed).permutation(n)
    n_train, n_calibration = min(4000, n // 2), min(1000, n // 4)
    return (
        order[:n_train],
        order[n_train : n_train + n_calibration],
        order[n_train + n_calibration :],
    )


def raw_probabilities(scores_cal: FloatArray, scores_test: FloatArray, margins: bool) -> FloatArray:
    """Probabilities as they are; margins min-max scaled by the calibration set's range."""
    if not margins:
        return scores_test
    low, high = float(scores_cal.min()), float(scores_cal.max())
    if high == low:  # a constant model says nothing: a coin flip
        return np.full_like(scores_test, 0.5)
    return np.clip((scores_test - low) / (high - low), EPS, 1.0 - EPS)


def sklearn_cv_choice(
    scores_cal: FloatArray, labels_cal: FloatArray, scores_test: FloatArray, seed: int
) -> tuple[str, FloatArray]:
    """Sigmoid or isotonic, by 5-fold stratified CV log loss, refitted on the calibration set."""
    makers = {
        "sigmoid": _SigmoidCalibration,
        "isotonic": lambda: IsotonicRegression(out_of_bounds="clip"),
    }
    out_of_fold = {name: np.empty_like(scores_cal) for name in makers}
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=seed)
    for train, valid in folds.split(scores_cal, labels_cal):
        for name, make in makers.items():
            fitted = make().fit(scores_cal[train], labels_cal[train])
            out_of_fold[name][valid] = fitted.predict(scores_cal[valid])
    # a tie keeps the sigmoid, the simpler of the two
    chosen = min(makers, key=lambda name: log_loss(labels_cal, out_of_fold[name]))
    fitted = makers[chosen]().fit(scores_cal, labels_cal)
    return chosen, np.asarray(fitted.predict(scores_test), dtype=np.float64)
