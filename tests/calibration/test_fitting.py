"""The service's entry points: fit, make, load; artifacts round-trip through JSON."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from scipy.special import expit

from app.calibration import (
    BINARY_ONLY,
    CALIBRATOR_METHODS,
    METHODS,
    MULTICLASS_ONLY,
    PROBABILITY_METHODS,
    CalibrationError,
    ParamError,
    Progress,
    StateError,
    fit_calibrator,
    fit_checked_batch,
    load_calibrator,
    make_calibrator,
)
from app.calibration.kernels.crossval import out_of_fold_predictions
from tests.calibration.batches import random_weights, sigmoid_batch


def test_method_names() -> None:
    binary = (
        "platt",
        "isotonic",
        "logistic_correction",
        "beta",
        "histogram_binning",
        "minmax",
        "venn_abers",
    )
    assert (*binary, "temperature", "bostrom") == CALIBRATOR_METHODS
    assert (*binary, "temperature", "bostrom", "auto") == METHODS
    assert BINARY_ONLY == ("logistic_correction", "minmax")
    assert MULTICLASS_ONLY == ("temperature", "bostrom")
    assert PROBABILITY_METHODS == ("beta",)


@pytest.mark.parametrize("method", [m for m in METHODS if m not in ("temperature", "bostrom")])
@pytest.mark.parametrize("weighted", [False, True])
def test_state_round_trips_through_json(method: str, weighted: bool) -> None:
    rng = np.random.default_rng(0)
    f, y, w = sigmoid_batch(rng, 700, decimals=2)
    if method == "beta":  # beta needs probabilities: the margins' sigmoid
        f = expit(f)
    if weighted:
        w = random_weights(rng, 700)
    outcome = fit_calibrator(method, {}, f, y, w)
    calibrator = outcome.calibrator
    state = orjson.loads(orjson.dumps(calibrator.state()))
    params = orjson.loads(orjson.dumps(outcome.params))
    loaded = load_calibrator(outcome.method, params, state)
    grid = np.concatenate([f, np.linspace(-20, 20, 401), [-1e300, 1e300]])
    np.testing.assert_array_equal(loaded.predict(grid), calibrator.predict(grid))
    assert loaded.params == calibrator.params
    assert loaded.state() == state


@pytest.mark.parametrize("method", ["platt", "isotonic", "logistic_correction"])
def test_out_of_fold_is_the_same_method_cross_validated(method: str) -> None:
    f, y, w = sigmoid_batch(np.random.default_rng(3), 500)
    params = {"interpolation": "step"} if method == "isotonic" else {}
    outcome = fit_calibrator(method, params, f, y, w, n_folds=4)
    assert outcome.method == method
    assert outcome.selection is None
    expected = out_of_fold_predictions(lambda: make_calibrator(method, params), f, y, w, 4)
    np.testing.assert_array_equal(outcome.out_of_fold, expected)
    # and differs from the in-sample predictions of the calibrator fitted on everything
    if method != "logistic_correction":
        assert not np.array_equal(outcome.out_of_fold, outcome.calibrator.predict(f))


def test_logistic_correction_is_expit_2f() -> None:
    f = np.array([-1e308, -3.0, 0.0, 0.25, 1e308])
    outcome = fit_calibrator("logistic_correction", {}, f, np.array([0, 0, 1, 1, 1.0]), None)
    np.testing.assert_array_equal(outcome.calibrator.predict(f[1:4]), expit(2 * f[1:4]))
    np.testing.assert_array_equal(outcome.calibrator.predict(f[[0, 4]]), [0.0, 1.0])
    assert outcome.params == {}
    assert outcome.calibrator.state() == {}


def test_effective_params_include_defaults() -> None:
    f, y, w = sigmoid_batch(np.random.default_rng(4), 100)
    outcome = fit_calibrator("platt", {"targets": "hard"}, f, y, w)
    assert outcome.params == {"targets": "hard", "max_iter": 100}


def test_unknown_method() -> None:
    with pytest.raises(CalibrationError, match=r"^method: unknown method 'magic'; expected one of"):
        make_calibrator("magic", {})
    f, y, w = sigmoid_batch(np.random.default_rng(5), 20)
    with pytest.raises(CalibrationError, match=r"^method: unknown method"):
        fit_calibrator("magic", {}, f, y, w)


def test_param_errors_surface_before_any_work() -> None:
    # an invalid batch too: the params are checked first
    with pytest.raises(ParamError) as info:
        fit_calibrator("isotonic", {"interpolation": "cubic"}, np.array([np.nan]), np.ones(1), None)
    assert info.value.field == "interpolation"
    with pytest.raises(ParamError):
        fit_calibrator("auto", {"cv": 50}, np.array([np.nan]), np.ones(1), None)
    with pytest.raises(ParamError, match="logistic_correction takes no parameters"):
        fit_calibrator("logistic_correction", {"x": 1}, np.array([np.nan]), np.ones(1), None)


@pytest.mark.parametrize(
    ("scores", "labels", "weights", "message"),
    [
        ([0.1, np.inf], [0.0, 1.0], None, r"^scores\[1\]: must be finite$"),
        ([0.1, 0.2], [0.0, 0.5], None, r"^labels\[1\]: must be 0 or 1$"),
        ([0.1, 0.2], [1.0, 1.0], None, r"^labels: .*both classes"),
        ([0.1], [1.0], None, r"^labels: .*at least 2 points"),
        ([0.1, 0.2], [0.0, 1.0], [1.0, -1.0], r"^sample_weight\[1\]: must be finite and >= 0$"),
        ([0.1, 0.2], [0.0, 1.0], [0.0, 0.0], r"^sample_weight: the weights must have a pos"),
        ([0.1, 0.2], [0.0, 1.0, 1.0], None, r"^labels: has 3 values for 2 scores"),
    ],
)
def test_invalid_batches_name_the_field(
    scores: list[float], labels: list[float], weights: list[float] | None, message: str
) -> None:
    w = None if weights is None else np.array(weights)
    with pytest.raises(CalibrationError, match=message):
        fit_calibrator("platt", {}, np.array(scores), np.array(labels), w)


@pytest.mark.parametrize(
    ("method", "state", "message"),
    [
        ("platt", {"A": 1.0, "B": 0.0}, r"^state: expected the keys A, B, n_iter"),
        ("platt", {"A": "1", "B": 0.0, "n_iter": 3}, r"^state\.A: must be a finite number"),
        ("platt", {"A": 1.0, "B": True, "n_iter": 3}, r"^state\.B: must be a finite number"),
        ("platt", {"A": 1.0, "B": 0.0, "n_iter": -1}, r"^state\.n_iter: "),
        ("platt", [1.0, 0.0], r"^state: must be an object"),
        ("isotonic", {"thresholds": [], "values": []}, r"^state\.thresholds: must be a non-empty"),
        ("isotonic", {"thresholds": [0.0, 1.0], "values": [0.5]}, r"^state\.values: has 1 values"),
        ("isotonic", {"thresholds": [1.0, 0.0], "values": [0.1, 0.2]}, r"strictly increasing"),
        ("isotonic", {"thresholds": [0.0, 0.0], "values": [0.1, 0.2]}, r"strictly increasing"),
        ("isotonic", {"thresholds": [0.0, 1.0], "values": [0.3, 0.2]}, r"non-decreasing"),
        ("isotonic", {"thresholds": [0.0, 1.0], "values": [0.3, 1.2]}, r"within \[0, 1\]"),
        ("isotonic", {"thresholds": [0.0, 1.0], "values": [-0.1, 1.0]}, r"within \[0, 1\]"),
        ("isotonic", {"thresholds": [0.0, "1"], "values": [0.1, 0.2]}, r"numbers only"),
        ("isotonic", {"thresholds": [0.0, True], "values": [0.1, 0.2]}, r"numbers only"),
        ("isotonic", {"thresholds": [0.0], "values": [0.1], "x": 1}, r"^state: expected the keys"),
        ("logistic_correction", {"A": 1.0}, r"^state: expected the keys none; got A"),
    ],
)
def test_from_state_rejects_bad_states(method: str, state: object, message: str) -> None:
    with pytest.raises(StateError, match=message):
        load_calibrator(method, {}, state)  # type: ignore[arg-type]


def test_load_rejects_an_unknown_method_and_bad_params() -> None:
    with pytest.raises(StateError, match=r"^method: unknown method 'auto'"):
        load_calibrator("auto", {}, {})
    with pytest.raises(ParamError):
        load_calibrator("platt", {"targets": "x"}, {"A": 1.0, "B": 0.0, "n_iter": 1})


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("platt", {"trim": "trainset"}),
        ("isotonic", {"trim": "cv"}),
        ("histogram_binning", {"n_bins": "cv"}),
        ("venn_abers", {"mode": "cross"}),
    ],
)
def test_the_stored_calibrator_is_a_direct_fit_of_the_batch(
    method: str, params: dict[str, object]
) -> None:
    # fit_calibrator sorts the batch for its folds; the calibrator it keeps must still be
    # exactly what the method fits on the batch as sent (trimming's cut and internal folds
    # pick tied points by position), on heavily tied, weighted scores
    for seed in range(5):
        rng = np.random.default_rng(seed)
        f = np.round(rng.normal(size=300), 1)
        y = (rng.random(300) < expit(2 * f)).astype(np.float64)
        w = rng.choice([0.5, 1.0, 2.0], size=300)
        outcome = fit_calibrator(method, params, f, y, w)
        direct = make_calibrator(method, params).fit(f, y, w)
        assert outcome.calibrator.state() == direct.state()


@pytest.mark.parametrize("method", [*CALIBRATOR_METHODS, "auto"])
def test_a_checked_batch_fits_as_the_arrays_it_came_from(method: str) -> None:
    """fit_checked_batch trusts the batch its caller checked (the service's edge) and answers
    what fit_calibrator answers on the same arrays: the same state, out-of-fold predictions and
    selection."""
    rng = np.random.default_rng(11)
    if method in MULTICLASS_ONLY:
        scores = rng.dirichlet(np.ones(3), size=240)
        labels = np.array([rng.choice(3, p=row) for row in scores], dtype=np.int64)
    else:
        scores, float_labels, _ = sigmoid_batch(rng, 240)
        if method in PROBABILITY_METHODS:
            scores = expit(scores)
        labels = float_labels.astype(np.int64)
    weights = random_weights(rng, labels.shape[0])
    direct = fit_calibrator(method, {}, scores, labels, weights, n_folds=4)
    trusted = fit_checked_batch(method, {}, scores, labels, weights, n_folds=4)
    assert trusted.method == direct.method
    assert trusted.params == direct.params
    assert trusted.selection == direct.selection
    np.testing.assert_array_equal(trusted.out_of_fold, direct.out_of_fold)
    assert orjson.dumps(trusted.calibrator.state()) == orjson.dumps(direct.calibrator.state())


@pytest.mark.parametrize(
    ("method", "weighted", "sorted_fit"),
    [
        ("platt", True, True),
        ("platt", False, True),
        ("isotonic", True, True),
        ("isotonic", False, True),
        ("beta", True, False),  # not ORDER_FREE: fitted on the batch as sent
    ],
)
def test_the_final_fit_of_distinct_scores_reads_the_sorted_batch_and_is_the_direct_fit(
    method: str, weighted: bool, sorted_fit: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On distinct scores an untrimmed Platt or isotonic fit reads the batch the folds sorted
    (no sort of its own), and keeps exactly what a direct fit of the batch as sent keeps, with
    any weights (some zero). Tied scores or other methods read the batch as sent."""
    seen: list[bool] = []
    kind = type(make_calibrator(method, {}))
    real_fit = kind.fit

    def spy(self: object, scores: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> object:
        if scores.size == 5_000:  # the final fit (each fold's is smaller)
            seen.append(bool(np.all(scores[1:] > scores[:-1])))
        return real_fit(self, scores, labels, weights)

    monkeypatch.setattr(kind, "fit", spy)
    rng = np.random.default_rng(3)
    f = rng.normal(size=5_000)
    if method == "beta":
        f = expit(f)
    y = (rng.random(f.size) < expit(2 * f)).astype(np.float64)
    w = random_weights(rng, f.size) if weighted else np.ones(f.size)
    if weighted:
        w[:50] = 0.0
    outcome = fit_checked_batch(method, {}, f, y.astype(np.int64), w)
    assert seen == [sorted_fit]
    monkeypatch.undo()
    direct = make_calibrator(method, {}).fit(f, y, w)
    assert orjson.dumps(outcome.calibrator.state()) == orjson.dumps(direct.state())
    tied = np.clip(np.round(f, 2), 0.01, 0.99) if method == "beta" else np.round(f, 1)
    seen.clear()
    monkeypatch.setattr(kind, "fit", spy)
    fit_checked_batch(method, {}, tied, y.astype(np.int64), w)
    assert seen == [False]


@pytest.mark.parametrize("method", ["platt", "auto"])
def test_the_fit_tells_its_progress_before_the_final_fit(
    method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``progress`` hears that the params are good, then gets the outcome's out-of-fold
    predictions in the batch's order, once each, before the final fit starts (a service
    measures meanwhile); bad params are refused before it hears anything."""
    rng = np.random.default_rng(8)
    f, y, _ = sigmoid_batch(rng, 2_000)
    events: list[str] = []
    handed: list[np.ndarray] = []
    kind = type(make_calibrator("platt", {}))
    real_fit = kind.fit

    def spy(self: object, scores: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> object:
        if scores.size == f.size:
            events.append("final fit")
        return real_fit(self, scores, labels, weights)

    def known(out_of_fold: np.ndarray, runs: np.ndarray | None) -> None:
        events.append("out of fold")
        handed.append(out_of_fold)
        assert runs is not None  # the scores were sorted: the runs are known
        np.testing.assert_array_equal(np.sort(runs), np.arange(f.size))
        # a monotone method's predictions along the runs: one sorted run per fold
        descents = np.count_nonzero(np.diff(out_of_fold[runs]) < 0)
        assert descents <= 4

    monkeypatch.setattr(kind, "fit", spy)
    progress = Progress(lambda: events.append("checked"), known)
    params = {"candidates": ["platt"]} if method == "auto" else {}
    labels, ones = y.astype(np.int64), np.ones(f.size)
    outcome = fit_checked_batch(method, params, f, labels, ones, progress=progress)
    assert events == ["checked", "out of fold", "final fit"]
    np.testing.assert_array_equal(handed[0], outcome.out_of_fold)
    if method == "platt":  # (auto's folds are its own)
        direct = out_of_fold_predictions(lambda: make_calibrator("platt", {}), f, y, ones, 5)
        np.testing.assert_allclose(handed[0], direct, rtol=1e-12)
    events.clear()
    with pytest.raises(ParamError):
        fit_checked_batch(method, {"max_iter": 0}, f, labels, ones, progress=progress)
    assert events == []


@pytest.mark.parametrize(
    ("method", "params", "kind"),
    [
        ("platt", {"bound": "laplace"}, "weighted"),
        ("isotonic", {"bound": "laplace"}, "weighted"),
        ("auto", {}, "weighted"),  # its candidates are bounded
        ("isotonic", {}, "near ties"),
        ("isotonic", {}, "near ties, equal weights"),
    ],
)
def test_a_final_fit_whose_sums_follow_the_rows_order_reads_the_batch_as_sent(
    method: str, params: dict[str, object], kind: str
) -> None:
    """Where the sorted batch could move a last bit, the final fit reads the batch as sent: a
    bound sums unequal weights in their order, and isotonic regression pools scores closer
    than float64's resolution, summing their weights as it meets them."""
    for seed in range(4):
        rng = np.random.default_rng(seed)
        f = rng.uniform(0.05, 0.95, 3_000)
        if kind.startswith("near ties"):
            # distinct (an ulp here is 2e-19), but closer than 1e-15 apart: one pool
            f[:200] = rng.permutation(0.001 + np.arange(200) * 4e-17)
            assert np.unique(f).size == f.size
        y = (rng.random(f.size) < f).astype(np.float64)
        w = np.full(f.size, 0.7) if kind.endswith("equal weights") else random_weights(rng, f.size)
        outcome = fit_checked_batch(method, params, f, y.astype(np.int64), w)
        chosen = outcome.method
        direct = make_calibrator(chosen, outcome.params).fit(f, y, w)
        assert orjson.dumps(outcome.calibrator.state()) == orjson.dumps(direct.state()), seed
