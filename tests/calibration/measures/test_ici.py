"""The integrated calibration index against statsmodels' LOWESS (lowess(y, p, frac=0.75,
it=0), as docs/methods.md defines the ICI), frequency weights against replicated rows."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.nonparametric.smoothers_lowess import lowess

from app.calibration.measures.ici import ici


def reference(p: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    smoothed = lowess(y, p, frac=0.75, it=0, delta=0.0, return_sorted=False)
    distance = np.abs(p - smoothed)
    e50, e90 = np.quantile(distance, [0.5, 0.9])
    return float(distance.mean()), float(e50), float(e90), float(distance.max())


def batch(seed: int, n: int, power: float, a: float = 2.0, b: float = 5.0):
    rng = np.random.default_rng(seed)
    p = rng.beta(a, b, n)
    return p, (rng.random(n) < p**power).astype(np.float64)


@pytest.mark.parametrize(
    ("seed", "n", "power", "a", "b"),
    [
        (1, 3, 1.0, 2.0, 5.0),
        (2, 40, 1.5, 2.0, 5.0),
        (3, 500, 1.3, 0.5, 0.5),
        (4, 3000, 0.7, 2.0, 5.0),
        (5, 20000, 1.0, 5.0, 2.0),
    ],
)
def test_ici_and_quantiles_equal_statsmodels_lowess(
    seed: int, n: int, power: float, a: float, b: float
) -> None:
    p, y = batch(seed, n, power, a, b)
    result, expected = ici(p, y), reference(p, y)  # LOWESS at 20000 rows takes seconds: once
    assert result is not None
    np.testing.assert_allclose(tuple(result), expected, rtol=0, atol=1e-4)
    assert result.ici == pytest.approx(expected[0], abs=1e-6)  # measured: 1e-7 or less


def test_tied_scores_equal_statsmodels() -> None:
    p, y = batch(6, 4000, 1.4)
    rounded = np.round(p, 2)  # a few dozen distinct scores: the fit at each, exact
    result = ici(rounded, y)
    assert result is not None
    np.testing.assert_allclose(tuple(result), reference(rounded, y), rtol=0, atol=1e-4)


def test_integer_weights_count_as_copies() -> None:
    p, y = batch(7, 600, 1.3)
    w = np.random.default_rng(8).integers(0, 4, p.size).astype(np.float64)
    copies = np.repeat(np.arange(p.size), w.astype(int))
    weighted, replicated = ici(p, y, w), ici(p[copies], y[copies])
    assert weighted is not None
    assert replicated is not None
    assert weighted.ici == pytest.approx(replicated.ici, abs=1e-6)
    assert weighted.emax == pytest.approx(replicated.emax, abs=1e-6)
    distance = np.abs(
        p[copies] - lowess(y[copies], p[copies], frac=0.75, it=0, return_sorted=False)
    )
    assert weighted.e90 == pytest.approx(
        np.quantile(distance, 0.9, method="inverted_cdf"), abs=1e-4
    )


def test_a_calibrated_model_has_a_small_ici_and_a_miscalibrated_one_does_not() -> None:
    calibrated, skewed = ici(*batch(9, 20000, 1.0)), ici(*batch(9, 20000, 2.0))
    assert calibrated is not None
    assert skewed is not None
    assert calibrated.ici < 0.01 < 0.05 < skewed.ici


def test_undefined_without_three_rows_or_two_distinct_scores() -> None:
    assert ici(np.array([0.2, 0.4]), np.array([0.0, 1.0])) is None
    assert ici(np.full(10, 0.3), np.arange(10) % 2.0) is None
    assert ici(np.array([0.2, 0.4, 0.6]), np.array([0.0, 1.0, 1.0]), np.array([1, 1, 0.0])) is None


def test_a_score_holding_most_of_the_weight_gives_its_mean_label_there() -> None:
    """Where 75% of the rows tie the radius is 0: statsmodels answers one tied row's label,
    here their mean; elsewhere the fits agree, and nothing is NaN."""
    rng = np.random.default_rng(11)
    p = np.concatenate([np.full(8000, 0.5), rng.uniform(0, 1, 2000)])
    y = (rng.random(p.size) < p).astype(np.float64)
    result = ici(p, y)
    assert result is not None
    assert np.all(np.isfinite(tuple(result)))
    with np.errstate(invalid="ignore"):  # statsmodels divides 0 by 0 at the tied score
        smoothed = lowess(y, p, frac=0.75, it=0, delta=0.0, return_sorted=False)
    tied = p == 0.5
    smoothed[tied] = y[tied].mean()
    assert result.ici == pytest.approx(np.abs(p - smoothed).mean(), abs=1e-4)


def test_many_tied_scores_equal_statsmodels_and_the_weighted_path() -> None:
    """Over MAX_CELLS distinct scores with ties among them (isotonic predictions look so): the
    equal-weight path, which sorts each class and merges the two, gives statsmodels' numbers
    and, to rounding, those of explicit weights of 1, which sort by one argsort."""
    p, y = batch(9, 6000, 1.2)
    rounded = np.round(p, 4)
    assert 1024 < np.unique(rounded).size < rounded.size
    equal, ones = ici(rounded, y), ici(rounded, y, np.ones(rounded.size))
    assert equal is not None
    assert ones is not None
    np.testing.assert_allclose(tuple(equal), reference(rounded, y), rtol=0, atol=1e-4)
    np.testing.assert_allclose(tuple(equal), tuple(ones), rtol=1e-9, atol=1e-12)
