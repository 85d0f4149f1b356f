"""Multiclass measures against scikit-learn and direct computations."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import accuracy_score
from sklearn.metrics import log_loss as sk_log_loss

from app.calibration import CalibrationError
from app.calibration.measures.metrics import summarize
from app.calibration.measures.multiclass_metrics import (
    accuracy,
    check_multiclass_batch,
    headline_multiclass,
    is_probability_matrix,
    multiclass_brier,
    multiclass_log_loss,
    raw_probabilities,
    summarize_multiclass,
    top_label,
)

EPS64 = float(np.finfo(np.float64).eps)


def _batch(seed: int, n: int = 300, k: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(k, 0.7), size=n)
    y = rng.integers(0, k, size=n)
    return P, y, rng.uniform(0.0, 3.0, size=n)


@pytest.mark.parametrize("weighted", [False, True])
def test_log_loss_brier_accuracy_match_references(weighted: bool) -> None:
    P, y, w = _batch(1)
    P[0] = [1.0, 0.0, 0.0, 0.0]  # an exact zero on a true class, clipped
    y[0] = 1
    sw = w if weighted else None
    expected = sk_log_loss(y, P, labels=range(4), sample_weight=sw)
    assert multiclass_log_loss(P, y, sw, eps=EPS64) == pytest.approx(expected, rel=1e-12)
    onehot = np.eye(4)[y]
    brier = np.average(((P - onehot) ** 2).sum(axis=1), weights=sw)
    assert multiclass_brier(P, y, sw) == pytest.approx(brier, rel=1e-12)
    assert accuracy(P, y, sw) == pytest.approx(
        accuracy_score(y, P.argmax(axis=1), sample_weight=sw), rel=1e-12
    )


def test_log_loss_with_absent_classes_matches_sklearn_labels() -> None:
    P, y, _ = _batch(2, k=5)
    y = np.where(y == 3, 0, y)  # class 3 never occurs
    assert multiclass_log_loss(P, y, eps=EPS64) == pytest.approx(
        sk_log_loss(y, P, labels=range(5)), rel=1e-12
    )


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_top_label_bins_match_calibration_curve(strategy: str) -> None:
    P, y, _ = _batch(3, n=1000)
    confidence, correct = top_label(P, y)
    np.testing.assert_array_equal(confidence, P.max(axis=1))
    np.testing.assert_array_equal(correct, (P.argmax(axis=1) == y).astype(float))
    prob_true, prob_pred = calibration_curve(correct, confidence, n_bins=10, strategy=strategy)
    summary = summarize_multiclass(P, y, n_bins=10, strategy=strategy).as_json()
    filled = [b for b in summary["bins"] if b["count"] > 0]
    np.testing.assert_allclose([b["fraction_positive"] for b in filled], prob_true, atol=1e-12)
    np.testing.assert_allclose([b["mean_predicted"] for b in filled], prob_pred, atol=1e-12)
    assert set(summary["metrics"]) == {"brier", "log_loss", "accuracy", "ece", "mce"}
    gaps = [abs(b["fraction_positive"] - b["mean_predicted"]) for b in filled]
    counts = np.array([b["count"] for b in filled])
    assert summary["metrics"]["ece"] == pytest.approx(counts @ gaps / counts.sum(), rel=1e-12)
    assert summary["metrics"]["mce"] == pytest.approx(max(gaps), rel=1e-12)


def test_class_index_summary_is_one_vs_rest() -> None:
    P, y, w = _batch(4)
    summary = summarize_multiclass(P, y, w, class_index=2).as_json()
    binary = summarize(P[:, 2], (y == 2).astype(float), w).as_json()
    assert summary["bins"] == binary["bins"]
    assert summary["metrics"] == {**binary["metrics"], "accuracy": accuracy(P, y, w)}
    with pytest.raises(CalibrationError, match="class_index"):
        summarize_multiclass(P, y, class_index=4)


def test_headline_and_raw_probabilities() -> None:
    P, y, w = _batch(5)
    headline = headline_multiclass(P, y, w)
    assert headline == {
        "brier": multiclass_brier(P, y, w),
        "log_loss": multiclass_log_loss(P, y, w),
        "accuracy": accuracy(P, y, w),
        "ece": summarize_multiclass(P, y, w).metrics["ece"],
    }
    np.testing.assert_array_equal(raw_probabilities(P), P)
    z = np.array([[1000.0, 0.0, -1000.0], [1.0, 2.0, 3.0]])
    expected = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(raw_probabilities(z), expected / expected.sum(axis=1)[:, None])
    assert is_probability_matrix(P)
    assert not is_probability_matrix(P * 1.01)


@pytest.mark.parametrize(
    ("scores", "labels", "weights", "message"),
    [
        ([1.0, 2.0], [0, 1], None, "2-d"),
        ([[1.0], [2.0]], [0, 0], None, "at least 2 class columns"),
        ([[1.0, np.nan], [0.0, 1.0]], [0, 1], None, r"scores\[0\]: must be finite"),
        (
            [[1.0, 0.0], [0.0, 1.0]],
            [0, 2],
            None,
            r"^labels\[1\]: must be class indices in 0..1$",
        ),
        ([[1.0, 0.0], [0.0, 1.0]], [0.5, 1], None, "labels"),
        ([[1.0, 0.0], [0.0, 1.0]], [0], None, "labels: has 1 values"),
        ([[1.0, 0.0], [0.0, 1.0]], [0, 1], [1.0, -1.0], "sample_weight"),
    ],
)
def test_batch_validation_names_the_field(
    scores: object, labels: object, weights: object, message: str
) -> None:
    with pytest.raises(CalibrationError, match=message):
        check_multiclass_batch(scores, labels, weights)
