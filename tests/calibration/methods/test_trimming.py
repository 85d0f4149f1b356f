"""Trimmed calibration (Rüping, *Robust Probabilistic Calibration*) for Platt and isotonic."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import orjson
import pytest
from sklearn.linear_model import LogisticRegression

from app.calibration import (
    IsotonicCalibrator,
    ParamError,
    PlattCalibrator,
    StateError,
    fit_calibrator,
    load_calibrator,
)
from app.calibration.kernels.crossval import effective_folds, stratified_folds
from app.calibration.measures.metrics import brier_score, log_loss
from app.calibration.methods.trim_spec import TrimSpec
from app.calibration.methods.trimming import choose_tau
from tests.calibration.batches import random_weights, sigmoid_batch

Classes = type[PlattCalibrator] | type[IsotonicCalibrator]
BOTH: list[Classes] = [PlattCalibrator, IsotonicCalibrator]
TRIM_DEFAULTS = {
    "trim_tau_min": 0.9,
    "trim_grid": 11,
    "trim_center": None,
    "trim_loss": "brier",
    "trim_folds": 10,
}


def _gaussians(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two unit Gaussians in 2-d, centred at (0, 0) and (2, 0), classes equally likely."""
    y = (rng.random(n) < 0.5).astype(np.float64)
    x = rng.normal(size=(n, 2))
    x[:, 0] += 2.0 * y
    return x, y


@pytest.fixture(scope="module")
def ruping() -> dict[str, np.ndarray]:
    """Rüping's setting (section 3, Fig. 2): a linear scorer trained on clean data; the
    calibration set gets 4% far-away outliers with the wrong label; a clean test set."""
    rng = np.random.default_rng(2007)
    model = LogisticRegression().fit(*_gaussians(rng, 2000))
    x_cal, y_cal = _gaussians(rng, 1000)
    x_out = rng.normal(scale=0.5, size=(40, 2)) + np.array([12.0, 0.0])  # scored ~ +20, labelled 0
    x_test, y_test = _gaussians(rng, 5000)
    return {
        "f_clean": model.decision_function(x_cal),
        "y_clean": y_cal,
        "f_dirty": model.decision_function(np.vstack([x_cal, x_out])),
        "y_dirty": np.concatenate([y_cal, np.zeros(40)]),
        "f_test": model.decision_function(x_test),
        "y_test": y_test,
    }


def _test_brier(
    cls: Classes, params: dict[str, object], data: dict[str, np.ndarray], kind: str
) -> tuple[float, dict[str, object] | None]:
    f, y = data[f"f_{kind}"], data[f"y_{kind}"]
    calibrator = cls.from_params(params).fit(f, y, np.ones(f.size))
    return brier_score(calibrator.predict(data["f_test"]), data["y_test"]), calibrator.trim_info


def test_cv_trimmed_platt_resists_far_outliers(ruping: dict[str, np.ndarray]) -> None:
    plain, _ = _test_brier(PlattCalibrator, {}, ruping, "dirty")
    trimmed, info = _test_brier(PlattCalibrator, {"trim": "cv"}, ruping, "dirty")
    clean_plain, _ = _test_brier(PlattCalibrator, {}, ruping, "clean")
    clean_trimmed, clean_info = _test_brier(PlattCalibrator, {"trim": "cv"}, ruping, "clean")
    assert info is not None
    assert clean_info is not None
    print(
        f"\nplatt outliers: plain {plain:.5f} trimmed {trimmed:.5f} tau {info['tau']:.2f}"
        f"\nplatt clean: plain {clean_plain:.5f} trimmed {clean_trimmed:.5f}"
        f" tau {clean_info['tau']:.2f}"
    )
    assert trimmed < 0.6 * plain  # the outliers flatten the plain sigmoid
    assert trimmed < 1.01 * clean_plain  # ... and trimming recovers the clean fit
    assert info["tau"] < 0.97  # at least the 40 outliers (3.8%) dropped
    assert clean_trimmed <= 1.01 * clean_plain


