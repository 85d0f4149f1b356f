"""Expected performance of unlabelled predictions (app/calibration/measures/expected.py),
against brute force: every label vector of a small batch enumerated with its probability,
the pairwise definition of the expected AUC, NannyML's formulas written out in numpy, and the
bands' coverage of labels drawn from the probabilities."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, brier_score_loss, log_loss, roc_auc_score

from app.calibration.measures.expected import (
    Z,
    expected_binary,
    expected_multiclass,
    expected_roc_auc,
)


def _every_labelling(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All 2^n label vectors of ``p`` and the probability of each."""
    labels = np.array(list(itertools.product((0, 1), repeat=p.size)))
    chance = np.prod(np.where(labels == 1, p, 1 - p), axis=1)
    return labels, chance


def _realized(p: np.ndarray, y: np.ndarray, t: float) -> dict[str, float]:
    predicted = p > t
    tp = float((predicted & (y == 1)).sum())
    fp = float((predicted & (y == 0)).sum())
    fn = float((~predicted & (y == 1)).sum())
    clipped = np.clip(p, 1e-15, 1 - 1e-15)
    return {
        "positive_rate": float(y.mean()),
        "accuracy": float(accuracy_score(y, predicted)),
        "log_loss": float(-np.mean(y * np.log(clipped) + (1 - y) * np.log1p(-clipped))),
        "brier": float(brier_score_loss(y, p)) if len(set(y)) > 1 else float(np.mean((p - y) ** 2)),
        "tp": tp,
        "fp": fp,
        "fn": fn,
    }


def test_exact_expectations_and_variances_by_enumeration() -> None:
    p = np.array([0.05, 0.2, 0.35, 0.5, 0.61, 0.8, 0.93, 0.97, 0.44, 0.7])
    t = 0.5
    labels, chance = _every_labelling(p)
    rows = [_realized(p, y, t) for y in labels]
    mean = {k: float(sum(c * r[k] for c, r in zip(chance, rows, strict=True))) for k in rows[0]}
    var = {
        k: float(sum(c * (r[k] - mean[k]) ** 2 for c, r in zip(chance, rows, strict=True)))
        for k in rows[0]
    }
    found = expected_binary(p, t)
    for key in ("positive_rate", "accuracy", "log_loss", "brier"):
        assert found[key] == pytest.approx(mean[key], abs=1e-12), key
        low, high = found["intervals"][key]
        half = Z * math.sqrt(var[key])
        if low > 0 and high < 1:  # not clipped
            assert (high - low) / 2 == pytest.approx(half, rel=1e-9), key
    m = int((p > t).sum())
    assert found["precision"] == pytest.approx(mean["tp"] / m, abs=1e-12)  # exact: m is fixed
    low, high = found["intervals"]["precision"]  # its band is clipped at 1 here: the low end
    assert found["precision"] - low == pytest.approx(Z * math.sqrt(var["tp"]) / m, rel=1e-9)
    # recall and F1: the ratios of the expected counts, as CBPE computes them
    assert found["recall"] == pytest.approx(mean["tp"] / (mean["tp"] + mean["fn"]), abs=1e-12)
    f1 = 2 * mean["tp"] / (2 * mean["tp"] + mean["fp"] + mean["fn"])
    assert found["f1"] == pytest.approx(f1, abs=1e-12)


def test_expected_auc_is_expected_concordance_over_expected_pairs() -> None:
    rng = np.random.default_rng(4)
    p = np.round(rng.uniform(size=300), 2)  # ties
    pairs = p[:, None] * (1 - p[None, :])
    order = np.sign(p[:, None] - p[None, :])
    concordant = (pairs * ((order > 0) + 0.5 * (order == 0))).sum()
    assert expected_roc_auc(p) == pytest.approx(concordant / (p.sum() * (1 - p).sum()), abs=1e-12)
    assert expected_roc_auc(np.zeros(5)) is None
    assert expected_roc_auc(np.ones(5)) is None


def _nannyml(p: np.ndarray, t: float) -> dict[str, float]:
    """NannyML's CBPE formulas (metrics.py), written out: a threshold of p >= t there."""
    predicted = p >= t
    tp = p[predicted].sum()
    fp = (1 - p)[predicted].sum()
    fn = p[~predicted].sum()
    tn = (1 - p)[~predicted].sum()
    thresholds = np.append(np.sort(p), 1)
    tps = np.cumsum(thresholds[::-1])[::-1]
    fps = np.cumsum((1 - thresholds)[::-1])[::-1]
    fns = np.cumsum(np.insert(thresholds, 0, 0)[:-1])
    tns = np.cumsum(np.insert(1 - thresholds, 0, 0)[:-1])
    keep = np.diff(np.insert(thresholds, 0, -1)).astype(bool)
    tpr = tps[keep] / (tps[keep] + fns[keep])
    fpr = fps[keep] / (fps[keep] + tns[keep])
    return {
        "accuracy": (tp + tn) / p.size,
        "precision": tp / (tp + fp),
        "recall": tp / (tp + fn),
        "f1": tp / (tp + 0.5 * (fp + fn)),
        "roc_auc": float(-np.trapezoid(tpr, fpr)),
    }


