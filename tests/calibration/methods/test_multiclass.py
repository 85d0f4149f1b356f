"""One-vs-rest against scikit-learn, the multiclass entry points, states and properties."""

from __future__ import annotations

import contextvars
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator
from sklearn.isotonic import IsotonicRegression

from app.calibration import (
    Abandoned,
    Budget,
    CalibrationError,
    IsotonicCalibrator,
    ParamError,
    PlattCalibrator,
    StateError,
    enter,
    fit_calibrator,
)
from app.calibration.kernels.crossval import effective_class_folds, stratified_class_folds
from app.calibration.measures.multiclass_metrics import multiclass_log_loss
from app.calibration.methods.multiclass import OneVsRest, load_multiclass, make_multiclass
from app.calibration.methods.registry import MULTICLASS_ONLY

METHODS = (*MULTICLASS_ONLY, "platt", "isotonic")


class _Logits(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """A 'classifier' whose decision_function is its input matrix."""

    def __init__(self, k: int = 3) -> None:
        self.k = k

    def fit(self, X: np.ndarray, y: np.ndarray) -> _Logits:
        self.classes_ = np.arange(self.k)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        labels: np.ndarray = np.argmax(X, axis=1)
        return labels

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=float)


class _Probabilities(_Logits):
    """The same, answering predict_proba (and no decision_function)."""

    decision_function = None  # type: ignore[assignment]

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=float)


def sklearn_calibrated(
    method: str, scores: np.ndarray, y: np.ndarray, w: np.ndarray | None = None, *, proba: bool
) -> np.ndarray:
    """scikit-learn's CalibratedClassifierCV on a frozen model returning ``scores``: one
    calibrator (ensemble=False) fitted on the whole batch, predicting that batch."""
    k = scores.shape[1]
    frozen = FrozenEstimator((_Probabilities if proba else _Logits)(k).fit(scores, y))
    model = CalibratedClassifierCV(frozen, method=method, ensemble=False)
    calibrated: np.ndarray = model.fit(scores, y, sample_weight=w).predict_proba(scores)
    return calibrated


def logit_batch(
    seed: int, n: int = 400, k: int = 4, T0: float = 1.7
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logits z ~ 2 N(0, 1) and labels drawn from softmax(z / T0), unit weights."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=2.0, size=(n, k))
    p = np.exp(z / T0 - (z / T0).max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (rng.random((n, 1)) > np.cumsum(p, axis=1)).sum(axis=1)
    return z, np.minimum(y, k - 1), np.ones(n)


@pytest.mark.filterwarnings("ignore:Since FrozenEstimator does not appear to accept sample_weight")
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize(("name", "sk_method"), [("platt", "sigmoid"), ("isotonic", "isotonic")])
def test_one_vs_rest_matches_sklearn(name: str, sk_method: str, weighted: bool) -> None:
    z, y, w = logit_batch(0)
    if weighted:
        w = np.random.default_rng(1).uniform(0.1, 3.0, size=y.size)
    ours = (
        OneVsRest({"platt": PlattCalibrator, "isotonic": IsotonicCalibrator}[name], {})
        .fit(z, y, w)
        .predict(z)
    )
    theirs = sklearn_calibrated(sk_method, z, y, w if weighted else None, proba=False)
    atol = 1e-6 if name == "platt" else 1e-12  # Platt: two optimisers, both near the optimum
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=atol)
    np.testing.assert_allclose(ours.sum(axis=1), 1.0, rtol=0, atol=1e-12)


def test_isotonic_one_vs_rest_is_per_column_isotonic_then_normalised() -> None:
    z, y, w = logit_batch(2, k=5)
    columns = np.column_stack(
        [
            IsotonicRegression(out_of_bounds="clip").fit(z[:, j], y == j).predict(z[:, j])
            for j in range(5)
        ]
    )
    expected = columns / columns.sum(axis=1, keepdims=True)
    ours = OneVsRest(IsotonicCalibrator, {}).fit(z, y, w).predict(z)
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-10)