@pytest.mark.parametrize("kind", ["dirty", "clean"])
def test_trainset_trimmed_isotonic_is_not_worse(ruping: dict[str, np.ndarray], kind: str) -> None:
    plain, _ = _test_brier(IsotonicCalibrator, {}, ruping, kind)
    trimmed, info = _test_brier(IsotonicCalibrator, {"trim": "trainset"}, ruping, kind)
    assert info is not None
    print(f"\nisotonic {kind}: plain {plain:.5f} trimmed {trimmed:.5f} tau {info['tau']:.2f}")
    assert trimmed <= 1.01 * plain


@pytest.mark.parametrize("mode", ["trainset", "cv"])
def test_tau_one_is_the_plain_fit(mode: str) -> None:
    rng = np.random.default_rng(1)
    f, y, _ = sigmoid_batch(rng, 300)
    w = random_weights(rng, 300)
    params = {"trim": mode, "trim_tau_min": 1}
    platt, plain_platt = PlattCalibrator.from_params(params), PlattCalibrator()
    platt.fit(f, y, w)
    plain_platt.fit(f, y, w)
    assert (platt.A, platt.B) == (plain_platt.A, plain_platt.B)
    isotonic = IsotonicCalibrator.from_params(params).fit(f, y, w)
    plain_isotonic = IsotonicCalibrator().fit(f, y, w)
    np.testing.assert_array_equal(isotonic.thresholds, plain_isotonic.thresholds)
    np.testing.assert_array_equal(isotonic.values, plain_isotonic.values)
    for calibrator in (platt, isotonic):
        assert calibrator.trim_info is not None
        assert calibrator.trim_info["tau"] == 1.0
        assert len(calibrator.trim_info["grid_losses"]) == 1


def _nearest(f: np.ndarray, center: float, tau: float) -> np.ndarray:
    """Indices of the ceil(tau n) scores nearest the centre, ties by index (exact ceil)."""
    m = math.ceil(Fraction(tau).limit_denominator(10_000) * f.size)
    return np.lexsort((np.arange(f.size), np.abs(f - center)))[:m]


@pytest.mark.parametrize(
    ("shift", "center_param", "center"),
    [(0.0, None, 0.0), (0.5, None, 0.5), (0.0, 1.0, 1.0), (0.5, -0.25, -0.25)],
)
def test_kept_points_and_centre(shift: float, center_param: float | None, center: float) -> None:
    rng = np.random.default_rng(2)
    f, y, w = sigmoid_batch(rng, 1000)
    if shift:  # probabilities: every score in [0, 1]
        f = 1.0 / (1.0 + np.exp(-f))
    spec = TrimSpec(mode="trainset", center=center_param, grid=21)
    calls: list[int] = []

    def fit_predict(train: np.ndarray, eval_scores: np.ndarray) -> np.ndarray:
        calls.append(train.size)
        return PlattCalibrator().fit(f[train], y[train], w[train]).predict(eval_scores)

    result = choose_tau(fit_predict, f, y, w, spec)
    assert result.center == center
    assert result.tau in spec.taus().tolist()
    assert len(result.grid_losses) == 21
    np.testing.assert_array_equal(np.sort(result.kept), np.sort(_nearest(f, center, result.tau)))
    assert result.radius == np.max(np.abs(f[result.kept] - center))
    assert sorted(set(calls)) == sorted({math.ceil(900 + 5 * i) for i in range(21)})


