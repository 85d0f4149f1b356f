"""Method ``auto``: the papers' learning-curve result, the record, the tie rule, the bound."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from app.calibration import CalibrationError, ParamError, PlattCalibrator, fit_calibrator
from app.calibration.fitting import make_calibrator
from app.calibration.kernels.crossval import stratified_class_folds
from app.calibration.measures.metrics import log_loss
from app.calibration.methods import candidates as candidates_module
from app.calibration.methods.candidates import AutoSpec, Candidate, eligible_candidates
from app.calibration.methods.selection import select
from tests.calibration.batches import sigmoid_batch


def _step_batch(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """P(y = 1 | f) jumps from 0.1 to 0.9 at f = 0.3: no sigmoid in f fits that."""
    f = rng.uniform(-1, 1, size=n)
    y = (rng.random(n) < np.where(f < 0.3, 0.1, 0.9)).astype(np.float64)
    return f, y, np.ones(n)


def test_platt_wins_on_small_sigmoid_batches() -> None:
    # the papers' learning curve at its small end: 100 points whose truth is a sigmoid
    chosen = []
    for seed in range(20):
        f, y, w = sigmoid_batch(np.random.default_rng(seed), 100)
        outcome = fit_calibrator("auto", {}, f, y, w)
        chosen.append(outcome.method)
        if outcome.method == "platt":
            assert isinstance(outcome.calibrator, PlattCalibrator)
    assert chosen.count("platt") >= 17, chosen


class _Fixed:
    """A stub calibrator answering fixed probabilities by position (for the tie rule)."""

    def __init__(self, p: np.ndarray) -> None:
        self.p = p

    def fit(self, scores: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> _Fixed:
        return self

    def predict(self, scores: np.ndarray) -> np.ndarray:
        return self.p[scores.astype(np.intp)]


@pytest.mark.parametrize("shift", [0.2, 0.8])
def test_a_complex_candidate_must_win_by_half_a_paired_standard_error(shift: float) -> None:
    rng = np.random.default_rng(0)
    n = 400
    y = (rng.random(n) < 0.5).astype(np.float64)
    # per point, the simple candidate gives the true label q, the complex one q e^gain, where
    # gain has mean `shift` standard errors of itself: the paired difference of their losses
    q = rng.uniform(0.3, 0.7, size=n)
    z = rng.normal(size=n)
    z = (z - z.mean()) / z.std(ddof=1)
    gain = 0.05 * z + shift * 0.05 / np.sqrt(n)
    assert gain.mean() / (gain.std(ddof=1) / np.sqrt(n)) == pytest.approx(shift)
    stubs = {
        "simple": np.where(y == 1, q, 1 - q),
        "complex": np.where(y == 1, q * np.exp(gain), 1 - q * np.exp(gain)),
    }
    table = (Candidate("simple", "platt", {}), Candidate("complex", "isotonic", {}))
    folds = stratified_class_folds(y.astype(np.int64), 5)
    index = np.arange(n, dtype=np.float64)
    chosen = select(table, lambda c: _Fixed(stubs[c.label]), index, y, np.ones(n), folds)
    assert chosen.log_losses["complex"] < chosen.log_losses["simple"]
    assert chosen.chosen.label == ("simple" if shift < 0.5 else "complex")
    # the record shows the paired margin the rule read: `shift` standard errors of the gain
    excess, error = chosen.excess["simple"]
    assert excess / error == pytest.approx(shift, rel=1e-6)
    assert chosen.excess["complex"] == (0.0, 0.0)


@pytest.mark.parametrize("seed", range(3))
def test_venn_abers_wins_on_a_large_step_batch(seed: int) -> None:
    f, y, w = _step_batch(np.random.default_rng(seed), 5000)
    outcome = fit_calibrator("auto", {"cv": 4}, f, y, w)
    assert outcome.method == "venn_abers"
    assert outcome.params == {"mode": "inductive"}
    assert outcome.selection is not None
    assert outcome.selection["chosen"] == "venn_abers"
    assert outcome.selection["cv_folds"] == 4


def test_many_distinct_scores_swap_venn_abers_for_bounded_isotonic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    venn_abers = candidates_module._BY_LABEL["venn_abers"]
    assert venn_abers.max_distinct == 50_000
    assert venn_abers.fallback == "isotonic"
    smaller = dataclasses.replace(venn_abers, max_distinct=1000)
    monkeypatch.setitem(candidates_module._BY_LABEL, "venn_abers", smaller)
    f, y, w = _step_batch(np.random.default_rng(7), 1001)
    outcome = fit_calibrator("auto", {}, f, y, w)
    assert outcome.method == "isotonic"
    assert outcome.params == {"interpolation": "linear", "bound": "laplace"}
    assert outcome.selection is not None
    assert list(outcome.selection["candidates"]) == ["platt", "isotonic"]
    assert outcome.selection["skipped"]["venn_abers"] == (
        "1001 distinct scores, over 1000: isotonic instead"
    )
    # tied scores count once: 1001 rows on 500 distinct scores keep venn_abers
    tied = fit_calibrator("auto", {}, np.round(f * 250) / 250, y, w)
    assert tied.selection is not None
    assert "venn_abers" in tied.selection["candidates"]
    # named candidates are taken as named
    named = fit_calibrator("auto", {"candidates": ["platt", "venn_abers"]}, f, y, w)
    assert named.selection is not None
    assert list(named.selection["candidates"]) == ["platt", "venn_abers"]


def test_record_holds_every_candidate_with_its_standard_error() -> None:
    f, y, w = sigmoid_batch(np.random.default_rng(9), 400)
    outcome = fit_calibrator("auto", {}, f, y, w)
    record = outcome.selection
    assert record is not None
    assert record["metric"] == "log_loss"
    assert record["cv_folds"] == 5
    candidates = record["candidates"]
    # margins, not probabilities: beta is skipped, and says why
    assert list(candidates) == ["platt", "venn_abers"]
    assert record["skipped"] == {"beta": "needs probabilities"}
    assert candidates["platt"]["params"] == {"bound": "laplace"}
    assert candidates["venn_abers"]["params"] == {}
    # the stored out-of-fold predictions are the chosen candidate's from the selection CV,
    # and the recorded loss is scikit-learn-equivalent log loss of them
    chosen = record["chosen"]
    assert log_loss(outcome.out_of_fold, y, w) == pytest.approx(
        candidates[chosen]["log_loss"], rel=1e-12
    )
    # the standard error of the mean per-point loss, s / sqrt(n), computed independently
    p = outcome.out_of_fold
    per_point = -np.log(np.clip(np.where(y == 1, p, 1 - p), 1e-15, 1 - 1e-15))
    expected = per_point.std(ddof=1) / np.sqrt(y.size)
    assert candidates[chosen]["log_loss_se"] == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_auto_stores_the_chosen_methods_own_out_of_fold_predictions(seed: int) -> None:
    # in input order, point for point: the fit sorts the batch once and must undo it
    f, y, w = sigmoid_batch(np.random.default_rng(seed), 500)
    w = np.random.default_rng(seed).uniform(0.5, 2.0, size=y.size)
    outcome = fit_calibrator("auto", {"cv": 4}, f, y, w)
    direct = fit_calibrator(outcome.method, outcome.params, f, y, w, n_folds=4)
    np.testing.assert_allclose(outcome.out_of_fold, direct.out_of_fold, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(outcome.calibrator.predict(f), direct.calibrator.predict(f))


def test_select_reproduces_each_candidates_own_cross_validation() -> None:
    f, y, w = sigmoid_batch(np.random.default_rng(10), 300)
    folds = stratified_class_folds(y.astype(np.int64), 5, sample_weight=w)
    table = (Candidate("platt", "platt", {}), Candidate("isotonic", "isotonic", {}))
    chosen = select(table, lambda c: make_calibrator(c.method, c.params), f, y, w, folds)
    for candidate in table:
        expected = np.empty_like(f)
        for fold in range(5):
            train = folds != fold
            fitted = make_calibrator(candidate.method, {}).fit(f[train], y[train], w[train])
            expected[~train] = fitted.predict(f[~train])
        np.testing.assert_array_equal(chosen.out_of_fold[candidate.label], expected)


def test_a_tie_goes_to_the_simpler_candidate() -> None:
    # two candidates computing the very same thing: the first (simpler) one must be kept
    f, y, w = sigmoid_batch(np.random.default_rng(1), 300)
    folds = stratified_class_folds(y.astype(np.int64), 5, sample_weight=w)
    table = (Candidate("platt", "platt", {}), Candidate("copy", "platt", {}))
    chosen = select(table, lambda c: make_calibrator(c.method, c.params), f, y, w, folds)
    assert chosen.log_losses["platt"] == chosen.log_losses["copy"]
    assert chosen.chosen.label == "platt"


def test_beta_is_a_candidate_only_for_scores_in_the_open_unit_interval() -> None:
    f, y, w = sigmoid_batch(np.random.default_rng(3), 300)
    probabilities = 1 / (1 + np.exp(-f))
    outcome = fit_calibrator("auto", {}, probabilities, y, w, n_jobs=2)
    assert outcome.selection is not None
    assert list(outcome.selection["candidates"]) == ["platt", "beta", "venn_abers"]
    # threads over candidates x folds give the very same numbers as one thread
    serial = fit_calibrator("auto", {}, probabilities, y, w, n_jobs=1)
    assert serial.selection == outcome.selection
    spec = AutoSpec()
    assert [c.label for c in eligible_candidates(spec, np.array([0.0, 0.5]))[0]] == [
        "platt",
        "venn_abers",
    ]


def test_named_candidates_include_the_trimmed_variants() -> None:
    f, y, w = sigmoid_batch(np.random.default_rng(4), 200)
    params = {"candidates": ["isotonic_trim_trainset", "platt", "temperature"]}
    outcome = fit_calibrator("auto", params, f, y, w)
    assert outcome.selection is not None
    assert list(outcome.selection["candidates"]) == ["platt", "isotonic_trim_trainset"]
    assert outcome.selection["skipped"] == {"temperature": "fits no vector of scores"}
    with pytest.raises(CalibrationError, match="none of them can fit this batch"):
        fit_calibrator("auto", {"candidates": ["temperature"]}, f, y, w)


def test_cv_reduced_for_a_rare_class() -> None:
    f, y, w = sigmoid_batch(np.random.default_rng(2), 60)
    y[:] = 0.0
    y[[1, 5, 9]] = 1.0
    outcome = fit_calibrator("auto", {"cv": 10}, f, y, w)
    assert outcome.selection is not None
    assert outcome.selection["cv_folds"] == 3


@pytest.mark.parametrize("seed", range(5))
def test_auto_never_answers_exactly_zero_or_one(seed: int) -> None:
    # separable small batches: unbounded isotonic and histogram binning answer 0 and 1 there
    rng = np.random.default_rng(seed)
    f = np.sort(rng.normal(size=40))
    y = (f > 0).astype(np.float64)
    extremes = np.array([-1e300, -1e3, f[0], 0.0, f[-1], 1e3, 1e300])
    for params in ({}, {"candidates": ["histogram_binning", "isotonic", "platt"]}):
        outcome = fit_calibrator("auto", params, f, y, None)
        p = outcome.calibrator.predict(extremes)
        assert np.all((p > 0.0) & (p < 1.0)), (params, p)
        if outcome.method != "venn_abers":  # which never answers 0 or 1 by construction
            assert outcome.calibrator.state()["bound"] == [1 / 42, 41 / 42]
    logits = rng.normal(scale=30.0, size=(60, 3))
    labels = np.argmax(logits, axis=1)
    rows = fit_calibrator("auto", {}, logits, labels, None).calibrator.predict(logits * 100)
    assert np.all((rows > 0.0) & (rows < 1.0))


@pytest.mark.parametrize(
    ("params", "loc"),
    [
        ({"cv": 1}, ("cv",)),
        ({"cv": 21}, ("cv",)),
        ({"cv": "5"}, ("cv",)),
        ({"folds": 5}, ("folds",)),
        ({"candidates": []}, ("candidates",)),
        ({"candidates": "platt"}, ("candidates",)),
        ({"candidates": ["platt", "svm"]}, ("candidates", 1)),
        ({"candidates": [["platt"]]}, ("candidates", 0)),
        ({"candidates": ["platt", {"a": 1}]}, ("candidates", 1)),
        ({"candidates": [None]}, ("candidates", 0)),
    ],
)
def test_auto_params(params: dict[str, object], loc: tuple[str | int, ...]) -> None:
    assert AutoSpec.from_params({}).params == {
        "cv": 5,
        "candidates": ["temperature", "bostrom", "platt", "beta", "venn_abers"],
    }
    assert AutoSpec.from_params({"candidates": ["platt", "platt"]}).candidates == ("platt",)
    with pytest.raises(ParamError) as info:
        AutoSpec.from_params(params)
    assert info.value.field == loc[0]
    assert info.value.loc == ("params", *loc)
