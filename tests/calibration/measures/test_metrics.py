"""Metrics against scikit-learn and against direct, loop-based reference computations."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, roc_auc_score
from sklearn.metrics import log_loss as sk_log_loss

from app.calibration import CalibrationError
from app.calibration.measures.auc import roc_auc, roc_auc_checked
from app.calibration.measures.metrics import (
    brier_score,
    expected_calibration_error,
    headline_metrics,
    log_loss,
    maximum_calibration_error,
    murphy_decomposition,
    scale_raw_scores,
    summarize,
)
from app.calibration.measures.reliability import WILSON_Z, reliability_bins, reliability_table
from tests.calibration.batches import random_weights


def _batch(seed: int, n: int = 2000, *, weighted: bool = False) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    p = rng.beta(0.7, 1.2, size=n)
    p[rng.random(n) < 0.1] = np.round(p[:1], 1)[0]  # some exact ties
    y = (rng.random(n) < p**1.3).astype(np.float64)
    y[:2] = [0.0, 1.0]
    w = random_weights(rng, n) if weighted else np.ones(n)
    return p, y, w


def _uniform_bin_masks(p: np.ndarray, n_bins: int) -> list[np.ndarray]:
    """Membership of each uniform bin; a p on an inner edge belongs to the bin below (sklearn)."""
    edges = np.linspace(0, 1, n_bins + 1)
    masks = []
    for k in range(n_bins):
        lower = -np.inf if k == 0 else edges[k]
        upper = np.inf if k == n_bins - 1 else edges[k + 1]
        masks.append((p > lower) & (p <= upper))
    return masks


@pytest.mark.parametrize("weighted", [False, True])
def test_scores_match_sklearn(weighted: bool) -> None:
    p, y, w = _batch(1, weighted=weighted)
    sw = w if weighted else None
    p[:3] = [0.0, 1.0, 1e-17]  # exercise the log loss clipping
    assert brier_score(p, y, sw) == pytest.approx(brier_score_loss(y, p, sample_weight=sw))
    assert log_loss(p, y, sw) == pytest.approx(sk_log_loss(y, p, sample_weight=sw), rel=1e-12)
    # rounded scores: many ties, counted half
    rounded = np.round(p, 1)
    assert roc_auc(rounded, y, sw) == pytest.approx(roc_auc_score(y, rounded, sample_weight=sw))
    assert roc_auc(p, y, sw) == pytest.approx(roc_auc_score(y, p, sample_weight=sw))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("hint", ["runs", "shuffled"])
def test_the_auc_is_the_same_with_a_hint_of_runs(weighted: bool, hint: str) -> None:
    """A permutation along which the scores come in sorted runs (a fit's out-of-fold
    predictions by fold) only changes how the AUC sorts; any other permutation is as good."""
    rng = np.random.default_rng(11)
    n, folds = 5_000, 5
    p = np.round(rng.random(n), 2)  # ties within and across the runs
    y = (rng.random(n) < p).astype(np.float64)
    w = rng.uniform(0.5, 2.0, n) if weighted else np.ones(n)
    fold = rng.integers(0, folds, n)
    runs = np.lexsort((p, fold)) if hint == "runs" else rng.permutation(n)
    assert roc_auc_checked(p, y != 0.0, w, runs) == pytest.approx(
        roc_auc_checked(p, y != 0.0, w), rel=1e-12
    )
    assert roc_auc_checked(p, y != 0.0, w, runs) == pytest.approx(
        roc_auc_score(y, p, sample_weight=w), rel=1e-12
    )


def test_auc_is_none_for_a_single_class() -> None:
    assert roc_auc(np.array([0.1, 0.2]), np.array([1.0, 1.0])) is None
    # a class present only with zero weight counts as absent
    assert roc_auc(np.array([0.1, 0.2]), np.array([0.0, 1.0]), np.array([1.0, 0.0])) is None


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("n_bins", [2, 5, 10, 37])
def test_bins_match_calibration_curve(strategy: str, n_bins: int) -> None:
    p, y, _ = _batch(n_bins)
    bins = reliability_bins(p, y, n_bins, strategy)
    assert len(bins) == n_bins
    prob_true, prob_pred = calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
    filled = [b for b in bins if b.count > 0]
    np.testing.assert_allclose([b.fraction_positive for b in filled], prob_true, rtol=1e-12)
    np.testing.assert_allclose([b.mean_predicted for b in filled], prob_pred, rtol=1e-12)
    assert sum(b.count for b in bins) == p.size
    edges = [bins[0].lower, *(b.upper for b in bins)]
    expected = (
        np.linspace(0, 1, n_bins + 1)
        if strategy == "uniform"
        else np.percentile(p, np.linspace(0, 1, n_bins + 1) * 100)
    )
    np.testing.assert_array_equal(edges, expected)


@pytest.mark.parametrize("n_bins", [3, 6, 12, 15])
def test_quantile_bins_match_calibration_curve_when_edges_fall_on_points(n_bins: int) -> None:
    # 61 points: 60 / n_bins is whole, so each inner quantile edge lands on a data point, where
    # the two ways of writing the percentiles disagree by an ulp and move it across the edge
    for seed in range(40):
        rng = np.random.default_rng(seed)
        p = rng.uniform(size=61)
        y = (rng.random(61) < p).astype(np.float64)
        bins = reliability_bins(p, y, n_bins, "quantile")
        prob_true, prob_pred = calibration_curve(y, p, n_bins=n_bins, strategy="quantile")
        filled = [b for b in bins if b.count > 0]
        np.testing.assert_allclose([b.fraction_positive for b in filled], prob_true, rtol=1e-12)
        np.testing.assert_allclose([b.mean_predicted for b in filled], prob_pred, rtol=1e-12)


def test_empty_bins_are_reported_with_nulls() -> None:
    p = np.array([0.05, 0.07, 0.95])
    y = np.array([0.0, 1.0, 1.0])
    bins = reliability_bins(p, y, 10)
    assert [b.count for b in bins] == [2, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    empty = bins[4].as_dict()
    assert empty == {
        "lower": 0.4,
        "upper": 0.5,
        "count": 0,
        "weight": 0.0,
        "mean_predicted": None,
        "fraction_positive": None,
        "ci_low": None,
        "ci_high": None,
    }


@pytest.mark.parametrize("weighted", [False, True])
def test_wilson_interval_closed_form(weighted: bool) -> None:
    p, y, w = _batch(4, n=500, weighted=weighted)
    bins = reliability_bins(p, y, 10, "uniform", w)
    for b, in_bin in zip(bins, _uniform_bin_masks(p, 10), strict=True):
        if b.fraction_positive is None:
            continue
        wk = w[in_bin]
        n = wk.sum() ** 2 / (wk**2).sum()  # Kish: the count when unweighted
        if not weighted:
            assert n == pytest.approx(in_bin.sum())
        phat = (wk @ y[in_bin]) / wk.sum()
        z = WILSON_Z
        centre = (phat + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n))
        assert b.fraction_positive == pytest.approx(phat)
        assert b.ci_low == pytest.approx(max(0.0, centre - half))
        assert b.ci_high == pytest.approx(min(1.0, centre + half))
        assert b.ci_low <= b.fraction_positive <= b.ci_high


@pytest.mark.parametrize("weighted", [False, True])
def test_ece_and_mce_against_a_reference_loop(weighted: bool) -> None:
    p, y, w = _batch(5, weighted=weighted)
    ece, mce = 0.0, 0.0
    for in_bin in _uniform_bin_masks(p, 10):  # the reference: one bin at a time
        if w[in_bin].sum() == 0:
            continue
        gap = abs(
            np.average(y[in_bin], weights=w[in_bin]) - np.average(p[in_bin], weights=w[in_bin])
        )
        ece += w[in_bin].sum() / w.sum() * gap
        mce = max(mce, gap)
    bins = reliability_table(p, y, 10, "uniform", w)
    assert expected_calibration_error(bins) == pytest.approx(ece, rel=1e-12)
    assert maximum_calibration_error(bins) == pytest.approx(mce, rel=1e-12)


@pytest.mark.parametrize("scale", [1e-300, 1e300, 1e308, np.finfo(np.float64).max])
def test_binned_measures_do_not_move_with_the_weights_unit(scale: float) -> None:
    """The ECE, MCE and Murphy's terms are the same for the weights times any constant, also
    where a bin's weight in the caller's units overflows (50 weights of 1e308: the reported
    weight is capped at the largest float, and the measures once read it, weighing the bins
    equally; a hostile client found it)."""
    p, y, w = _batch(8, 500, weighted=True)
    unit, scaled = summarize(p, y, w).metrics, summarize(p, y, w * (scale / w.max())).metrics
    for name in ("ece", "mce", "reliability", "resolution", "uncertainty", "brier", "log_loss"):
        assert scaled[name] == pytest.approx(unit[name], rel=1e-12), name


@pytest.mark.parametrize("weighted", [False, True])
def test_murphy_decomposition_is_exact_for_binned_predictions(weighted: bool) -> None:
    rng = np.random.default_rng(6)
    p = rng.choice([0.05, 0.23, 0.5, 0.61, 0.97], size=3000)  # constant within each bin
    y = (rng.random(3000) < p).astype(np.float64)
    w = random_weights(rng, 3000) if weighted else np.ones(3000)
    bins = reliability_table(p, y, 10, "uniform", w)
    reliability, resolution, uncertainty = murphy_decomposition(bins, float(w @ y / w.sum()))
    assert reliability - resolution + uncertainty == pytest.approx(brier_score(p, y, w), rel=1e-12)
    # with spread within bins the identity no longer holds exactly
    q, z, _ = _batch(7)
    rel, res, unc = murphy_decomposition(reliability_table(q, z), float(z.mean()))
    assert rel - res + unc != pytest.approx(brier_score(q, z), rel=1e-6)


def test_summarize_is_json_ready() -> None:
    p, y, w = _batch(8, weighted=True)
    summary = summarize(p, y, w, n_bins=12, strategy="quantile").as_json()
    assert len(summary["bins"]) == 12
    metrics = summary["metrics"]
    assert set(metrics) == {
        "brier",
        "log_loss",
        "ece",
        "mce",
        "auc",
        "reliability",
        "resolution",
        "uncertainty",
    }
    assert all(type(value) is float for value in metrics.values())
    assert all(
        type(value) in (float, int) or value is None
        for b in summary["bins"]
        for value in b.values()
    )
    headline = headline_metrics(p, y, w)
    assert set(headline) == {"brier", "log_loss", "ece", "auc"}
    assert headline["ece"] == expected_calibration_error(reliability_table(p, y, 10, "uniform", w))
    assert summarize(p, np.ones_like(y)).metrics["auc"] is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"n_bins": 1}, "n_bins"),
        ({"n_bins": 101}, "n_bins"),
        ({"n_bins": 10.0}, "n_bins"),
        ({"strategy": "kmeans"}, "strategy"),
    ],
)
def test_bad_bin_settings_name_the_field(kwargs: dict[str, object], field: str) -> None:
    p, y, _ = _batch(9, n=50)
    with pytest.raises(CalibrationError, match=rf"^{field}: "):
        reliability_bins(p, y, **kwargs)  # type: ignore[arg-type]


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(CalibrationError, match=r"^probabilities: must lie in \[0, 1\]"):
        brier_score(np.array([0.5, 1.5]), np.array([0.0, 1.0]))
    with pytest.raises(CalibrationError, match=r"^labels\[1\]: must be 0 or 1$"):
        log_loss(np.array([0.5, 0.5]), np.array([0.0, 2.0]))
    with pytest.raises(CalibrationError, match=r"^sample_weight: the weights must have a positive"):
        roc_auc(np.array([0.5, 0.5]), np.array([0.0, 1.0]), np.zeros(2))


def test_scale_raw_scores() -> None:
    probabilities = np.array([0.0, 0.3, 1.0])
    assert scale_raw_scores(probabilities) is probabilities  # unchanged
    np.testing.assert_allclose(scale_raw_scores(np.array([-2.0, 0.0, 2.0])), [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(scale_raw_scores(np.array([3.0, 3.0])), [0.5, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        huge = scale_raw_scores(np.array([-1.7e308, 0.0, 1.7e308]))
    np.testing.assert_allclose(huge, [0.0, 0.5, 1.0])