def test_all_zero_rows_become_uniform_and_absent_classes_fit() -> None:
    z = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.9, 0.0]])
    y = np.array([1, 0, 1, 1])  # class 2 never occurs: its isotonic map is 0 everywhere
    ovr = OneVsRest(IsotonicCalibrator, {"interpolation": "step"}).fit(z, y, np.ones(4))
    p = ovr.predict(np.array([[-5.0, -5.0, 3.0], [1.0, 0.0, 0.0]]))
    np.testing.assert_array_equal(p[0], np.full(3, 1 / 3))  # every column calibrated to 0
    np.testing.assert_allclose(p[1], [1.0, 0.0, 0.0])


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("proba", [False, True])
def test_state_round_trip_predicts_identically(method: str, proba: bool) -> None:
    z, y, w = logit_batch(3)
    scores = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True) if proba else z
    if method == "bostrom" and not proba:
        with pytest.raises(CalibrationError, match="probability vector"):
            fit_calibrator(method, {}, scores, y, w)
        return
    fit = fit_calibrator(method, {}, scores, y, w, n_folds=3)
    assert fit.out_of_fold.shape == scores.shape
    assert fit.selection is None
    np.testing.assert_allclose(fit.out_of_fold.sum(axis=1), 1.0, atol=1e-9)
    state = orjson.loads(orjson.dumps(fit.calibrator.state()))
    params = orjson.loads(orjson.dumps(fit.params))
    loaded = load_multiclass(method, params, state)
    np.testing.assert_array_equal(loaded.predict(scores), fit.calibrator.predict(scores))
    assert loaded.method == method


@pytest.mark.parametrize(
    ("method", "params", "state"),
    [
        ("temperature", {}, {"T": 0.0, "input": "logits"}),
        ("temperature", {}, {"T": 1.0, "input": "margins"}),
        ("temperature", {}, {"T": 1.0}),
        ("bostrom", {}, {"mode": "constant", "r": 0.5}),
        ("bostrom", {"r": "constant"}, {"mode": "constant", "r": 1.5}),
        ("bostrom", {}, {"mode": "sigmoid", "a": -1.0, "b": 0.0}),
        ("bostrom", {}, {"mode": "sigmoid", "a": True, "b": 0.0}),
        ("platt", {}, {"one_vs_rest": [{"A": 1.0, "B": 0.0, "n_iter": 1}]}),
        ("platt", {}, {"one_vs_rest": [{"A": 1.0, "B": 0.0, "n_iter": 1}, [1.0]]}),
        ("isotonic", {}, {"one_vs_rest": "x"}),
        ("isotonic", {}, {"thresholds": [0.0], "values": [0.5]}),
        ("beta", {}, {}),
        ("temperature", {}, [1.0]),
    ],
)
def test_from_state_rejects_bad_states(method: str, params: dict[str, Any], state: Any) -> None:
    with pytest.raises(StateError):
        load_multiclass(method, params, state)


def test_make_multiclass_validates() -> None:
    assert make_multiclass("platt", {"targets": "hard"}).params["targets"] == "hard"
    with pytest.raises(ParamError, match=r"params\.r"):
        make_multiclass("bostrom", {"r": "isotonic"})
    with pytest.raises(ParamError, match=r"params\.T"):
        make_multiclass("temperature", {"T": 2.0})
    with pytest.raises(CalibrationError, match="unknown method 'auto'"):
        make_multiclass("auto", {})
    with pytest.raises(ParamError, match=r"params\.cv"):
        fit_calibrator("auto", {"cv": 1}, np.eye(3), [0, 1, 2], None)
    with pytest.raises(CalibrationError, match="2 classes"):
        fit_calibrator("platt", {}, np.eye(3), [1, 1, 1], None)


@pytest.mark.parametrize("proba", [False, True])
def test_auto_picks_the_lowest_cv_log_loss(proba: bool) -> None:
    z, y, w = logit_batch(4, n=600)
    scores = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True) if proba else z
    fit = fit_calibrator("auto", {"cv": 4}, scores, y, w)
    record = fit.selection
    assert record is not None
    assert record["metric"] == "log_loss"
    assert record["cv_folds"] == 4
    expected = ["temperature", "bostrom", "platt", "beta", "venn_abers"] if proba else [
        "temperature", "platt", "venn_abers"
    ]  # fmt: skip
    assert list(record["candidates"]) == expected
    if not proba:
        assert record["skipped"] == {
            "bostrom": "needs probabilities",
            "beta": "needs probabilities",
        }
    losses = {name: c["log_loss"] for name, c in record["candidates"].items()}
    # the labels follow softmax(z / 1.7): temperature scaling is the right model, chosen as
    # the best or, being the simplest, within half a standard error of it
    assert record["chosen"] == fit.method == "temperature"
    temperature = record["candidates"]["temperature"]
    assert temperature["excess"] == pytest.approx(losses["temperature"] - min(losses.values()))
    assert temperature["excess"] <= 0.5 * temperature["excess_se"] + 1e-15
    assert multiclass_log_loss(fit.out_of_fold, y) == pytest.approx(losses["temperature"])


