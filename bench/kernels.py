"""Predict kernels against the bare numpy / scipy call on the same arrays."""

from __future__ import annotations

from functools import partial

import numpy as np
from scipy.special import expit

from app.calibration import IsotonicCalibrator, PlattCalibrator, make_calibrator
from bench.fits import batch
from bench.table import Row, Target, compare_ms, progress, size_label

KERNEL = Target(1.2)
VENN_ABERS = Target(1.5)


def kernel_rows(n: int, repeat: int) -> list[Row]:
    """isotonic predict / np.interp and platt predict / expit(-(A f + B)) on n new scores,
    with calibrators fitted on 10^5 distinct scores (thousands of thresholds); then the same
    for a single score, where the per-call overhead shows (no target there)."""
    progress(f"predict kernels n={n}")
    f, y, w = batch(10**5, tied=False)
    scores = np.random.default_rng(7).normal(scale=1.5, size=n)
    one = scores[:1].copy()
    isotonic = make_calibrator("isotonic", {}).fit(f, y, w)
    platt = make_calibrator("platt", {}).fit(f, y, w)
    assert isinstance(isotonic, IsotonicCalibrator)
    assert isinstance(platt, PlattCalibrator)
    x, v, a, b = isotonic.thresholds, isotonic.values, platt.A, platt.B

    def bare_expit(array: np.ndarray) -> np.ndarray:
        result: np.ndarray = expit(-(a * array + b))
        return result

    rows = []
    cases = ((scores, size_label(n), KERNEL, repeat, 1.0, "ms"), (one, "1", None, 2000, 1e3, "us"))
    for array, label, target, reps, scale, unit in cases:
        ours, ref = compare_ms(
            partial(isotonic.predict, array), partial(np.interp, array, x, v), reps
        )
        rows.append(
            Row(
                "predict",
                "isotonic predict / np.interp",
                label,
                ours * scale,
                ref * scale,
                unit,
                target,
            )
        )
        ours, ref = compare_ms(partial(platt.predict, array), partial(bare_expit, array), reps)
        rows.append(
            Row("predict", "platt predict / expit", label, ours * scale, ref * scale, unit, target)
        )
    rows += venn_abers_rows(f, y, w, scores, repeat)
    return rows


def venn_abers_rows(
    f: np.ndarray, y: np.ndarray, w: np.ndarray, scores: np.ndarray, repeat: int
) -> list[Row]:
    """Venn-ABERS predict (IVAP and 5-fold CVAP, fitted on the same 10^5 distinct scores)
    against isotonic regression's predict on the same new scores."""
    isotonic = make_calibrator("isotonic", {}).fit(f, y, w)
    rows = []
    for mode in ("inductive", "cross"):
        progress(f"predict kernels: venn_abers {mode}")
        venn_abers = make_calibrator("venn_abers", {"mode": mode}).fit(f, y, w)
        ours, ref = compare_ms(
            partial(venn_abers.predict, scores), partial(isotonic.predict, scores), repeat
        )
        rows.append(
            Row(
                "predict",
                f"venn_abers ({mode}) predict / isotonic predict",
                size_label(scores.size),
                ours,
                ref,
                target=VENN_ABERS if scores.size >= 10**6 else None,
            )
        )
    return rows
