"""A version adjusted to new priors exports its method's graph followed by the Bayes steps:
run in onnxruntime, it equals predict within 1e-12 (float64) or half a float32 ulp (float32),
for binary and k-class methods, Venn-ABERS' p0 and p1 included, on grids built here."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.calibration import Adjustment, PriorAdjusted, fit_calibrator
from app.export import FLOAT32_BOUND, export_onnx
from tests.calibration.batches import sigmoid_batch

from .test_onnx_parity import grid, knots_of, largest_gap, run

PARITY = 1e-12
BINARY_STEPS = (
    (Adjustment(np.array([0.6, 0.4]), np.array([0.92, 0.08])),),
    (
        Adjustment(np.array([0.6, 0.4]), np.array([0.1, 0.9])),
        Adjustment(np.array([0.1, 0.9]), np.array([0.5, 0.5])),
    ),
    # ratios that are 1 in float32 but not in float64, which ONNX Runtime's optimiser drops
    (Adjustment(np.array([0.6, 0.4]), np.array([0.6 - 1e-10, 0.4 + 1e-10])),),
)


def _outputs(calibrator: Any, scores: np.ndarray) -> dict[str, np.ndarray]:
    with np.errstate(invalid="ignore", over="ignore"):
        answers = {"probabilities": calibrator.predict(scores)}
    if calibrator.method == "venn_abers":
        answers["p0"], answers["p1"] = calibrator.predict_interval(scores)
    return answers


def _check(calibrator: PriorAdjusted, k: int, scores: np.ndarray) -> None:
    export = export_onnx(calibrator, k)
    got, want = run(export.model, scores), _outputs(calibrator, scores)
    assert set(got) == set(want)
    assert max(largest_gap(got[name], want[name]) for name in want) <= PARITY
    assert export.parity <= PARITY
    narrow = export_onnx(calibrator, k, dtype="float32")
    assert narrow.parity <= FLOAT32_BOUND
    given = scores.astype(np.float32)
    got = run(narrow.model, given)
    want = _outputs(calibrator, given.astype(np.float64))
    assert max(largest_gap(got[name], want[name]) for name in want) <= FLOAT32_BOUND


@pytest.mark.parametrize("method", ["platt", "isotonic", "beta", "histogram_binning", "venn_abers"])
@pytest.mark.parametrize("steps", BINARY_STEPS)
def test_binary_adjusted_graphs_match_predict(method: str, steps: tuple[Adjustment, ...]) -> None:
    f, y, _ = sigmoid_batch(np.random.default_rng(8), 800)
    if method == "beta":
        f = 1.0 / (1.0 + np.exp(-f))
    parent = fit_calibrator(method, {}, f, y, None).calibrator
    adjusted = PriorAdjusted(parent, steps)
    _check(adjusted, 2, grid(knots_of(parent), unit=method == "beta"))


@pytest.mark.parametrize("method", ["temperature", "venn_abers", "isotonic", "bostrom"])
def test_k_class_adjusted_graphs_match_predict(method: str) -> None:
    rng = np.random.default_rng(9)
    z = rng.normal(size=(700, 4)) * 2
    labels = z.argmax(axis=1)
    if method == "bostrom":
        z = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    parent = fit_calibrator(method, {}, z, labels, None).calibrator
    steps = (
        Adjustment(np.array([0.25, 0.25, 0.3, 0.2]), np.array([0.1, 0.2, 0.3, 0.4])),
        Adjustment(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.7, 0.1, 0.1, 0.1])),
        # ratios all 1 in float32, not in float64 (see BINARY_STEPS)
        Adjustment(
            np.array([0.7, 0.1, 0.1, 0.1]),
            np.array([0.7 - 3e-10, 0.1 + 1e-10, 0.1 + 1e-10, 0.1 + 1e-10]),
        ),
    )
    scores = rng.normal(size=(500, 4)) * 3
    if method == "bostrom":
        scores = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    _check(PriorAdjusted(parent, steps), 4, scores)
