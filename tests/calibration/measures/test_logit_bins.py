"""Probabilities counted in log-odds bins (app/calibration/measures/logit_bins.py) against the
rows themselves: scikit-learn's AUC within the slack the bins claim, the pairwise expected
AUC, sums that add up chunk by chunk as in one go."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from app.calibration.measures.expected import (
    BinarySums,
    ClassSums,
    expected_binary,
    expected_roc_auc,
)
from app.calibration.measures.logit_bins import LOGIT_BINS, ProbabilityBins, logit_bin


def _model(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = 1 / (1 + np.exp(-rng.normal(-2.0, 1.5, n)))
    return p, (rng.random(n) < p).astype(float)


def test_bins_are_monotone_in_p_and_cover_the_ends() -> None:
    p = np.concatenate([[0.0, 1e-300, 1e-9, 0.5, 1 - 1e-9, 1.0], np.linspace(0, 1, 1001)])
    which = logit_bin(np.sort(p))
    assert np.all(np.diff(which) >= 0)
    assert which.min() == 0
    assert which.max() == LOGIT_BINS - 1
    assert logit_bin(np.array([0.001]))[0] != logit_bin(np.array([0.0011]))[0]  # kept apart


def test_realized_auc_is_scikit_learns_within_the_slack() -> None:
    p, y = _model(20_000, 1)
    bins = ProbabilityBins()
    bins.add_labelled(p, y)
    slack = bins.auc_slack()
    assert slack is not None
    assert slack < 2e-3
    assert abs(bins.realized_auc() - roc_auc_score(y, p)) <= slack  # type: ignore[operator]


def test_tied_probabilities_lose_nothing() -> None:
    p = np.repeat([0.05, 0.2, 0.6, 0.9], 50)  # an isotonic calibrator's few values
    y = (np.random.default_rng(2).random(p.size) < p).astype(float)
    bins = ProbabilityBins()
    bins.add(p)
    bins.add_labelled(p, y)
    assert bins.realized_auc() == pytest.approx(roc_auc_score(y, p), abs=1e-12)
    assert bins.expected_auc() == pytest.approx(expected_roc_auc(p), abs=1e-12)
    auc = bins.expected_auc()
    assert auc is not None
    assert bins.expected_auc_band(auc) == pytest.approx(expected_binary(p)["intervals"]["roc_auc"])


def test_expected_auc_from_bins_is_the_rows_within_a_thousandth() -> None:
    p, _ = _model(5_000, 3)
    bins = ProbabilityBins()
    for chunk in np.array_split(p, 7):
        bins.add(chunk)
    exact = expected_roc_auc(p)
    assert exact is not None
    assert bins.expected_auc() == pytest.approx(exact, abs=1e-3)
    means, counts = bins.means()
    assert counts.sum() == p.size
    assert float(means @ counts) == pytest.approx(p.sum(), rel=1e-12)


def test_the_band_from_bins_is_the_rows_band() -> None:
    p, _ = _model(50_000, 4)
    bins = ProbabilityBins()
    bins.add(p)
    found = expected_binary(p)
    auc = bins.expected_auc()
    assert auc is not None
    low, high = bins.expected_auc_band(auc)
    rows_low, rows_high = found["intervals"]["roc_auc"]
    assert high - low == pytest.approx(rows_high - rows_low, rel=0.01)


def test_sums_add_up_chunk_by_chunk_as_in_one_go() -> None:
    p, _ = _model(3_000, 6)
    whole, parts = BinarySums(0.3), BinarySums(0.3)
    whole.add(p)
    for chunk in np.array_split(p, 11):
        parts.add(chunk)
    a, b = whole.estimate(0.7, (0.6, 0.8)), parts.estimate(0.7, (0.6, 0.8))
    for key, value in a.items():
        if key != "intervals":
            assert b[key] == pytest.approx(value, rel=1e-12), key
    for key, band in a["intervals"].items():
        assert b["intervals"][key] == pytest.approx(band, rel=1e-12), key
    P = np.random.default_rng(7).dirichlet([1, 2, 3], 1_000)
    one, many = ClassSums(), ClassSums()
    one.add(P)
    for chunk in np.array_split(P, 9):
        many.add(chunk)
    for key, band in one.estimate()["intervals"].items():
        assert many.estimate()["intervals"][key] == pytest.approx(band, rel=1e-12), key
        assert many.estimate()[key] == pytest.approx(one.estimate()[key], rel=1e-12), key
