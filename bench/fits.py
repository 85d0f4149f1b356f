"""Fit benchmarks: isotonic and platt against scikit-learn; trimmed and auto against plain."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from functools import partial

import numpy as np
from sklearn.calibration import _SigmoidCalibration
from sklearn.isotonic import IsotonicRegression

from app.calibration import fit_calibrator, make_calibrator
from bench.table import Row, Target, compare_ms, progress, size_label

FloatArray = np.ndarray

ISOTONIC_DISTINCT = Target(0.35)
ISOTONIC_TIED = Target(0.1)
PLATT = Target(0.6)
TARGET_SIZE = 10**6  # the targets are stated at 10^6 pairs


def batch(n: int, *, tied: bool, seed: int = 0) -> tuple[FloatArray, FloatArray, FloatArray]:
    """n margins with a sigmoid distortion; ``tied``: as probabilities rounded to 3 decimals."""
    rng = np.random.default_rng(seed)
    f = rng.normal(scale=1.5, size=n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(2.0 * f - 0.5)))).astype(np.float64)
    if tied:
        f = np.round(1.0 / (1.0 + np.exp(-f)), 3)
    return f, y, np.ones(n)


def ours_fit(method: str, f: FloatArray, y: FloatArray, w: FloatArray) -> None:
    """The plain fit, as ``make_calibrator(method, {}).fit``."""
    make_calibrator(method, {}).fit(f, y, w)


def sklearn_isotonic(f: FloatArray, y: FloatArray) -> None:
    """scikit-learn's isotonic fit, clipped outside the range as ours."""
    IsotonicRegression(out_of_bounds="clip").fit(f, y)


def sklearn_sigmoid(f: FloatArray, y: FloatArray) -> None:
    """scikit-learn's Platt fit (L-BFGS), as CalibratedClassifierCV uses it."""
    _SigmoidCalibration().fit(f, y)


def service_fit(method: str, params: Mapping[str, object], f: FloatArray, y: FloatArray) -> None:
    """``fit_calibrator`` as the service calls it: 5-fold CV predictions included."""
    fit_calibrator(method, params, f, y, None)


def repeats(n: int) -> int:
    """Repetitions per timing: medians of 5 on small batches, 3 on the largest."""
    return 5 if n <= 10**6 else 3


def sklearn_rows(sizes: list[int]) -> list[Row]:
    """Ours (``make_calibrator(...).fit``) against scikit-learn's fit on the same arrays."""
    rows = []
    for tied in (False, True):
        kind = "tied" if tied else "distinct"
        for n in sizes:
            progress(f"fit vs scikit-learn: {kind} n={n}")
            f, y, w = batch(n, tied=tied)
            warm = n < 10**7
            ours, ref = compare_ms(
                partial(ours_fit, "isotonic", f, y, w),
                partial(sklearn_isotonic, f, y),
                repeats(n),
                warmup=warm,
            )
            target = (ISOTONIC_TIED if tied else ISOTONIC_DISTINCT) if n == TARGET_SIZE else None
            rows.append(
                Row("fit", f"isotonic, {kind} / sklearn", size_label(n), ours, ref, target=target)
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # L-BFGS's convergence notes on large n
                ours, ref = compare_ms(
                    partial(ours_fit, "platt", f, y, w),
                    partial(sklearn_sigmoid, f, y),
                    repeats(n),
                    warmup=warm,
                )
            target = PLATT if n == TARGET_SIZE else None
            rows.append(
                Row("fit", f"platt, {kind} / sklearn", size_label(n), ours, ref, target=target)
            )
    return rows


def variant_rows(sizes: list[int], repeat: int = 3) -> list[Row]:
    """Trimmed and auto fits against their plain counterparts, CV diagnostics included in both
    (``fit_calibrator``, 5 folds, one thread, as the service fits); medians of ``repeat``."""
    variants = [
        ("platt", {"trim": "cv"}, "platt", "platt trim=cv / platt"),
        ("platt", {"trim": "trainset"}, "platt", "platt trim=trainset / platt"),
        ("isotonic", {"trim": "cv"}, "isotonic", "isotonic trim=cv / isotonic"),
        ("isotonic", {"trim": "trainset"}, "isotonic", "isotonic trim=trainset / isotonic"),
        ("auto", {}, "isotonic", "auto / isotonic"),
    ]
    rows = []
    for n in sizes:
        f, y, _ = batch(n, tied=False, seed=1)
        for method, params, plain, name in variants:
            progress(f"fit variants: {name} n={n}")
            ours, ref = compare_ms(
                partial(service_fit, method, params, f, y),
                partial(service_fit, plain, {}, f, y),
                repeat,
                warmup=False,
            )
            rows.append(Row("fit", name, size_label(n), ours, ref))
    return rows
