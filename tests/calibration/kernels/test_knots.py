"""The bucket index answers exactly what numpy answers: ``searchsorted(knots, f, "right")``
and ``np.interp``, to the bit, on knots spread or clustered, on the knots themselves, the
floats beside them, far values, ties, infinities and NaN."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.calibration.kernels.knots import MAX_SHARED, MIN_SCORES, Knots, interp
from app.calibration.methods.isotonic import linear_is_monotone
from tests.calibration.batches import sigmoid_batch


def scores_around(knots: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """At least MIN_SCORES scores: the knots, their neighbouring floats, points between them,
    values outside, infinities, NaN, and repeats, shuffled."""
    parts = [
        knots,
        np.nextafter(knots, -np.inf),
        np.nextafter(knots, np.inf),
        knots[:-1] / 2 + knots[1:] / 2,
        rng.uniform(knots[0], knots[-1], size=MIN_SCORES),
        [knots[0] - 1.0, knots[-1] + 1.0, -1e308, 1e308, -np.inf, np.inf, np.nan, -0.0, 0.0],
    ]
    f = np.concatenate([np.asarray(p, dtype=np.float64) for p in parts])
    f = np.concatenate([f, f[::5]])
    return rng.permutation(f)


@st.composite
def knot_sets(draw: st.DrawFn) -> np.ndarray:
    """Strictly increasing finite knots: normal draws (crowded in the middle), a few far
    ones, rounded ones with ties removed, or adjacent floats."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    m = draw(st.integers(2, 3000))
    kind = draw(st.sampled_from(["normal", "far", "rounded", "adjacent", "tiny"]))
    x = rng.normal(size=m)
    if kind == "far":
        x[: max(1, m // 50)] *= 1e6
    elif kind == "rounded":
        x = np.round(x, 2)
    elif kind == "adjacent":
        x = np.concatenate([x, np.nextafter(x, np.inf)])
    elif kind == "tiny":
        x = x * 1e-300
    return np.unique(x)


@settings(max_examples=60, deadline=None)
@given(knots=knot_sets(), seed=st.integers(0, 2**32 - 1))
def test_count_at_most_equals_searchsorted(knots: np.ndarray, seed: int) -> None:
    f = scores_around(knots, np.random.default_rng(seed))
    index = Knots(knots)
    np.testing.assert_array_equal(index.count_at_most(f), np.searchsorted(knots, f, "right"))


@settings(max_examples=60, deadline=None)
@given(knots=knot_sets(), seed=st.integers(0, 2**32 - 1))
def test_interp_equals_numpy_to_the_bit(knots: np.ndarray, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = np.sort(rng.uniform(size=knots.size))
    values[rng.random(knots.size) < 0.3] = 0.5  # flat stretches
    values = np.maximum.accumulate(values)
    with np.errstate(over="ignore"):  # numpy's own slopes, written out here
        slopes = (values[1:] - values[:-1]) / (knots[1:] - knots[:-1])
    if not linear_is_monotone(knots, values, slopes):
        return  # isotonic predict interpolates its own way there
    f = scores_around(knots, rng)
    got = interp(Knots(knots), values, slopes, f)
    want = np.interp(f, knots, values)
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))  # bits, NaN too


def test_the_index_is_built_for_spread_knots_and_not_for_crowded_ones() -> None:
    spread = Knots(np.linspace(-3, 3, 500))
    assert spread.index(MIN_SCORES) is not None
    assert spread.index(MIN_SCORES - 1) is None  # few scores: searchsorted
    # more than MAX_SHARED knots within one 2^-16 of the range share a bucket
    crowded = np.concatenate([[0.0], 0.5 + np.arange(MAX_SHARED + 1) * 1e-12, [1.0]])
    assert Knots(crowded).index(MIN_SCORES) is None
    f = np.random.default_rng(0).uniform(-0.5, 1.5, MIN_SCORES)
    np.testing.assert_array_equal(
        Knots(crowded).count_at_most(f), np.searchsorted(crowded, f, "right")
    )
    # a range too wide for a finite width: searchsorted
    assert Knots(np.array([-1e308, 0.0, 1e308])).index(MIN_SCORES) is None


@pytest.mark.parametrize("m", [2, 3, 17, 4096, 20000])
def test_count_at_most_on_large_knot_sets(m: int) -> None:
    rng = np.random.default_rng(m)
    knots = np.unique(rng.standard_t(3, size=m))
    f = scores_around(knots, rng)
    index = Knots(knots)
    np.testing.assert_array_equal(index.count_at_most(f), np.searchsorted(knots, f, "right"))


@pytest.mark.parametrize("interpolation", ["linear", "step"])
def test_large_isotonic_predicts_equal_scikit_learn(interpolation: str) -> None:
    """Past MIN_SCORES predict takes the index: the same numbers as scikit-learn's
    IsotonicRegression (linear) and as the step rule written out with searchsorted."""
    from sklearn.isotonic import IsotonicRegression

    from app.calibration import make_calibrator

    rng = np.random.default_rng(9)
    f, y, _ = sigmoid_batch(rng, 5000)
    scores = np.concatenate([rng.normal(scale=2.0, size=20 * MIN_SCORES), f, [-1e300, 1e300]])
    ours = make_calibrator("isotonic", {"interpolation": interpolation}).fit(f, y, np.ones(f.size))
    assert ours._prepared().knots.index(scores.size) is not None  # the index answers
    if interpolation == "linear":
        reference = IsotonicRegression(out_of_bounds="clip").fit(f, y).predict(scores)
        np.testing.assert_allclose(ours.predict(scores), reference, rtol=0, atol=1e-12)
    else:
        x, v = ours.thresholds, ours.values
        rule = v[np.maximum(np.searchsorted(x, scores, side="right") - 1, 0)]
        np.testing.assert_array_equal(ours.predict(scores), rule)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("isotonic", {}),
        ("isotonic", {"interpolation": "step"}),
        ("histogram_binning", {"n_bins": 50}),
        ("venn_abers", {}),
        ("venn_abers", {"mode": "cross"}),
    ],
)
def test_large_predicts_equal_small_ones_also_after_a_refit(
    method: str, params: dict[str, object]
) -> None:
    """A predict of many scores (the index) equals the same scores predicted in chunks under
    MIN_SCORES (numpy's search), bit for bit; a refit replaces the index with the new map's."""
    from app.calibration import make_calibrator

    rng = np.random.default_rng(12)
    calibrator = make_calibrator(method, params)
    for seed in (1, 2):  # fit, predict, refit on another batch, predict
        f, y, _ = sigmoid_batch(np.random.default_rng(seed), 3000, decimals=seed)
        calibrator.fit(f, y, np.ones(f.size))
        scores = rng.permutation(np.concatenate([rng.normal(scale=2.0, size=30000), f]))
        whole = calibrator.predict(scores)
        chunks = np.concatenate(
            [calibrator.predict(part) for part in np.array_split(scores, 20)]  # < MIN_SCORES
        )
        np.testing.assert_array_equal(whole.view(np.int64), chunks.view(np.int64))


def test_float32_scores_are_counted_as_the_float64_values_they_are() -> None:
    # float32 arithmetic would bucket them differently from the float64 knots
    rng = np.random.default_rng(4)
    knots = np.unique(rng.normal(size=700))
    index = Knots(knots)
    edges = knots[0] + (knots[-1] - knots[0]) * np.arange(1, 4096) / 4096  # bucket borders
    f = np.concatenate([edges, knots, rng.normal(size=MIN_SCORES)]).astype(np.float32)
    want = np.searchsorted(knots, f.astype(np.float64), "right")
    np.testing.assert_array_equal(index.count_at_most(f), want)