@pytest.mark.parametrize("loss", ["brier", "log_loss"])
@pytest.mark.parametrize("cls", BOTH)
def test_trainset_criterion_is_the_loss_over_all_points(cls: Classes, loss: str) -> None:
    rng = np.random.default_rng(3)
    f, y, _ = sigmoid_batch(rng, 400)
    w = random_weights(rng, 400, zero_fraction=0.0)
    f[:12] = np.where(y[:12] > 0, -9.0, 9.0)  # confident and wrong
    calibrator = cls.from_params({"trim": "trainset", "trim_loss": loss}).fit(f, y, w)
    metric = brier_score if loss == "brier" else log_loss
    taus = np.linspace(0.9, 1.0, 11)
    expected = []
    for tau in taus:
        kept = _nearest(f, 0.0, tau)
        plain = cls().fit(f[kept], y[kept], w[kept])
        expected.append(metric(plain.predict(f), y, w))
    assert calibrator.trim_info is not None
    np.testing.assert_allclose(calibrator.trim_info["grid_losses"], expected, rtol=1e-12)
    best = np.flatnonzero(np.isclose(expected, min(expected), rtol=1e-12, atol=0))[-1]
    assert calibrator.trim_info["tau"] == taus[best]
    refit = cls().fit(*(a[np.sort(_nearest(f, 0.0, taus[best]))] for a in (f, y, w)))
    np.testing.assert_array_equal(calibrator.predict(f), refit.predict(f))


def test_cv_criterion_is_the_pooled_held_out_loss() -> None:
    rng = np.random.default_rng(4)
    f, y, w = sigmoid_batch(rng, 300)
    f[:9] = np.where(y[:9] > 0, -8.0, 8.0)
    calibrator = PlattCalibrator.from_params({"trim": "cv", "trim_folds": 5}).fit(f, y, w)
    folds = stratified_folds(y, effective_folds(y, 5))
    expected = []
    for tau in np.linspace(0.9, 1.0, 11):
        p = np.empty(f.size)
        for k in range(5):
            train = np.flatnonzero(folds != k)
            kept = train[_nearest(f[train], 0.0, tau)]
            p[folds == k] = PlattCalibrator().fit(f[kept], y[kept], w[kept]).predict(f[folds == k])
        expected.append(brier_score(p, y, w))
    assert calibrator.trim_info is not None
    np.testing.assert_allclose(calibrator.trim_info["grid_losses"], expected, rtol=1e-12)


@pytest.mark.parametrize("cls", BOTH)
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"trim": "median"}, "trim"),
        ({"trim": True}, "trim"),
        ({"trim": "cv", "trim_tau_min": 0}, "trim_tau_min"),
        ({"trim": "cv", "trim_tau_min": 1.5}, "trim_tau_min"),
        ({"trim": "cv", "trim_tau_min": True}, "trim_tau_min"),
        ({"trim": "cv", "trim_tau_min": "0.9"}, "trim_tau_min"),
        ({"trim": "cv", "trim_tau_min": None}, "trim_tau_min"),
        ({"trim": "cv", "trim_grid": 10}, "trim_grid"),
        ({"trim": "cv", "trim_grid": 102}, "trim_grid"),
        ({"trim": "cv", "trim_grid": 11.0}, "trim_grid"),
        ({"trim": "cv", "trim_center": "0"}, "trim_center"),
        ({"trim": "cv", "trim_center": math.inf}, "trim_center"),
        ({"trim": "cv", "trim_center": False}, "trim_center"),
        ({"trim": "cv", "trim_loss": "ece"}, "trim_loss"),
        ({"trim": "cv", "trim_folds": 1}, "trim_folds"),
        ({"trim": "cv", "trim_folds": 21}, "trim_folds"),
        ({"trim_radius": 2.0}, "trim_radius"),
    ],
)
def test_bad_trim_params_name_the_key(cls: Classes, params: dict[str, object], field: str) -> None:
    with pytest.raises(ParamError) as info:
        cls.from_params(params)
    assert info.value.field == field