def test_equals_nannyml_on_the_same_probabilities() -> None:
    rng = np.random.default_rng(7)
    p = rng.beta(2, 3, size=20_000)
    p = p[np.abs(p - 0.5) > 1e-9]  # no probability at the threshold itself (> against >=)
    ours, theirs = expected_binary(p, 0.5), _nannyml(p, 0.5)
    for key in ("accuracy", "precision", "recall", "f1"):
        assert ours[key] == pytest.approx(theirs[key], abs=1e-12), key
    # NannyML appends a phantom prediction of 1; it moves the AUC by O(1/n)
    assert ours["roc_auc"] == pytest.approx(theirs["roc_auc"], abs=2 / p.size)


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.8])
def test_bands_cover_the_realized_values_of_labels_drawn_from_p(threshold: float) -> None:
    rng = np.random.default_rng(11)
    p = rng.beta(1.5, 2.5, size=2_000)
    found = expected_binary(p, threshold)
    hits = dict.fromkeys(found["intervals"], 0)
    draws = 300
    for _ in range(draws):
        y = (rng.random(p.size) < p).astype(int)
        real = _realized(p, y, threshold)
        predicted = p > threshold
        real["precision"] = real["tp"] / predicted.sum()
        real["recall"] = real["tp"] / (real["tp"] + real["fn"])
        real["f1"] = 2 * real["tp"] / (2 * real["tp"] + real["fp"] + real["fn"])
        real["roc_auc"] = roc_auc_score(y, p)
        for key, (low, high) in found["intervals"].items():
            hits[key] += low <= real[key] <= high
    for key, hit in hits.items():
        assert 0.9 <= hit / draws <= 0.99, (key, hit / draws)


def test_multiclass_by_enumeration_and_coverage() -> None:
    rng = np.random.default_rng(3)
    p = rng.dirichlet([1, 2, 3], size=6)
    labellings = np.array(list(itertools.product(range(3), repeat=6)))
    chance = np.prod(p[np.arange(6), labellings], axis=1)
    clipped = np.clip(p, 1e-15, 1.0)
    accuracy = np.array([(p.argmax(1) == y).mean() for y in labellings])
    losses = np.array([-np.log(clipped[np.arange(6), y]).mean() for y in labellings])
    briers = np.array([((p - np.eye(3)[y]) ** 2).sum(1).mean() for y in labellings])
    found = expected_multiclass(p)
    for key, values in (("accuracy", accuracy), ("log_loss", losses), ("brier", briers)):
        assert found[key] == pytest.approx(float(chance @ values), abs=1e-12), key
    # coverage on a larger batch
    q = rng.dirichlet([1, 2, 3], size=3_000)
    found = expected_multiclass(q)
    hits = dict.fromkeys(found["intervals"], 0)
    for _ in range(300):
        y = np.array([rng.choice(3, p=row) for row in q[:300]])  # cheap rows first
        y = np.concatenate([y, (rng.random((q.shape[0] - 300, 1)) > q[300:].cumsum(1)).sum(1)])
        real = {
            "accuracy": float((q.argmax(1) == y).mean()),
            "log_loss": float(log_loss(y, q, labels=[0, 1, 2])),
            "brier": float(((q - np.eye(3)[y]) ** 2).sum(1).mean()),
        }
        for key, (low, high) in found["intervals"].items():
            hits[key] += low <= real[key] <= high
    for key, hit in hits.items():
        assert 0.9 <= hit / 300 <= 0.99, (key, hit / 300)


def test_empty_and_one_sided_batches() -> None:
    empty = expected_binary(np.array([]))
    assert empty["accuracy"] is None
    assert empty["intervals"] == {}
    none_positive = expected_binary(np.array([0.1, 0.2, 0.3]), 0.5)
    assert none_positive["precision"] is None
    assert "precision" not in none_positive["intervals"]
    assert none_positive["accuracy"] == pytest.approx(0.8)


@pytest.mark.parametrize(("n", "a", "b"), [(50, 1.0, 3.0), (400, 0.3, 0.3), (30_000, 1.2, 3.0)])
def test_the_auc_band_is_the_spread_of_the_auc_of_labels_drawn_from_p(
    n: int, a: float, b: float
) -> None:
    """The delta method's band against the AUCs of label vectors drawn from the rows: it
    covers them, and its half-width is 1.96 times their standard deviation."""
    rng = np.random.default_rng(n)
    p = rng.beta(a, b, size=n)
    low, high = expected_binary(p)["intervals"]["roc_auc"]
    realized = []
    while len(realized) < 400:
        y = rng.random(p.size) < p
        if 0 < y.sum() < y.size:
            realized.append(roc_auc_score(y, p))
    inside = np.mean([low <= r <= high for r in realized])
    assert 0.9 <= inside <= 0.99
    assert (high - low) / 2 == pytest.approx(Z * float(np.std(realized)), rel=0.12)
