"""Multiclass batches and how good their probabilities are: Brier, log loss, top-label bins.

A multiclass batch is an n x k score matrix, integer labels in 0..k-1 and optional weights.
The measures generalise :mod:`app.calibration.measures.metrics`: the Brier score is the mean squared
distance to the one-hot vector (Brier 1950, as used in Boström, *Calibrating Random Forests*),
the log loss is scikit-learn's ``log_loss`` with ``labels=range(k)``, and the reliability
diagram is either the top-label one (confidence = row maximum against "the arg max is right")
or one class against the rest. Binning and its statistics are
:mod:`~app.calibration.measures.reliability`'s.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.special import softmax

from app.calibration.base import CalibrationError, FloatArray, JSONValue
from app.calibration.kernels.checks import check_batch, check_probabilities
from app.calibration.kernels.weights import blockwise_mean
from app.calibration.measures.metrics import (
    expected_calibration_error,
    maximum_calibration_error,
    summarize,
)
from app.calibration.measures.reliability import bin_table, check_bin_settings
from app.calibration.measures.report import Report

IntArray = NDArray[np.int64]
ROW_SUM_ATOL = 1e-6
"""How far a row of a probability matrix may sum from 1."""
MAX_CLASSES = 1 << 16
"""The most classes a score matrix may have, on every route (/v1 and /v2): a one-vs-rest
calibrator is one binary calibrator per class, and its ONNX graph one branch per class."""


def check_multiclass_batch(
    scores: object,
    labels: object,
    sample_weight: object = None,
    *,
    scores_field: str = "scores",
) -> tuple[FloatArray, IntArray, FloatArray]:
    """Check a multiclass batch: (n x k float64 scores, int64 labels, float64 weights).

    Raises :class:`CalibrationError` naming the field: ``scores`` must be a finite 2-d matrix
    with n >= 1 rows and k >= 2 columns, ``labels`` integers in 0..k-1 (one per row),
    ``sample_weight`` finite, non-negative with a positive sum (``None``: all ones).
    """
    s = check_score_matrix(scores, scores_field)
    n, k = s.shape
    try:
        raw = np.asarray(labels)
    except (TypeError, ValueError):
        raise CalibrationError("must be an array of integers", loc=("labels",)) from None
    if raw.ndim != 1:
        raise CalibrationError(f"must be a 1-d array, not {raw.ndim}-d", loc=("labels",))
    if raw.size != n:
        raise CalibrationError(
            f"has {raw.size} values for {n} rows of {scores_field}", loc=("labels",)
        )
    if raw.dtype == np.bool_ or raw.dtype.kind not in "iuf":
        raise CalibrationError("must be integer class indices", loc=("labels",))
    # integers need only their range (two reductions); floats must also be whole
    if raw.dtype.kind == "f" or raw.min() < 0 or raw.max() >= k:
        bad = ~np.isin(raw, np.arange(k))  # also catches 1.5, nan and inf
        if bad.any():
            raise CalibrationError(
                f"must be class indices in 0..{k - 1}", loc=("labels", int(np.flatnonzero(bad)[0]))
            )
    y = raw.astype(np.int64, copy=False)
    # the binary check validates the weights; zeros stand in for scores and labels
    zeros = np.zeros(n)
    _, _, w = check_batch(zeros, zeros, sample_weight, scores_field=scores_field)
    return s, y, w


def check_score_matrix(scores: object, field: str = "scores") -> FloatArray:
    """``scores`` as a finite n x k float64 matrix with n >= 1, 2 <= k <= :data:`MAX_CLASSES`
    (else CalibrationError)."""
    try:
        s = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError):
        raise CalibrationError("must be a matrix of numbers", loc=(field,)) from None
    if s.ndim != 2:
        raise CalibrationError(
            f"must be a 2-d matrix (rows x classes), not {s.ndim}-d", loc=(field,)
        )
    if s.shape[0] == 0:
        raise CalibrationError("the batch is empty", loc=(field,))
    if s.shape[1] < 2:
        raise CalibrationError(f"needs at least 2 class columns, not {s.shape[1]}", loc=(field,))
    if s.shape[1] > MAX_CLASSES:
        raise CalibrationError(
            f"has {s.shape[1]} class columns; at most {MAX_CLASSES}", loc=(field,)
        )
    finite = np.isfinite(s)
    if not finite.all():  # the row only then: a reduction along rows is ten times slower
        raise CalibrationError("must be finite", loc=(field, int(np.argmin(finite.all(axis=1)))))
    return s


def probability_rows(scores: FloatArray) -> NDArray[np.bool_]:
    """Per row: all entries in [0, 1] and the row sums to 1 within :data:`ROW_SUM_ATOL`."""
    in_range = ((scores >= 0.0) & (scores <= 1.0)).all(axis=1)
    rows: NDArray[np.bool_] = in_range & (np.abs(scores.sum(axis=1) - 1.0) <= ROW_SUM_ATOL)
    return rows


def is_probability_matrix(scores: FloatArray) -> bool:
    """Whether every row of ``scores`` is a probability vector (see :func:`probability_rows`)."""
    s = np.asarray(scores, dtype=np.float64)
    if s.size and (s.min() < 0.0 or s.max() > 1.0):  # logits, at once: no pass along rows
        return False
    return bool(probability_rows(s).all())


def raw_probabilities(scores: FloatArray) -> FloatArray:
    """The matrix itself when it is a probability matrix, else a stable softmax of its rows.

    Rows that are not probabilities are read as logits (softmax subtracts the row maximum).
    """
    s = check_score_matrix(scores)
    if is_probability_matrix(s):
        return s
    p: FloatArray = softmax(s, axis=1)
    return p


def multiclass_brier(P: FloatArray, y: IntArray, w: FloatArray | None = None) -> float:
    """Weighted mean over rows of the squared distance sum_j (P_ij - [y_i = j])^2."""
    return _multiclass_brier(*_probability_batch(P, y, w))


def multiclass_log_loss(
    P: FloatArray, y: IntArray, w: FloatArray | None = None, eps: float = 1e-15
) -> float:
    """-weighted mean of log P[i, y_i], P clipped to [eps, 1 - eps] first.

    This is ``sklearn.metrics.log_loss(y, P, labels=range(k))`` (which clips at float64's
    machine epsilon and does not renormalise) when ``eps`` is that epsilon.
    """
    return _multiclass_log_loss(*_probability_batch(P, y, w), eps)


def brier_distances(P: FloatArray, y: IntArray) -> FloatArray:
    """Each row's squared distance sum_j (P_ij - [y_i = j])^2 = |P_i|^2 - 2 P[i, y_i] + 1:
    the terms :func:`multiclass_brier` averages."""
    sq = np.einsum("ij,ij->i", P, P)
    d: FloatArray = sq - 2.0 * P[np.arange(y.size), y] + 1.0
    return d


def multiclass_log_losses(P: FloatArray, y: IntArray, eps: float = 1e-15) -> FloatArray:
    """Each row's -log P[i, y_i], P clipped to [eps, 1 - eps] first: the terms
    :func:`multiclass_log_loss` averages."""
    losses: FloatArray = -np.log(np.clip(P[np.arange(y.size), y], eps, 1.0 - eps))
    return losses


def accuracy(P: FloatArray, y: IntArray, w: FloatArray | None = None) -> float:
    """Weighted share of rows whose arg max (the first, on ties) is the label."""
    P, y, w = _probability_batch(P, y, w)
    return _accuracy(np.argmax(P, axis=1), y, w)


def top_label(P: FloatArray, y: IntArray) -> tuple[FloatArray, FloatArray]:
    """(confidence, correct): the row maximum and 1.0 where the arg max is the label, else 0.0."""
    P, y, _ = _probability_batch(P, y, None)
    return _top_label(P, np.argmax(P, axis=1), y)


def summarize_multiclass(
    P: FloatArray,
    y: IntArray,
    w: FloatArray | None = None,
    *,
    n_bins: int = 10,
    strategy: str = "uniform",
    class_index: int | None = None,
    with_bin_free: bool = True,
) -> Report:
    """The report of a multiclass batch, as :func:`~app.calibration.measures.metrics.summarize`'s
    (``with_bin_free``: with the measures the bins do not change).

    By default the top-label diagram (bins of :func:`top_label`) with the multiclass
    ``brier``, ``log_loss``, ``accuracy`` and the top-label ``ece`` and ``mce``. With
    ``class_index=j``: column j against (y == j), i.e.
    :func:`~app.calibration.measures.metrics.summarize` of that column (its binary measures) plus
    the multiclass ``accuracy``.
    """
    P, y, w = _probability_batch(P, y, w)
    if class_index is not None:
        check_class_index(class_index, P.shape[1])
        column = P[:, class_index]
        rest = (y == class_index).astype(np.float64)
        summary = summarize(
            column, rest, w, n_bins=n_bins, strategy=strategy, with_bin_free=with_bin_free
        )
        if with_bin_free:
            summary.metrics["accuracy"] = _accuracy(np.argmax(P, axis=1), y, w)
        return summary
    top = np.argmax(P, axis=1)  # once, for the diagram and the accuracy
    confidence, correct = _top_label(P, top, y)
    check_bin_settings(n_bins, strategy)
    bins = bin_table(*check_probabilities(confidence, correct, w), n_bins, strategy)
    metrics: dict[str, float | None] = {}
    if with_bin_free:
        metrics["brier"] = _multiclass_brier(P, y, w)
        metrics["log_loss"] = _multiclass_log_loss(P, y, w)
        metrics["accuracy"] = _accuracy(top, y, w)
    metrics["ece"] = expected_calibration_error(bins)
    metrics["mce"] = maximum_calibration_error(bins)
    return Report(bins, metrics)


def check_class_index(class_index: object, k: int) -> None:
    """A :class:`CalibrationError` at ``class_index`` unless it is an integer in 0..k-1."""
    if isinstance(class_index, bool) or not isinstance(class_index, int | np.integer):
        raise CalibrationError(f"must be an integer, not {class_index!r}", loc=("class_index",))
    if not 0 <= class_index < k:
        raise CalibrationError(f"must be in 0..{k - 1}, not {class_index}", loc=("class_index",))


def headline_multiclass(
    P: FloatArray, y: IntArray, w: FloatArray | None = None
) -> dict[str, JSONValue]:
    """``{"brier", "log_loss", "accuracy", "ece"}``; ECE is top-label over 10 uniform bins."""
    P, y, w = _probability_batch(P, y, w)
    top = np.argmax(P, axis=1)
    confidence, correct = _top_label(P, top, y)
    return {
        "brier": _multiclass_brier(P, y, w),
        "log_loss": _multiclass_log_loss(P, y, w),
        "accuracy": _accuracy(top, y, w),
        "ece": expected_calibration_error(bin_table(confidence, correct, w, 10, "uniform")),
    }


def _probability_batch(
    P: FloatArray, y: IntArray, w: FloatArray | None
) -> tuple[FloatArray, IntArray, FloatArray]:
    P, y, w = check_multiclass_batch(P, y, w, scores_field="probabilities")
    if P.min() < 0.0 or P.max() > 1.0:
        raise CalibrationError("must lie in [0, 1]", loc=("probabilities",))
    return P, y, w


def _multiclass_brier(P: FloatArray, y: IntArray, w: FloatArray) -> float:
    return blockwise_mean(lambda block: brier_distances(P[block], y[block]), w)


def _multiclass_log_loss(P: FloatArray, y: IntArray, w: FloatArray, eps: float = 1e-15) -> float:
    return blockwise_mean(lambda block: multiclass_log_losses(P[block], y[block], eps), w)


def _accuracy(top: NDArray[np.intp], y: IntArray, w: FloatArray) -> float:
    return blockwise_mean(lambda block: (top[block] == y[block]).astype(np.float64), w)


def _top_label(P: FloatArray, top: NDArray[np.intp], y: IntArray) -> tuple[FloatArray, FloatArray]:
    return P[np.arange(y.size), top], (top == y).astype(np.float64)
