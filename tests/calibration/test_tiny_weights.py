"""Weights of any finite size: subnormal, mixed with ordinary ones, or near 1e308.

Weights are relative (:func:`~app.calibration.kernels.weights.relative_weights`): every method and
measure gives the same answer for weights times any constant, except where a definition adds
pseudo-counts to weighted counts (Platt's targets, binning's Laplace smoothing), whose limits
are tested here too. Every warning is an error in this module, so "no RuntimeWarning" is proved
by the tests passing, not only "no NaN".
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from app.calibration import (
    METHODS,
    FitOutcome,
    HistogramBinning,
    PlattCalibrator,
    fit_calibrator,
)
from app.calibration.kernels.bounds import effective_size
from app.calibration.kernels.crossval import check_training_weight
from app.calibration.kernels.weights import relative_weights, unit_weight
from app.calibration.measures.diagnostics import headline, reliability_report
from app.calibration.measures.reliability import reliability_bins
from app.calibration.methods.registry import BINARY_ONLY, MULTICLASS_ONLY

pytestmark = pytest.mark.filterwarnings("error")

N = 40
BINARY = [m for m in METHODS if m not in MULTICLASS_ONLY]
MULTICLASS = [m for m in METHODS if m not in BINARY_ONLY]
CASES = [(m, False) for m in BINARY] + [(m, True) for m in MULTICLASS]


def _batch(matrix: bool) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Probabilities (so every method can fit): a vector with 0/1 labels, or 3 columns."""
    rng = np.random.default_rng(11)
    if matrix:
        p = rng.dirichlet(np.ones(3), N)
        y = (rng.random(N)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
        y[:3] = [0, 1, 2]
        return p, y.astype(np.float64)
    f = rng.uniform(0.02, 0.98, N)
    y = (rng.random(N) < f**1.5).astype(np.float64)
    y[:2] = [0.0, 1.0]
    return f, y


def _ordinary_weights() -> NDArray[np.float64]:
    w = np.random.default_rng(12).uniform(0.1, 3.0, N)
    w[[5, 17]] = 0.0
    return w


def _patterns() -> dict[str, NDArray[np.float64]]:
    single = np.full(N, 1e-320)
    single[7] = 1.0  # one ordinary weight: its fold's training part is all subnormal
    return {
        "subnormal": np.full(N, 1e-310),
        "smallest": np.full(N, 5e-324),
        "mixed": np.where(np.arange(N) % 3 == 0, 1.0, 1e-320),
        "single": single,
        "sum_overflows": np.full(N, 1e308),
    }


def _fit(
    method: str, matrix: bool, w: NDArray[np.float64] | None, params: Mapping[str, object]
) -> FitOutcome:
    s, y = _batch(matrix)
    labels = y.astype(np.int64) if matrix else y
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every category, from any module (scipy's too)
        return fit_calibrator(method, params, s, labels, w)


def _finite_numbers(value: object) -> bool:
    """Every number in a JSON-like value is finite."""
    if isinstance(value, Mapping):
        return all(_finite_numbers(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite_numbers(v) for v in value)
    if isinstance(value, float):
        return bool(np.isfinite(value))
    return True


@pytest.mark.parametrize("pattern", list(_patterns()))
@pytest.mark.parametrize(("method", "matrix"), CASES)
def test_no_nan_and_no_warning(method: str, matrix: bool, pattern: str) -> None:
    w = _patterns()[pattern]
    outcome = _fit(method, matrix, w, {})
    s, y = _batch(matrix)
    for p in (outcome.out_of_fold, outcome.calibrator.predict(s)):
        assert np.all((p >= 0.0) & (p <= 1.0))  # NaN fails too
    assert _finite_numbers(outcome.calibrator.state())
    assert _finite_numbers(outcome.selection)
    labels = y.astype(np.int64)
    assert _finite_numbers(headline(outcome.out_of_fold, labels, w))
    report = reliability_report(outcome.out_of_fold, labels, w, n_bins=10, strategy="quantile")
    assert _finite_numbers(report.as_json())


# Scale-invariant configurations: the fit on c * w is the fit on w. Platt needs hard targets
# and binning no Laplace smoothing; auto without Platt among its candidates.
INVARIANT = [
    ("platt", {"targets": "hard"}),
    ("platt", {"targets": "hard", "bound": "laplace"}),
    ("isotonic", {}),
    ("isotonic", {"trim": "trainset", "bound": "laplace"}),
    ("logistic_correction", {}),
    ("beta", {}),
    ("beta", {"bound": "laplace"}),
    ("histogram_binning", {}),
    ("histogram_binning", {"n_bins": "cv"}),
    ("minmax", {}),
    ("venn_abers", {}),
    ("venn_abers", {"mode": "cross"}),
    ("temperature", {"bound": "laplace"}),
    ("bostrom", {}),
    ("auto", {"candidates": ["temperature", "bostrom", "beta", "venn_abers", "isotonic"]}),
]
INVARIANT_CASES = [
    (method, params, matrix)
    for method, params in INVARIANT
    for matrix in (False, True)
    if method not in (MULTICLASS_ONLY if not matrix else BINARY_ONLY)
]
# Temperature's bounded Brent search stops within ~sqrt(eps) of a flat minimum, so its T moves
# by ~1e-8 when the loss's rounding does; every other fit agrees to rounding.
RTOL = {"temperature": 1e-7}


@pytest.mark.parametrize("c", [1e-300, 1e300])
@pytest.mark.parametrize(("method", "params", "matrix"), INVARIANT_CASES)
def test_scale_invariant_methods(
    method: str, params: dict[str, object], matrix: bool, c: float
) -> None:
    w = _ordinary_weights()
    reference, scaled = _fit(method, matrix, w, params), _fit(method, matrix, c * w, params)
    s, y = _batch(matrix)
    rtol = RTOL.get(method, 1e-9)
    np.testing.assert_allclose(scaled.out_of_fold, reference.out_of_fold, rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(
        scaled.calibrator.predict(s), reference.calibrator.predict(s), rtol=rtol, atol=1e-12
    )
    labels = y.astype(np.int64)
    expected, got = (
        headline(reference.out_of_fold, labels, w),
        headline(scaled.out_of_fold, labels, c * w),
    )
    for key, value in expected.items():
        if value is None:
            assert got[key] is None
        else:
            np.testing.assert_allclose(got[key], value, rtol=1e-6, atol=1e-12)
    if method == "auto":
        assert scaled.selection is not None
        assert reference.selection is not None
        assert scaled.selection["chosen"] == reference.selection["chosen"]


@pytest.mark.parametrize(("method", "params", "matrix"), INVARIANT_CASES)
def test_equal_subnormal_weights_are_unit_weights(
    method: str, params: dict[str, object], matrix: bool
) -> None:
    unweighted = _fit(method, matrix, None, params)
    for tiny in (1e-310, 5e-324):
        weighted = _fit(method, matrix, np.full(N, tiny), params)
        # to the solvers' tolerances: 1e-310 is not a power of two, so the rescaled weights
        # differ from unit weights by an ulp
        rtol = RTOL.get(method, 1e-9)
        np.testing.assert_allclose(weighted.out_of_fold, unweighted.out_of_fold, rtol=rtol)


# --- the two definitions that count weights in the caller's units ---------------------------


def test_platt_targets_tend_to_one_half_and_to_hard_targets() -> None:
    w = _ordinary_weights()
    s, y = _batch(False)
    # (N+ + 1) / (N+ + 2) and 1 / (N- + 2) with N+, N- ~ 1e-299: every target 1/2, p = 1/2
    tiny = PlattCalibrator().fit(s, y, 1e-300 * w)
    assert (tiny.A, tiny.B) == (0.0, 0.0)
    np.testing.assert_array_equal(tiny.predict(s), 0.5)
    # with N+, N- ~ 1e301 they are 1 and ~1e-302: the hard targets' fit
    huge = PlattCalibrator().fit(s, y, 1e300 * w)
    hard = PlattCalibrator(targets="hard").fit(s, y, w)
    np.testing.assert_allclose(huge.predict(s), hard.predict(s), rtol=1e-12)
    # ordinary weights sit in between: a different fit
    assert not np.allclose(PlattCalibrator().fit(s, y, w).predict(s), hard.predict(s))


def test_laplace_smoothing_tends_to_one_half_and_to_no_smoothing() -> None:
    w = _ordinary_weights()
    s, y = _batch(False)
    tiny = HistogramBinning(smoothing="laplace").fit(s, y, 1e-300 * w)
    np.testing.assert_array_equal(tiny.values, 0.5)
    huge = HistogramBinning(smoothing="laplace").fit(s, y, 1e300 * w)
    plain = HistogramBinning().fit(s, y, w)
    np.testing.assert_array_equal(huge.edges, plain.edges)
    # (pos + 1) / (n + 2) with n ~ 1e301: pos / n, and ~1e-301 where pos is 0
    np.testing.assert_allclose(huge.values, plain.values, rtol=1e-12, atol=1e-299)


# --- the pieces ------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    w=st.lists(st.floats(0.0, 1.7e308, allow_subnormal=True), min_size=1, max_size=30).filter(
        lambda v: max(v) > 0
    )
)
def test_relative_weights_are_exact_and_at_most_one(w: list[float]) -> None:
    weights = np.array(w)
    relative, exponent = relative_weights(weights)
    assert 0.5 <= relative.max() < 1.0
    back = np.ldexp(relative, exponent)
    # exact, but for weights so far below the largest that they become subnormal: those are
    # rounded to the subnormal spacing 2^-1074, times 2^e in the caller's units
    normal = relative >= np.finfo(np.float64).tiny
    np.testing.assert_array_equal(back[normal], weights[normal])
    assert np.all(np.abs(back - weights) <= math.ldexp(1.0, exponent - 1075))
    assert unit_weight(exponent) == 2.0 ** min(-exponent, 1000)


@settings(max_examples=60, deadline=None)
@given(
    w=st.lists(st.one_of(st.just(0.0), st.floats(0.01, 10.0)), min_size=4, max_size=40).filter(
        lambda v: sum(x > 0 for x in v) >= 2
    ),
    exponent=st.integers(-1000, 1000),
    seed=st.integers(0, 2**16),
)
def test_measures_are_the_same_for_weights_times_a_power_of_two(
    w: list[float], exponent: int, seed: int
) -> None:
    # Weights of ordinary size times 2^k (no underflow): the same measures, bit for bit, and
    # bin weights reported times 2^k.
    rng = np.random.default_rng(seed)
    weights = np.array(w)
    p = rng.uniform(0.0, 1.0, weights.size)
    y = (rng.random(weights.size) < p).astype(np.int64)
    scaled = np.ldexp(weights, exponent)
    assert headline(p, y, scaled) == headline(p, y, weights)
    assert effective_size(scaled) == effective_size(weights)
    for strategy in ("uniform", "quantile"):
        plain = reliability_report(p, y, weights, n_bins=5, strategy=strategy).as_json()
        times = reliability_report(p, y, scaled, n_bins=5, strategy=strategy).as_json()
        assert times["metrics"] == plain["metrics"]
        for a, b in zip(times["bins"], plain["bins"], strict=True):
            assert a["weight"] == np.ldexp(b["weight"], exponent)
            assert {k: v for k, v in a.items() if k != "weight"} == {
                k: v for k, v in b.items() if k != "weight"
            }


def test_a_bin_of_subnormal_weights_keeps_its_digits() -> None:
    # bins 0.0-0.5 weigh 1 per point, bin 0.9-1.0 1e-320: its statistics are its own weighted
    # means, which w p in subnormal arithmetic would round to ~3 digits
    p = np.array([0.05, 0.15, 0.25, 0.35, 0.45, 0.91, 0.93, 0.97])
    y = np.array([0, 0, 1, 0, 1, 1, 0, 1], dtype=np.float64)
    w = np.array([1.0] * 5 + [1e-320, 3e-320, 2e-320])
    last = reliability_bins(p, y, 10, "uniform", w)[-1]
    ratio = np.array([1.0, 3.0, 2.0])
    assert last.mean_predicted == pytest.approx(ratio @ p[5:] / 6.0, rel=1e-15)
    assert last.fraction_positive == pytest.approx(3.0 / 6.0, rel=1e-15)
    assert last.weight == 6e-320
    # Kish's size of weights 1:3:2 is 36 / 14
    reference = reliability_bins(p[5:], y[5:], 10, "uniform", ratio)[-1]
    assert (last.ci_low, last.ci_high) == pytest.approx((reference.ci_low, reference.ci_high))


def test_kish_size_of_weights_whose_sum_overflows() -> None:
    assert effective_size(np.full(40, 1e308)) == pytest.approx(40.0, rel=1e-15)
    assert effective_size(np.full(40, 5e-324)) == 40.0  # a power of two: exactly
    assert effective_size(np.array([1.0, 1.0, 1e-320])) == pytest.approx(2.0, rel=1e-15)


def test_training_weight_is_counted_not_summed() -> None:
    # the fold holding the one weight of 1 leaves only weights of 1e-320 to train on: positive,
    # though 1 + 1e-320 - 1 is 0 in float64
    w = np.array([1.0, 1e-320, 1e-320, 1e-320])
    assert check_training_weight(w, np.array([0, 1, 0, 1])) == 2
    with pytest.raises(ValueError, match="sample_weight"):
        check_training_weight(np.array([1.0, 0.0, 0.0, 0.0]), np.array([0, 1, 0, 1]))
