"""Stratified k-fold cross-validation: out-of-sample predictions on the fitting batch.

*Obtaining Calibrated Probabilities from Boosting* and *Predicting Good Probabilities* both warn
that a calibrator judged on the points it was fitted to looks better than it is; every
diagnostic stored with a version is therefore computed on out-of-fold predictions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
from joblib import Parallel, delayed
from numpy.typing import NDArray

from app.calibration.base import CalibrationError, FloatArray
from app.calibration.kernels.budget import checkpoint, in_context


class _FoldCalibrator(Protocol):
    """What cross-validation needs of a calibrator, binary or multiclass."""

    def fit(self, scores: FloatArray, labels: Any, sample_weight: FloatArray) -> Any: ...
    def predict(self, scores: FloatArray) -> FloatArray: ...


def effective_folds(labels: FloatArray, n_folds: int) -> int:
    """The number of folds used: ``n_folds``, reduced to the smaller class's count, at least 2.

    With fewer points of a class than folds, some folds would hold none of it, so k drops to
    that class's count. It never drops below 2: a class with a single point gets k = 2, that
    point lands in one fold, and the calibrator predicting that fold is fitted on the other
    class alone (every method fits a single class; see :class:`Calibrator`).
    """
    if n_folds < 2:
        raise CalibrationError(f"must be at least 2, not {n_folds}", loc=("n_folds",))
    n_pos = int(np.count_nonzero(labels))
    smaller = min(n_pos, labels.size - n_pos)
    return max(2, min(n_folds, smaller))


def stratified_folds(
    labels: FloatArray,
    n_folds: int,
    seed: int = 0,
    *,
    sample_weight: FloatArray | None = None,
) -> NDArray[np.intp]:
    """A fold index in 0..n_folds-1 per sample, stratified by class; deterministic in ``seed``.

    The samples are shuffled (by ``seed``), grouped by class and dealt round-robin into the
    folds, so each class splits as evenly as it can and fold sizes differ by at most one.
    Given ``sample_weight``, the groups are (positive weight, class): the points of positive
    weight are dealt one after another, so any two of them land in different folds and every
    training part keeps some weight.
    """
    return stratified_class_folds(
        (labels > 0.5).astype(np.int64), n_folds, seed, sample_weight=sample_weight
    )


def out_of_fold_predictions(
    make: Callable[[], _FoldCalibrator],
    scores: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    n_folds: int,
    n_jobs: int = 1,
) -> FloatArray:
    """Predict every point with a calibrator (from ``make``) fitted without that point's fold.

    Uses :func:`effective_folds` folds from :func:`stratified_folds` (seed 0); with
    ``n_jobs != 1`` the folds are fitted in threads (numpy and scipy release the GIL).
    """
    k = effective_folds(labels, n_folds)
    folds = stratified_folds(labels, k, sample_weight=weights)
    return predict_folds(make, scores, labels, weights, folds, n_jobs)


def predict_folds(
    make: Callable[[], _FoldCalibrator],
    scores: FloatArray,
    labels: NDArray[Any],
    weights: FloatArray,
    folds: NDArray[np.intp],
    n_jobs: int = 1,
) -> FloatArray:
    """Out-of-fold predictions for given fold indices (see :func:`out_of_fold_predictions`):
    a vector for binary calibrators, n x k for multiclass ones (scores n x k, labels 0..k-1)."""
    return cross_validate([make], scores, labels, weights, folds, n_jobs)[0]


def cross_validate(
    makers: Sequence[Callable[[], _FoldCalibrator]],
    scores: FloatArray,
    labels: NDArray[Any],
    weights: FloatArray,
    folds: NDArray[np.intp],
    n_jobs: int = 1,
) -> list[FloatArray]:
    """The out-of-fold predictions of each calibrator that ``makers`` build, on shared folds.

    Each fold's training part is copied once and every calibrator is fitted on it; the folds
    run in joblib threads when ``n_jobs != 1`` (numpy and scipy release the GIL).
    """
    k = check_training_weight(weights, folds)
    held_out = [np.flatnonzero(folds == fold) for fold in range(k)]

    def fit_fold(fold: int) -> list[FloatArray]:
        train = tuple(np.compress(folds != fold, a, axis=0) for a in (scores, labels, weights))
        rows = np.take(scores, held_out[fold], axis=0)
        predicted: list[FloatArray] = []
        for make in makers:
            checkpoint()  # the job may be over its budget, or its client gone
            calibrator = make()
            calibrator.fit(*train)
            predicted.append(calibrator.predict(rows))
        return predicted

    if n_jobs == 1:
        per_fold = [fit_fold(fold) for fold in range(k)]
    else:
        in_job = in_context(fit_fold)  # here: joblib may draw the tasks from its own thread
        per_fold = Parallel(n_jobs=n_jobs, prefer="threads")(
            delayed(in_job)(fold) for fold in range(k)
        )
    out = [np.empty(scores.shape, dtype=np.float64) for _ in makers]
    for rows, predicted in zip(held_out, per_fold, strict=True):
        for values, fold_values in zip(out, predicted, strict=True):
            values[rows] = fold_values
    return out


def check_training_weight(weights: FloatArray, folds: NDArray[np.intp]) -> int:
    """The number of folds, once every fold's training part is known to hold positive weight
    (else :class:`CalibrationError`: no calibrator can be fitted on weight 0).

    The points of positive weight are counted, not their weights summed: the total minus a
    fold's weight rounds a training part of tiny weights to 0 when the fold holds a large one
    (1 + 1e-320 - 1 is 0), yet the calibrators fit relative weights, tiny ones included.
    """
    k = int(folds.max()) + 1
    positive = np.compress(weights > 0, folds)
    outside = positive.size - np.bincount(positive, minlength=k)
    if np.any(outside == 0):
        raise CalibrationError(
            "cross-validation needs positive weight outside every fold; "
            "give at least two points a positive weight",
            loc=("sample_weight",),
        )
    return k


def effective_class_folds(labels: NDArray[np.int64], n_folds: int) -> int:
    """:func:`effective_folds` for integer class labels: at most the rarest present class's count.

    Classes absent from ``labels`` do not count; a class with a single point still gives 2.
    """
    if n_folds < 2:
        raise CalibrationError(f"must be at least 2, not {n_folds}", loc=("n_folds",))
    counts = np.bincount(labels)
    return max(2, min(n_folds, int(counts[counts > 0].min())))


def stratified_class_folds(
    labels: NDArray[np.int64],
    n_folds: int,
    seed: int = 0,
    *,
    sample_weight: FloatArray | None = None,
) -> NDArray[np.intp]:
    """:func:`stratified_folds` for integer class labels 0..k-1 (any number of classes).

    The same dealing: shuffled by ``seed``, grouped by (positive weight, class), dealt
    round-robin, so each class splits as evenly as it can and fold sizes differ by at most one.
    """
    n = labels.size
    if not 2 <= n_folds <= n:
        raise CalibrationError(
            f"must be in 2..{n} for {n} samples, not {n_folds}", loc=("n_folds",)
        )
    stratum = labels.astype(np.intp)
    if sample_weight is not None:
        stratum = stratum + (int(stratum.max()) + 1) * (sample_weight > 0)
    if int(stratum.max()) < 1 << 15:
        stratum = stratum.astype(np.int16)  # numpy's stable sort of 16-bit keys is a radix sort
    shuffled = np.random.default_rng(seed).permutation(n)
    dealt = shuffled[np.argsort(stratum[shuffled], kind="stable")]
    folds = np.empty(n, dtype=np.intp)
    folds[dealt] = np.arange(n) % n_folds
    return folds


def fold_runs(order: NDArray[np.intp] | None, folds: NDArray[np.intp]) -> NDArray[np.intp] | None:
    """The rows fold by fold, each fold's in score order (``order``, the scores' argsort, and
    ``folds`` in that order): a monotone calibrator's out-of-fold predictions in these rows
    are k sorted runs, which a stable sort (timsort) merges in a few passes instead of sorting
    them afresh (the AUC's sorts: :func:`~app.calibration.measures.auc.roc_auc_checked`). For
    any other method only that speed is lost. None without an order."""
    if order is None:
        return None
    by_fold = np.argsort(folds.astype(np.int16), kind="stable")  # a radix sort of 16-bit keys
    runs: NDArray[np.intp] = order[by_fold]
    return runs