def test_n_jobs_gives_the_same_out_of_fold() -> None:
    z, y, w = logit_batch(5, n=200)
    one = fit_calibrator("isotonic", {}, z, y, w, n_jobs=1)
    two = fit_calibrator("isotonic", {}, z, y, w, n_jobs=2)
    np.testing.assert_array_equal(one.out_of_fold, two.out_of_fold)


ENTRIES = st.one_of(
    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1.0, 0.5, -1.0, 1e-300, 1e300, -1e300]),
)


@st.composite
def matrices(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    n, k = draw(st.integers(2, 30)), draw(st.integers(2, 5))
    scores = np.array(draw(st.lists(ENTRIES, min_size=n * k, max_size=n * k))).reshape(n, k)
    if draw(st.booleans()):  # probability rows, some exactly one-hot or with zeros
        scores = np.abs(scores)
        scores[scores.sum(axis=1) == 0, 0] = 1.0
        scores = scores / scores.sum(axis=1, keepdims=True)
    labels = np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    weights = draw(
        st.one_of(
            st.none(),
            st.lists(st.sampled_from([0.0, 1e-6, 1.0, 3.0, 1e6]), min_size=n, max_size=n).map(
                np.array
            ),
        )
    )
    return scores, labels, weights


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=matrices(), method=st.sampled_from((*METHODS, "auto")), cv=st.integers(2, 4))
def test_fit_multiclass_fails_only_with_calibration_error(
    batch: tuple[np.ndarray, np.ndarray, np.ndarray | None], method: str, cv: int
) -> None:
    scores, labels, weights = batch
    params = {"cv": cv} if method == "auto" else {}
    try:
        fit = fit_calibrator(method, params, scores, labels, weights, n_folds=cv)
    except CalibrationError:
        return
    for p in (fit.out_of_fold, fit.calibrator.predict(scores)):
        assert p.shape == scores.shape
        assert np.all((p >= 0.0) & (p <= 1.0))
        np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-9)


def test_class_folds_split_every_class_evenly() -> None:
    rng = np.random.default_rng(6)
    y = rng.integers(0, 4, size=203)
    w = np.where(rng.random(203) < 0.2, 0.0, 1.0)
    k = effective_class_folds(y, 5)
    folds = stratified_class_folds(y, k, sample_weight=w)
    assert k == 5
    for group in (y + 4 * (w > 0) == g for g in range(8)):
        counts = np.bincount(folds[group], minlength=k)
        assert counts.max() - counts.min() <= 1
    assert np.ptp(np.bincount(folds)) <= 1
    assert effective_class_folds(np.array([0, 0, 0, 2, 2, 1]), 5) == 2  # class 1 has 1 point


def test_a_budget_spent_stops_one_vs_rest_between_classes() -> None:
    """Every loop over classes passes a checkpoint: a 4-row batch of many classes is as many
    fits, and a job whose budget is spent stops at the next class, not after the loop."""
    k = 50
    scores = np.random.default_rng(0).dirichlet(np.ones(k), size=4)
    labels = np.array([0, 1, 2, 3])
    fitted = OneVsRest(PlattCalibrator, {}).fit(scores, labels, np.ones(4))
    budget = Budget(seconds=60.0)
    calls = 0
    fit, predict = PlattCalibrator.fit, PlattCalibrator.predict

    def counted(real: Any) -> Any:
        def run(self: PlattCalibrator, *args: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 3:
                budget.cancelled.set()  # the client leaves during the third class
            return real(self, *args)

        return run

    def abandoned(run: Any) -> None:
        enter(budget)
        with pytest.raises(Abandoned):
            run()

    for method, run in (
        ("fit", lambda: OneVsRest(PlattCalibrator, {}).fit(scores, labels, np.ones(4))),
        ("predict", lambda: fitted.predict(scores)),
    ):
        calls = 0
        budget.cancelled.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(PlattCalibrator, method, counted(fit if method == "fit" else predict))
            contextvars.copy_context().run(abandoned, run)
        assert calls == 3, method  # the fourth class never started