@pytest.mark.parametrize("cls", BOTH)
def test_params_list_the_trim_keys_only_when_trimming(cls: Classes) -> None:
    plain = cls.from_params({}).params
    assert not any(key.startswith("trim") for key in plain)
    trimmed = cls.from_params({"trim": "trainset"}).params
    assert trimmed == {**plain, "trim": "trainset", **TRIM_DEFAULTS}
    custom = {"trim": "cv", "trim_tau_min": 1, "trim_center": 2, "trim_loss": "log_loss"}
    params = cls.from_params(custom).params
    assert params["trim_tau_min"] == 1.0
    assert params["trim_center"] == 2.0
    assert cls.from_params(orjson.loads(orjson.dumps(params))).params == params


@pytest.mark.parametrize("method", ["platt", "isotonic"])
@pytest.mark.parametrize("trim", ["none", "trainset", "cv"])
def test_state_round_trips_with_and_without_trim(method: str, trim: str) -> None:
    rng = np.random.default_rng(5)
    f, y, _ = sigmoid_batch(rng, 500)
    w = random_weights(rng, 500)
    outcome = fit_calibrator(method, {"trim": trim}, f, y, w)
    state = orjson.loads(orjson.dumps(outcome.calibrator.state()))
    assert ("trim" in state) == (trim != "none")
    if trim != "none":
        assert set(state["trim"]) == {"tau", "center", "radius", "grid_losses"}
    params = orjson.loads(orjson.dumps(outcome.params))
    loaded = load_calibrator(method, params, state)
    grid = np.concatenate([f, np.linspace(-30, 30, 121)])
    np.testing.assert_array_equal(loaded.predict(grid), outcome.calibrator.predict(grid))
    assert loaded.state() == state
    assert loaded.params == outcome.params


@pytest.mark.parametrize(
    "trim",
    [
        [],
        {"tau": 0.9, "center": 0.0, "radius": 1.0},
        {"tau": 0.0, "center": 0.0, "radius": 1.0, "grid_losses": [0.1]},
        {"tau": 0.9, "center": 0.0, "radius": -1.0, "grid_losses": [0.1]},
        {"tau": 0.9, "center": 0.0, "radius": 1.0, "grid_losses": []},
        {"tau": 0.9, "center": None, "radius": 1.0, "grid_losses": [0.1]},
    ],
)
def test_bad_trim_state_is_refused(trim: object) -> None:
    with pytest.raises(StateError, match=r"^state"):
        PlattCalibrator.from_state({}, {"A": -1.0, "B": 0.0, "n_iter": 3, "trim": trim})
    with pytest.raises(StateError, match=r"^state"):
        IsotonicCalibrator.from_state({}, {"thresholds": [0.0], "values": [0.5], "trim": trim})


@pytest.mark.parametrize("cls", BOTH)
@pytest.mark.parametrize("mode", ["trainset", "cv"])
def test_deterministic_and_zero_weights_change_nothing(cls: Classes, mode: str) -> None:
    rng = np.random.default_rng(6)
    f, y, _ = sigmoid_batch(rng, 400)
    f[:10] = np.where(y[:10] > 0, -7.0, 7.0)
    w = rng.uniform(0.5, 2.0, size=400)
    first = cls.from_params({"trim": mode}).fit(f, y, w).state()
    assert cls.from_params({"trim": mode}).fit(f, y, w).state() == first
    # 200 extra points of zero weight, any score and label, interleaved (the others' order kept)
    slots = np.sort(rng.choice(600, size=400, replace=False))
    f2, y2, w2 = rng.normal(scale=5.0, size=600), (rng.random(600) < 0.5) * 1.0, np.zeros(600)
    f2[slots], y2[slots], w2[slots] = f, y, w
    second = cls.from_params({"trim": mode}).fit(f2, y2, w2).state()
    first_info, second_info = first.pop("trim"), second.pop("trim")
    assert second == first
    assert second_info["tau"] == first_info["tau"]
    np.testing.assert_allclose(second_info["grid_losses"], first_info["grid_losses"], rtol=1e-12)
