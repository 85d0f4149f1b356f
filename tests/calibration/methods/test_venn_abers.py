"""Venn-ABERS against its definition (isotonic refits, brute force), the venn-abers package,
and the properties of the papers (Vovk & Petej 2014; Vovk, Petej & Fedorova 2015)."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import isotonic_regression

from app.calibration.base import ParamError, StateError
from app.calibration.kernels.crossval import stratified_folds
from app.calibration.methods.venn_abers import VennAbersCalibrator
from tests.calibration.batches import random_weights, sigmoid_batch

TOL = 1e-12
Array = np.ndarray


def _brute_force(f: Array, y: Array, w: Array, s: Array) -> tuple[Array, Array]:
    """p0, p1 by definition: for each test score, refit isotonic regression on the batch plus
    (s, 0) and plus (s, 1), exactly tied scores pooled, and read the fit at s.

    The weight convention: zero weights dropped, the rest rescaled to a mean of 1, the test
    point weighing 1. One refit per score and label (a reference, so loops are fine here).
    """
    w = w / w.max()  # no overflow; weights that underflow to 0 here could not count anyway
    keep = w > 0
    f, y, w = f[keep], y[keep], w[keep] / w[keep].mean()
    p = np.empty((2, s.size))
    for label in (0, 1):
        for t, score in enumerate(s.tolist()):
            x = np.append(f, score)
            pooled, where = np.unique(x, return_inverse=True)
            weight = np.bincount(where, weights=np.append(w, 1.0))
            positive = np.bincount(where, weights=np.append(w * y, float(label)))
            fit = isotonic_regression(positive / weight, weights=weight).x
            p[label, t] = fit[np.searchsorted(pooled, score)]
    return p[0], p[1]


def _probes(f: Array) -> Array:
    """Every distinct score, the midpoints between them, and points below and above the range."""
    u = np.unique(f)
    return np.concatenate([u, (u[:-1] + u[1:]) / 2, [u[0] - 1.0, u[-1] + 1.0, -1e300, 1e300]])


def _check_against_brute_force(f: Array, y: Array, w: Array, mode: str = "inductive") -> None:
    calibrator = VennAbersCalibrator(mode).fit(f, y, w)
    s = _probes(f)
    p0, p1 = calibrator.predict_interval(s)
    b0, b1 = _brute_force(f, y, w, s)
    np.testing.assert_allclose(p0, b0, rtol=0, atol=TOL)
    np.testing.assert_allclose(p1, b1, rtol=0, atol=TOL)
    np.testing.assert_allclose(calibrator.predict(s), b1 / (1 - b0 + b1), rtol=0, atol=TOL)


@pytest.mark.parametrize("seed", range(40))
def test_matches_brute_force_with_ties_and_weights(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 61))
    # a few distinct values (heavy ties) or none tied; weights with zeros on odd seeds
    f = rng.integers(0, int(rng.integers(1, 12)), n) / 4 if seed % 4 < 2 else rng.normal(size=n)
    y = (rng.random(n) < rng.uniform(0.2, 0.8)).astype(np.float64)
    if seed % 10 == 9:
        y[:] = seed % 20 == 9  # a single class: all 1 or all 0
    w = np.ones(n)
    if seed % 2:
        w = rng.choice([0.0, 0.25, 1.0, 2.0, 3.5], size=n)
        w[0] = 1.5
    _check_against_brute_force(f, y, w)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 6),
            st.booleans(),
            st.sampled_from([0.0, 0.5, 1.0, 2.5]),
        ),
        min_size=1,
        max_size=25,
    ).filter(lambda rows: any(w > 0 for _, _, w in rows))
)
def test_property_matches_brute_force(rows: list[tuple[int, bool, float]]) -> None:
    f, y, w = (np.array(column, dtype=np.float64) for column in zip(*rows, strict=True))
    _check_against_brute_force(f, y, w)


@pytest.mark.parametrize("seed", range(3))
def test_long_batches_match_brute_force(seed: int) -> None:
    # long enough for the hulls to pop, the tangents to jump several vertices, and rounding
    # to accumulate in the cumulative sums
    rng = np.random.default_rng(100 + seed)
    f, y, _ = sigmoid_batch(rng, 400, decimals=1 if seed == 0 else -1)
    _check_against_brute_force(f, y, random_weights(rng, 400))


# --- the venn-abers package ------------------------------------------------------------------


@pytest.fixture(scope="module")
def venn_abers_package() -> type:
    settings_before = np.geterr()
    from venn_abers import VennAbers  # test-only; it sets np.seterr(divide/invalid='ignore')

    np.seterr(**settings_before)
    return VennAbers


def _package(venn_abers: type, f: Array, y: Array, s: Array, precision: int | None = None) -> Array:
    # its slopes divide by zero at the ends of the diagram
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        fitted = venn_abers().fit(np.column_stack([1 - f, f]), y, precision=precision)
        _, p0_p1 = fitted.predict_proba(np.column_stack([1 - s, s]))
    return np.asarray(p0_p1)


@pytest.mark.parametrize("seed", range(10))
def test_matches_the_package_on_distinct_scores(venn_abers_package: type, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    f = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < f).astype(np.float64)
    u = np.unique(f)
    inside = (u[:-1] + u[1:]) / 2  # strictly inside the range, equal to no calibration score
    expected = _package(venn_abers_package, f, y, inside)
    p0, p1 = VennAbersCalibrator().fit(f, y, np.ones(n)).predict_interval(inside)
    np.testing.assert_allclose(np.column_stack([p0, p1]), expected, rtol=0, atol=TOL)


def test_agrees_with_the_package_at_ties_and_beyond_the_range(venn_abers_package: type) -> None:
    # The package's p1 = 1 above the range and p0 = 0 below it are the definition, not a
    # convention: a label-1 point above every other never violates monotonicity. On exact
    # ties it pools as we do. Both agree with the brute force there.
    rng = np.random.default_rng(5)
    f = rng.integers(1, 9, 60) / 10
    y = (rng.random(60) < f).astype(np.float64)
    s = np.concatenate([np.unique(f), [0.0, 0.05, 0.95, 1.0]])
    p0, p1 = VennAbersCalibrator().fit(f, y, np.ones(60)).predict_interval(s)
    b0, b1 = _brute_force(f, y, np.ones(60), s)
    expected = _package(venn_abers_package, f, y, s)
    np.testing.assert_allclose(np.column_stack([p0, p1]), expected, rtol=0, atol=TOL)
    np.testing.assert_allclose(np.column_stack([p0, p1]), np.column_stack([b0, b1]), atol=TOL)
    assert np.all(p1[s > f.max()] == 1.0)
    assert np.all(p0[s < f.min()] == 0.0)


def test_near_ties_stay_apart_unlike_the_package_with_precision(venn_abers_package: type) -> None:
    # The package's `precision` rounds the calibration scores, pooling near-ties; we pool
    # exactly equal scores only (the brute-force definition). Rounding first is the same as
    # fitting on rounded scores.
    rng = np.random.default_rng(9)
    f = np.round(rng.uniform(0.1, 0.9, 80), 1) + rng.uniform(-1e-3, 1e-3, 80)
    y = (rng.random(80) < f).astype(np.float64)
    s = np.linspace(0.12, 0.88, 39)
    rounded = _package(venn_abers_package, f, y, s, precision=1)
    ours = np.column_stack(VennAbersCalibrator().fit(f, y, np.ones(80)).predict_interval(s))
    assert np.max(np.abs(ours - rounded)) > 0.01
    np.testing.assert_allclose(ours, np.column_stack(_brute_force(f, y, np.ones(80), s)), atol=TOL)
    on_rounded = VennAbersCalibrator().fit(np.round(f, 1), y, np.ones(80)).predict_interval(s)
    np.testing.assert_allclose(np.column_stack(on_rounded), rounded, rtol=0, atol=TOL)


# --- properties ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["inductive", "cross"])
@pytest.mark.parametrize("seed", range(6))
def test_p_lies_in_the_interval_and_never_at_0_or_1(mode: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    f, y, _ = sigmoid_batch(rng, max(n, 2), decimals=1 if seed % 2 else -1)
    if seed == 5:
        y[:] = 0.0  # one class: the isotonic fit is 0 everywhere, Venn-ABERS is not
    calibrator = VennAbersCalibrator(mode).fit(f, y, random_weights(rng, f.size))
    s = np.concatenate([_probes(f), rng.uniform(-6, 6, 500)])
    p = calibrator.predict(s)
    p0, p1 = calibrator.predict_interval(s)
    assert np.all((p0 <= p) & (p <= p1))
    assert np.all(p0 < p1)
    assert np.all((p > 0) & (p < 1))
    assert np.all((p0 >= 0) & (p1 <= 1))


@pytest.mark.parametrize("mode", ["inductive", "cross"])
def test_monotone_in_the_score(mode: str) -> None:
    rng = np.random.default_rng(11)
    f, y, _ = sigmoid_batch(rng, 800, decimals=2)
    calibrator = VennAbersCalibrator(mode).fit(f, y, random_weights(rng, 800))
    s = np.sort(np.concatenate([_probes(f), rng.uniform(-8, 8, 4000)]))
    p0, p1 = calibrator.predict_interval(s)
    for values in (calibrator.predict(s), p0, p1):
        assert np.all(np.diff(values) >= 0)


def test_interval_narrows_as_the_batch_grows() -> None:
    # [p0, p1] holds p1 - p0 >= 1 / (n + 1); on average it shrinks roughly like that
    rng = np.random.default_rng(2)
    test = rng.normal(scale=1.5, size=2000)
    widths = []
    for n in (30, 300, 3000, 30000):
        f, y, w = sigmoid_batch(rng, n)
        p0, p1 = VennAbersCalibrator().fit(f, y, w).predict_interval(test)
        assert np.all(p1 - p0 >= 1 / (n + 1) - TOL)
        widths.append(float(np.mean(p1 - p0)))
    assert widths == sorted(widths, reverse=True)
    assert widths[-1] < widths[0] / 10


def test_a_common_factor_in_the_weights_changes_nothing() -> None:
    rng = np.random.default_rng(4)
    f, y, _ = sigmoid_batch(rng, 300, decimals=1)
    w = random_weights(rng, 300)
    s = _probes(f)
    a, b = (VennAbersCalibrator().fit(f, y, scale * w) for scale in (1.0, 7.3))
    np.testing.assert_allclose(a.predict(s), b.predict(s), rtol=0, atol=TOL)
    # unit weights are the papers' unweighted predictor: same as any constant weight
    ones, twos = (VennAbersCalibrator().fit(f, y, c * np.ones(300)) for c in (1.0, 2.0))
    np.testing.assert_allclose(ones.predict(s), twos.predict(s), rtol=0, atol=TOL)


@pytest.mark.parametrize(
    "weights",
    [
        [1e25] + [1.0] * 39,  # the light pools vanish in the running total's rounding
        [1e-20, 1.0, 1.0, 1.0] * 10,
        [1e308] * 40,  # their sum overflows
    ],
)
def test_extreme_weights(weights: list[float]) -> None:
    # no warning (an error here), and the brute force's numbers
    rng = np.random.default_rng(12)
    f = rng.normal(size=40)
    y = (rng.random(40) < 0.5).astype(np.float64)
    _check_against_brute_force(f, y, np.array(weights))


def test_a_single_point() -> None:
    for label in (0.0, 1.0):
        calibrator = VennAbersCalibrator().fit(np.array([0.3]), np.array([label]), np.ones(1))
        p0, p1 = calibrator.predict_interval(np.array([0.0, 0.3, 1.0]))
        b0, b1 = _brute_force(np.array([0.3]), np.array([label]), np.ones(1), np.array([0, 0.3, 1]))
        np.testing.assert_allclose(p0, b0, atol=TOL)
        np.testing.assert_allclose(p1, b1, atol=TOL)


# --- cross Venn-ABERS ------------------------------------------------------------------------


def test_cross_merges_per_fold_ivaps_by_geometric_means() -> None:
    rng = np.random.default_rng(8)
    f, y, _ = sigmoid_batch(rng, 60, decimals=1)
    w = random_weights(rng, 60)
    calibrator = VennAbersCalibrator.from_params({"mode": "cross", "folds": 4}).fit(f, y, w)
    s = _probes(f)
    # each fold's IVAP by brute force on the points outside that fold
    folds = stratified_folds(y, 4, seed=0, sample_weight=w)
    pairs = [_brute_force(f[folds != k], y[folds != k], w[folds != k], s) for k in range(4)]
    p0, p1 = np.array([pair[0] for pair in pairs]), np.array([pair[1] for pair in pairs])
    gm_p1 = np.prod(p1, axis=0) ** (1 / 4)
    gm_not_p0 = np.prod(1 - p0, axis=0) ** (1 / 4)
    np.testing.assert_allclose(calibrator.predict(s), gm_p1 / (gm_not_p0 + gm_p1), atol=TOL)
    low, high = calibrator.predict_interval(s)
    np.testing.assert_allclose(low, p0.min(axis=0), rtol=0, atol=TOL)
    np.testing.assert_allclose(high, p1.max(axis=0), rtol=0, atol=TOL)
    assert calibrator.state()["folds"] == 4


def test_cross_uses_fewer_folds_for_a_rare_class_and_one_fit_for_one_point() -> None:
    f = np.linspace(0, 1, 30)
    y = np.zeros(30)
    y[[4, 17, 25]] = 1.0  # three positives: three folds, each with one
    calibrator = VennAbersCalibrator.from_params({"mode": "cross"}).fit(f, y, np.ones(30))
    assert calibrator.state()["folds"] == 3
    w = np.zeros(30)
    w[7] = 2.0  # a single point of positive weight: nothing to cross, the batch's IVAP
    single = VennAbersCalibrator.from_params({"mode": "cross"}).fit(f, y, w)
    inductive = VennAbersCalibrator().fit(f, y, w)
    assert single.state()["folds"] == 1
    np.testing.assert_array_equal(single.predict(f), inductive.predict(f))


# --- parameters and state --------------------------------------------------------------------


def test_params_list_every_effective_value() -> None:
    assert VennAbersCalibrator.from_params({}).params == {"mode": "inductive"}
    assert VennAbersCalibrator.from_params({"mode": "cross"}).params == {
        "mode": "cross",
        "folds": 5,
    }


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"mode": "transductive"}, "mode"),
        ({"mode": "cross", "folds": 1}, "folds"),
        ({"mode": "cross", "folds": 21}, "folds"),
        ({"mode": "cross", "folds": True}, "folds"),
        ({"folds": 5}, "folds"),  # folds only mean something in cross mode
        ({"precision": 2}, "precision"),
    ],
)
def test_bad_params_name_the_key(params: dict[str, object], field: str) -> None:
    with pytest.raises(ParamError) as info:
        VennAbersCalibrator.from_params(params)
    assert info.value.field == field


@pytest.mark.parametrize("params", [{}, {"mode": "cross", "folds": 3}])
def test_state_round_trips_bit_for_bit(params: dict[str, object]) -> None:
    rng = np.random.default_rng(6)
    f, y, _ = sigmoid_batch(rng, 500, decimals=2)
    fitted = VennAbersCalibrator.from_params(params).fit(f, y, random_weights(rng, 500))
    state = json.loads(json.dumps(fitted.state()))
    rebuilt = VennAbersCalibrator.from_state(fitted.params, state)
    s = np.concatenate([_probes(f), rng.normal(size=1000)])
    np.testing.assert_array_equal(rebuilt.predict(s), fitted.predict(s))
    for got, expected in zip(rebuilt.predict_interval(s), fitted.predict_interval(s), strict=True):
        np.testing.assert_array_equal(got, expected)
    assert rebuilt.state() == state
    # the step table and, in cross mode, how many IVAPs it merges: nothing per fold
    table = ["edges", "p", "p0", "p1"]
    assert sorted(state) == (table if params == {} else sorted([*table, "folds"]))
    assert len(state["p"]) == len(state["p0"]) == len(state["p1"]) == len(state["edges"]) + 1
    if params:
        assert state["folds"] == 3


@pytest.mark.parametrize(("mode", "max_edges"), [("inductive", 10_000), ("cross", 20_000)])
def test_the_state_of_10_5_distinct_scores_is_small(mode: str, max_edges: int) -> None:
    # Measured: 6325 edges, a 0.46 MB artifact (IVAP); 12319 edges, 0.92 MB (5-fold CVAP).
    # Every cell of every fold (5k + 2 numbers per IVAP of k scores) took 9.6 MB and 38 MB.
    f, y, w = sigmoid_batch(np.random.default_rng(0), 10**5)
    assert np.unique(f).size == 10**5
    calibrator = VennAbersCalibrator(mode).fit(f, y, w)
    state = calibrator.state()
    assert len(state["edges"]) < max_edges
    assert len(orjson.dumps(state)) < 100 * max_edges
    rebuilt = VennAbersCalibrator.from_state(calibrator.params, orjson.loads(orjson.dumps(state)))
    np.testing.assert_array_equal(rebuilt.predict(f), calibrator.predict(f))


@pytest.mark.parametrize("mode", ["inductive", "cross"])
def test_adjacent_floats_and_the_largest_float_give_a_valid_state(mode: str) -> None:
    # No float lies between 0.0 and 5e-324, nor above the largest float: the table drops those
    # empty cells, so its edges increase strictly and stay finite (the next float above the
    # largest is inf, which JSON cannot hold)
    big = np.finfo(np.float64).max
    f = np.array([0.0, 5e-324, 1e-323, 0.5, big, -big, 1.0, 0.0, big, 5e-324, -0.0, 2.0])
    y = np.array([0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0])
    calibrator = VennAbersCalibrator(mode).fit(f, y, np.ones(f.size))
    state = orjson.loads(orjson.dumps(calibrator.state()))
    assert np.all(np.diff(state["edges"]) > 0)
    rebuilt = VennAbersCalibrator.from_state(calibrator.params, state)
    s = np.concatenate([_probes(f), [-0.0, 5e-324, 1e-323, np.nextafter(big, 0)]])
    np.testing.assert_array_equal(rebuilt.predict(s), calibrator.predict(s))
    if mode == "inductive":
        _check_against_brute_force(f, y, np.ones(f.size))


def test_a_table_without_edges() -> None:
    # p1 = 1 only above the largest float, where no finite score lies: one step, no edges
    big = np.finfo(np.float64).max
    calibrator = VennAbersCalibrator().fit(np.array([big, big]), np.zeros(2), np.ones(2))
    state = orjson.loads(orjson.dumps(calibrator.state()))
    assert state == {"edges": [], "p": [0.25], "p0": [0.0], "p1": [1 / 3]}
    rebuilt = VennAbersCalibrator.from_state({}, state)
    s = np.array([-big, 0.0, big])
    np.testing.assert_array_equal(rebuilt.predict(s), calibrator.predict(s))
    _check_against_brute_force(np.array([big, big]), np.zeros(2), np.ones(2))


def _table_state() -> dict[str, list[float]]:
    return {
        "edges": [0.0, 1.0],
        "p": [0.2, 0.4, 0.6],
        "p0": [0.0, 0.25, 0.5],
        "p1": [0.25, 0.75, 1.0],
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"p1": None}, "state: expected the keys edges, p, p0, p1; got edges, p, p0"),
        ({"extra": [1.0]}, "state: expected the keys"),
        ({"folds": 1}, 'state.folds: only stored with mode "cross"'),
        ({"edges": []}, "state.p: has 3 values for 0 edges; need 1"),
        ({"edges": 0.0}, "state.edges: must be a list of numbers"),
        ({"edges": ["0", 1.0]}, "state.edges: must hold numbers only"),
        ({"p": 0.5}, "state.p: must be a non-empty list"),
        ({"p0": [0.0, True, 0.5]}, "state.p0: must hold numbers only"),
        ({"edges": [0.0, float("nan")]}, "state.edges: must hold finite numbers only"),
        ({"p1": [0.25, 0.75, float("inf")]}, "state.p1: must hold finite numbers only"),
        ({"p": [0.2, 0.4]}, "state.p: has 2 values for 2 edges; need 3"),
        ({"p0": [0.0, 0.25, 0.5, 0.5]}, "state.p0: has 4 values for 2 edges; need 3"),
        ({"p1": [0.25, 0.75]}, "state.p1: has 2 values"),
        ({"edges": [1.0, 0.0]}, "state.edges: must be strictly increasing"),
        ({"edges": [0.0, 0.0]}, "state.edges: must be strictly increasing"),
        ({"p0": [0.0, 0.3, 0.2]}, "state.p0: must be non-decreasing"),
        ({"p": [0.2, 0.6, 0.4]}, "state.p: must be non-decreasing"),
        ({"p1": [0.25, 1.0, 0.75]}, "state.p1: must be non-decreasing"),
        ({"p0": [-0.1, 0.25, 0.5]}, "state.p0: must be within [0, 1]"),
        ({"p1": [0.25, 0.75, 1.5]}, "state.p1: must be within [0, 1]"),
        ({"p": [0.0, 0.4, 0.6], "p1": [0.0, 0.75, 1.0]}, "state.p: must be strictly between"),
        ({"p": [0.2, 0.4, 1.0]}, "state.p: must be strictly between 0 and 1"),
        ({"p": [0.3, 0.4, 0.6]}, "state.p: must lie within [p0, p1] on every step"),
        ({"p": [0.2, 0.2, 0.6]}, "state.p: must lie within [p0, p1] on every step"),
        (
            {"p0": [0.0, 0.4, 0.5], "p1": [0.25, 0.4, 1.0]},
            "state.p0: must be below p1 on every step",
        ),
    ],
)
def test_from_state_rejects_a_malformed_table(change: dict[str, object], message: str) -> None:
    state: dict[str, object] = {**_table_state(), **change}
    state = {key: value for key, value in state.items() if value is not None}
    with pytest.raises(StateError, match=re.escape(message)):
        VennAbersCalibrator.from_state({}, state)


def test_from_state_accepts_the_valid_example() -> None:
    calibrator = VennAbersCalibrator.from_state({}, _table_state())
    s = np.array([-1.0, 0.0, 0.5, 1.0, 2.0])
    p0, p1 = calibrator.predict_interval(s)
    np.testing.assert_array_equal(p0, [0.0, 0.25, 0.25, 0.5, 0.5])
    np.testing.assert_array_equal(p1, [0.25, 0.75, 0.75, 1.0, 1.0])
    np.testing.assert_array_equal(calibrator.predict(s), [0.2, 0.4, 0.4, 0.6, 0.6])
    cross = VennAbersCalibrator.from_state(
        {"mode": "cross", "folds": 3}, {**_table_state(), "folds": 2}
    )
    np.testing.assert_array_equal(cross.predict(s), calibrator.predict(s))
    assert cross.state() == {**_table_state(), "folds": 2}


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({**_table_state(), "folds": 0}, "state.folds: must be an integer in 1..3, not 0"),
        ({**_table_state(), "folds": 4}, "state.folds: must be an integer in 1..3, not 4"),
        ({**_table_state(), "folds": True}, "state.folds: must be an integer in 1..3, not True"),
        ({**_table_state(), "folds": 2.0}, "state.folds: must be an integer in 1..3, not 2.0"),
        ({**_table_state(), "folds": [_table_state()] * 2}, "state.folds: must be an integer"),
        (_table_state(), "state: expected the keys edges, p, p0, p1, folds; got edges, p, p0, p1"),
        ({**_table_state(), "folds": 2, "edges": [1.0, 0.0]}, "state.edges: must be strictly"),
        ([1.0], "state: must be an object"),
    ],
)
def test_from_state_rejects_a_malformed_cross_state(state: object, message: str) -> None:
    with pytest.raises(StateError, match=re.escape(message)):
        VennAbersCalibrator.from_state({"mode": "cross", "folds": 3}, state)  # type: ignore[arg-type]
