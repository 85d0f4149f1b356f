"""What a stored batch holds, in any format, and the checks every decoded batch passes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.store.artifacts import ArtifactError


@dataclass(frozen=True)
class StoredBatch:
    """A version's fitting batch and its out-of-fold (cross-validated) predictions.

    ``scores`` and ``out_of_fold`` are (n,) for binary and (n, k) for multiclass calibrators.
    Arrays read from the current format are read-only views of the stored bytes (uniform
    weights: of the header's one weight, with stride 0), except the labels, widened to int64.
    """

    scores: NDArray[np.float64]
    labels: NDArray[np.int64]
    weights: NDArray[np.float64]
    out_of_fold: NDArray[np.float64]


BATCH_FIELDS: dict[str, tuple[np.dtype[Any], tuple[int, ...]]] = {
    "scores": (np.dtype(np.float64), (1, 2)),
    "labels": (np.dtype(np.int64), (1,)),
    "weights": (np.dtype(np.float64), (1,)),
    "out_of_fold": (np.dtype(np.float64), (1, 2)),
}
"""Each array of a stored batch: its dtype and allowed numbers of dimensions."""


def check_batch(arrays: dict[str, NDArray[Any]]) -> None:
    """Dtypes, dimensions, one length n, one shape for scores and out_of_fold, label range."""
    for name, (dtype, ndims) in BATCH_FIELDS.items():
        array = arrays[name]
        if array.dtype != dtype:
            raise ArtifactError(f"batch {name} must be {dtype}, not {array.dtype}")
        if array.ndim not in ndims:
            allowed = " or ".join(map(str, ndims))
            raise ArtifactError(f"batch {name} must have {allowed} dimensions, not {array.ndim}")
    n = len(arrays["scores"])
    for name, array in arrays.items():
        if len(array) != n:
            raise ArtifactError(f"batch {name} has {len(array)} rows; scores have {n}")
    scores, out_of_fold = arrays["scores"], arrays["out_of_fold"]
    if scores.ndim == 2 and not 1 <= scores.shape[1] < 1 << 32:
        raise ArtifactError(f"batch scores have {scores.shape[1]} columns; a matrix needs some")
    if scores.shape != out_of_fold.shape:
        raise ArtifactError(
            f"batch out_of_fold has shape {out_of_fold.shape}; scores have {scores.shape}"
        )
    check_labels(arrays["labels"], scores.shape[1] if scores.ndim == 2 else 2)


def check_labels(labels: NDArray[np.integer[Any]], classes: int) -> None:
    """Labels are class indices: whole numbers in 0..classes-1."""
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise ArtifactError(
            f"batch labels must lie in 0..{classes - 1}, not "
            f"{int(labels.min())}..{int(labels.max())}"
        )
