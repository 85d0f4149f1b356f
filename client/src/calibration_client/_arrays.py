"""Inputs → numpy arrays: lists, numpy arrays, pandas Series and DataFrames, polars Series
and DataFrames, pyarrow Arrays and ChunkedArrays (a Table's columns). pandas, polars and
pyarrow are never imported here: their objects convert themselves (``to_numpy``),
recognised by the module their type comes from.

Only what encoding needs is checked (the service validates the batch): shapes, equal
lengths, and finite numbers, which JSON cannot carry."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

_FRAME_MODULES = ("pandas", "polars")


def _library(values: object) -> str:
    return type(values).__module__.split(".", 1)[0]


def _plain(values: Any) -> Any:
    """A pandas, polars or pyarrow object as numpy (nulls as NaN, as ``to_numpy`` gives
    them: refused where numbers must be finite); anything else as it is."""
    library = _library(values)
    if library in _FRAME_MODULES:
        return values.to_numpy()
    if library == "pyarrow":  # strings and nulls cannot be zero-copy: copy them
        return values.to_numpy(zero_copy_only=False)
    return values


def _numbers(values: Any, name: str) -> NDArray[Any]:
    """``values`` as a numpy array of numbers (bool, int or float), as given."""
    array = np.asarray(_plain(values))
    if array.dtype.kind not in "biuf":
        try:  # pandas' nullable columns come as objects
            array = array.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be numbers; got {array.dtype} values") from None
    return array


SMALL = 32


def _check_finite(array: NDArray[Any], name: str) -> None:
    """ValueError naming the first NaN or infinite entry (as the service names it)."""
    if array.dtype.kind != "f":
        return
    if array.size <= SMALL and all(map(math.isfinite, array.ravel().tolist())):
        return  # (a few numbers: a loop answers in a fifth of numpy's ufunc time)
    bad = ~np.isfinite(array)
    if bad.any():
        index = np.unravel_index(int(np.flatnonzero(bad)[0]), array.shape)
        where = "".join(f"[{i}]" for i in index)
        value = array[index]
        raise ValueError(f"{name}{where} is {'NaN' if np.isnan(value) else 'infinite'}")


def as_scores(values: Any, name: str = "scores") -> NDArray[np.float64]:
    """Raw scores as float64: (n,) for a binary calibrator, (n, k) for a k-class one."""
    array = _numbers(values, name).astype(np.float64, copy=False)
    if array.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D (n,) or 2-D (n, k); got shape {array.shape}")
    _check_finite(array, name)
    return array


def as_labels(values: Any, rows: int, name: str = "labels", of: str = "scores") -> NDArray[Any]:
    """Labels as int64 when they are whole numbers (booleans are 0/1), else as given for
    the service to refuse with its own message; one per row."""
    array = _numbers(values, name)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {array.shape}")
    _check_length(array, rows, name, of)
    _check_finite(array, name)
    if array.dtype.kind in "biu" or np.array_equal(array, np.round(array)):
        return array.astype(np.int64, copy=False)
    return array


def as_weights(values: Any, rows: int, name: str = "sample_weight") -> NDArray[np.float64]:
    """Sample weights as float64, one per row."""
    array = _numbers(values, name).astype(np.float64, copy=False)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {array.shape}")
    _check_length(array, rows, name)
    _check_finite(array, name)
    return array


def as_priors(values: Any, name: str = "priors") -> NDArray[np.float64]:
    """Class priors as float64, one per class (the service checks their range and sum)."""
    array = _numbers(values, name).astype(np.float64, copy=False)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, one per class; got shape {array.shape}")
    _check_finite(array, name)
    return array


def as_ids(values: Any, rows: int, name: str = "ids") -> list[str]:
    """Client ids as strings, one per row."""
    values = _plain(values)
    ids = [str(i) for i in (values.tolist() if isinstance(values, np.ndarray) else values)]
    _check_length(ids, rows, name)
    return ids


def _check_length(
    values: NDArray[Any] | list[Any], rows: int, name: str, of: str = "scores"
) -> None:
    if len(values) != rows:
        raise ValueError(f"{name} has {len(values)} values but {of} has {rows}")
