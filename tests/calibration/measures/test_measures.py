"""Calibration slope and intercept against statsmodels' GLM, Spiegelhalter's z against its
closed form, the debiased L2 calibration error against the uncertainty-calibration package
(Kumar et al.'s own), and frequency weights against replicated rows."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from calibration import utils as kumar  # the uncertainty-calibration package
from scipy.special import expit, logit
from scipy.stats import norm

from app.calibration.measures.clinical import (
    EPS,
    calibration_intercept,
    calibration_slope,
    ece_debiased,
    spiegelhalter,
)


def predictions(
    seed: int, n: int, slope: float = 1.0, shift: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """p = expit(z) for z ~ N(0, 1.5), labels drawn from expit(slope z + shift)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=1.5, size=n)
    y = (rng.random(n) < expit(slope * z + shift)).astype(np.float64)
    return expit(z), y


@pytest.mark.parametrize(
    ("slope", "shift"), [(1.0, 0.0), (0.5, 0.3), (2.0, -0.7), (1.0, 6.0), (1.0, -6.0)]
)
def test_slope_and_intercept_equal_statsmodels(slope: float, shift: float) -> None:
    p, y = predictions(1, 3000, slope, shift)
    z = logit(np.clip(p, EPS, 1 - EPS))
    glm = sm.GLM(y, sm.add_constant(z), family=sm.families.Binomial()).fit(tol=1e-14)
    assert calibration_slope(p, y) == pytest.approx(glm.params[1], abs=1e-8)
    citl = sm.GLM(y, np.ones((y.size, 1)), family=sm.families.Binomial(), offset=z).fit(tol=1e-14)
    assert calibration_intercept(p, y) == pytest.approx(citl.params[0], abs=1e-8)


def test_one_class_of_positive_weight_has_no_line() -> None:
    """Every negative weighs 0: one class, so no slope and no intercept (hypothesis found
    weights whose dot product with the labels rounded below their sum, and the slope then
    looked for the least negative of none)."""
    w = np.array([0.0, 2.4664627220906783, 7.428045600666894, 0.0, 7.212089544707162])
    w = np.concatenate([w, [3.321754648046626, 0.0, 9.90699211810189, 2.6110510968048213]])
    y = np.array([0, 1, 1, 1, 1, 1, 0, 1, 1], dtype=np.float64)
    p = np.array([0.9018, 0.4333, 0.9570, 0.7807, 0.9950, 0.5456, 0.7622, 0.3220, 0.5143])
    assert calibration_slope(p, y, w) is None
    assert calibration_intercept(p, y, w) is None


def test_frequency_weights_count_as_copies() -> None:
    p, y = predictions(2, 400, 0.7, 0.2)
    w = np.random.default_rng(3).integers(0, 4, size=p.size).astype(np.float64)
    copies = np.repeat(np.arange(p.size), w.astype(int))
    for measure in (calibration_slope, calibration_intercept):
        assert measure(p, y, w) == pytest.approx(measure(p[copies], y[copies]), abs=1e-9)
    # Spiegelhalter's z: the weighted sum over its own standard deviation, in any unit
    weighted, scaled = spiegelhalter(p, y, w), spiegelhalter(p, y, 1e-3 * w)
    assert weighted is not None
    assert scaled is not None
    assert weighted.z == pytest.approx(scaled.z, rel=1e-12)
    spread = 1 - 2 * p
    expected = np.sum(w * (y - p) * spread) / np.sqrt(np.sum(w**2 * spread**2 * p * (1 - p)))
    assert weighted.z == pytest.approx(expected, rel=1e-12)
    equal = spiegelhalter(p, y, np.full(p.size, 3.0))
    assert equal is not None
    assert equal.z == pytest.approx(spiegelhalter(p, y).z, rel=1e-12)  # type: ignore[union-attr]


@pytest.mark.parametrize("n", [2000, 200_000])  # one block of rows, and several
def test_spiegelhalter_equals_its_closed_form(n: int) -> None:
    p, y = predictions(4, n, 1.3, 0.1)
    test = spiegelhalter(p, y)
    assert test is not None
    z = np.sum((y - p) * (1 - 2 * p)) / np.sqrt(np.sum((1 - 2 * p) ** 2 * p * (1 - p)))
    assert test.z == pytest.approx(z, rel=1e-12)
    assert test.p_value == pytest.approx(2 * (1 - norm.cdf(abs(z))), rel=1e-9)
    w = np.random.default_rng(5).uniform(0.1, 4.0, n)
    weighted = spiegelhalter(p, y, w)
    assert weighted is not None
    spread = 1 - 2 * p
    expected = np.sum(w * (y - p) * spread) / np.sqrt(np.sum(w**2 * spread**2 * p * (1 - p)))
    assert weighted.z == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("seed", "n", "n_bins"), [(5, 1000, 15), (6, 5000, 15), (7, 300, 10), (8, 40, 15)]
)
def test_ece_debiased_equals_the_uncertainty_calibration_package(
    seed: int, n: int, n_bins: int
) -> None:
    p, y = predictions(seed, n, 1.4, -0.2)
    reference = kumar.lower_bound_scaling_ce(
        p, y.astype(int), p=2, debias=True, num_bins=n_bins, binning_scheme=kumar.get_equal_bins
    )
    assert ece_debiased(p, y, n_bins) == pytest.approx(reference, abs=1e-12)


def test_ece_debiased_on_tied_scores_equals_the_package() -> None:
    p, y = predictions(9, 2000, 1.4, -0.2)
    p = np.round(p, 1)  # few distinct scores: bins merge
    reference = kumar.lower_bound_scaling_ce(
        p, y.astype(int), p=2, debias=True, num_bins=15, binning_scheme=kumar.get_equal_bins
    )
    assert ece_debiased(p, y) == pytest.approx(reference, abs=1e-12)


def test_undefined_measures_are_none() -> None:
    p = np.array([0.2, 0.4, 0.6, 0.8])
    assert calibration_slope(p, np.zeros(4)) is None  # one class
    assert calibration_intercept(p, np.ones(4)) is None
    assert calibration_slope(p, np.array([0.0, 0.0, 1.0, 1.0])) is None  # separated
    assert calibration_slope(np.full(4, 0.3), np.array([0.0, 1.0, 0.0, 1.0])) is None
    assert spiegelhalter(np.array([0.0, 0.5, 1.0]), np.array([0.0, 1.0, 1.0])) is None
    overlapping = np.array([0.0, 1.0, 0.0, 1.0])
    assert calibration_slope(p, overlapping) is not None
