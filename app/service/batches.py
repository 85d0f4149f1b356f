"""A labelled batch, validated: what every fit and diagnostics request carries.

Validation is vectorised; only when something is wrong does a Python scan look for the
first offending index, so that the error names it (``scores[17] is NaN``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from app.calibration import BINARY_ONLY, MAX_CLASSES, METHODS, MULTICLASS_ONLY
from app.errors import PayloadTooLarge, invalid


@dataclass(frozen=True)
class Batch:
    """Scores (n, or n x k), integer labels (n) and non-negative weights (n)."""

    scores: NDArray[np.float64]
    labels: NDArray[np.int64]
    weights: NDArray[np.float64]

    @property
    def n_samples(self) -> int:
        return int(self.labels.shape[0])

    @property
    def n_classes(self) -> int:
        return 2 if self.scores.ndim == 1 else int(self.scores.shape[1])

    @property
    def is_multiclass(self) -> bool:
        return self.scores.ndim == 2

    @property
    def n_positive(self) -> int:
        return int(np.count_nonzero(self.labels == 1)) if not self.is_multiclass else 0


SMALL_ARRAY = 32
"""Up to this many values, a Python loop answers :func:`all_finite` faster than numpy's
ufunc machinery (0.2 us against 1 us for one predict score)."""


def all_finite(values: NDArray[np.float64]) -> bool:
    """Whether no value is NaN or infinite."""
    if values.size <= SMALL_ARRAY:
        return all(map(math.isfinite, values.ravel().tolist()))
    return bool(np.isfinite(values).all())


def first_true(mask: NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(mask)[0])


def check_scores(scores: NDArray[np.float64], field: str = "scores") -> None:
    """Finite, and a vector or a rectangular matrix of 3 to :data:`~app.calibration.MAX_CLASSES`
    columns."""
    if scores.ndim == 2 and scores.shape[1] > MAX_CLASSES:
        raise invalid((field,), f"has {scores.shape[1]} class columns; at most {MAX_CLASSES}")
    if not all_finite(scores):
        bad = ~np.isfinite(scores)
        rows = np.asarray(bad.reshape(bad.shape[0], -1).any(axis=1), dtype=np.bool_)
        flat = first_true(rows)
        value = scores[flat] if scores.ndim == 1 else scores[flat][~np.isfinite(scores[flat])][0]
        what = "NaN" if np.isnan(value) else "infinite"
        raise invalid((field, flat), f"is {what}; scores must be finite numbers")
    if scores.ndim == 2 and scores.shape[1] < 3:
        # Two classes are binary: one score per row, so that a version's shape is its kind.
        raise invalid(
            (field,),
            f"is an n x {scores.shape[1]} matrix; a score matrix needs at least three columns "
            "(classes); for two classes send the score of class 1 as a vector",
        )


def validate_batch(
    scores: NDArray[np.float64],
    labels: NDArray[np.float64],
    weights: NDArray[np.float64] | None,
    *,
    max_rows: int,
    require_both_classes: bool = True,
) -> Batch:
    """Check a parsed batch against the contract (docs/api.md, Fitting) and return it typed."""
    n = scores.shape[0]
    if n == 0:
        raise invalid(("scores",), "is empty; a batch needs at least one pair")
    if n > max_rows:
        raise PayloadTooLarge(f"the batch has {n} rows; the limit is {max_rows}")
    if labels.shape[0] != n:
        raise invalid(("labels",), f"has {labels.shape[0]} values but scores has {n}")
    check_scores(scores)
    k = 2 if scores.ndim == 1 else scores.shape[1]
    int_labels = _check_labels(labels, k)
    if weights is None:
        w = np.ones(n, dtype=np.float64)
    else:
        if weights.shape[0] != n:
            raise invalid(("sample_weight",), f"has {weights.shape[0]} values but scores has {n}")
        w = weights
        bad = ~np.isfinite(w) | (w < 0)
        if bad.any():
            i = first_true(bad)
            raise invalid(("sample_weight", i), f"is {w[i]}; weights must be >= 0")
        if not (w > 0).any():
            raise invalid(("sample_weight",), "is all zero; some weight must be positive")
    if require_both_classes:
        present = np.flatnonzero(np.bincount(int_labels, weights=w, minlength=k))
        if present.size < 2:
            needed = "both positives and negatives" if k == 2 else "at least two classes"
            raise invalid(
                ("labels",),
                f"holds a single class ({int(present[0])}); calibration needs {needed}",
            )
    return Batch(scores=scores, labels=int_labels, weights=w)


def _check_labels(labels: NDArray[np.float64], k: int) -> NDArray[np.int64]:
    bad = ~np.isfinite(labels) | (labels != np.round(labels)) | (labels < 0) | (labels >= k)
    if bad.any():
        i = first_true(bad)
        allowed = "0 or 1 (or booleans)" if k == 2 else f"an integer in 0..{k - 1}"
        value = labels[i]
        shown = "NaN" if np.isnan(value) else f"{value:g}"
        raise invalid(("labels", i), f"is {shown}; labels must be {allowed}")
    return labels.astype(np.int64)


def check_method_fits_batch(method: str, batch: Batch) -> None:
    """A known method, given the shape of scores it works on (docs/api.md, Fitting)."""
    if method not in METHODS:
        raise invalid(
            ("method",),
            f"is {method!r}, not a known method; expected one of {', '.join(METHODS)}",
        )
    if batch.is_multiclass and method in BINARY_ONLY:
        raise invalid(
            ("scores",),
            f"is an n x {batch.n_classes} matrix but method {method!r} is binary; "
            "send one score per row",
        )
    if not batch.is_multiclass and method in MULTICLASS_ONLY:
        raise invalid(
            ("scores",),
            f"is a vector but method {method!r} is multiclass; send an n x k matrix of scores",
        )
