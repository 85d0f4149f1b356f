"""Method ``auto``: the papers' learning-curve result, the record, the tie rule."""

from __future__ import annotations

import numpy as np
import pytest

from app.calibration import ParamError, PlattCalibrator, fit_calibrator
from app.calibration import selection as selection_module
from app.calibration.metrics import log_loss
from app.calibration.selection import (
    Candidate,
    auto_params,
    eligible_candidates,
    select_method,
)
from tests.calibration.batches import sigmoid_batch


def _step_batch(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """P(y = 1 | f) jumps from 0.1 to 0.9 at f = 0.3: no sigmoid in f fits that."""
    f = rng.uniform(-1, 1, size=n)
    y = (rng.random(n) < np.where(f < 0.3, 0.1, 0.9)).astype(np.float64)
    return f, y, np.ones(n)


@pytest.mark.parametrize("seed", range(3))
def test_platt_wins_on_a_small_sigmoid_batch(seed: int) -> None:
    f, y, w = sigmoid_batch(np.random.default_rng(seed), 120)
    outcome = fit_calibrator("auto", {}, f, y, w)
    assert outcome.method == "platt"
    assert isinstance(outcome.calibrator, PlattCalibrator)
    record = outcome.selection
    assert record is not None
    losses = {name: c["log_loss"] for name, c in record["candidates"].items()}
    assert losses["platt"] < losses["isotonic"]


@pytest.mark.parametrize("seed", range(3))
def test_isotonic_wins_on_a_large_step_batch(seed: int) -> None:
    f, y, w = _step_batch(np.random.default_rng(seed), 5000)
    outcome = fit_calibrator("auto", {"cv": 4}, f, y, w)
    assert outcome.method == "isotonic"
    assert outcome.params == {"interpolation": "linear"}
    assert outcome.selection is not None
    assert outcome.selection["chosen"] == "isotonic"
    assert outcome.selection["cv_folds"] == 4


def test_record_holds_every_candidate_and_reuses_the_selection_folds() -> None:
    f, y, w = sigmoid_batch(np.random.default_rng(9), 400)
    outcome = fit_calibrator("auto", {}, f, y, w)
    assert outcome.selection is not None
    assert outcome.selection["metric"] == "log_loss"
    assert outcome.selection["cv_folds"] == 5
    candidates = outcome.selection["candidates"]
    # margins, not probabilities: beta is no candidate (the trimmed variants are not asserted)
    assert list(candidates)[:3] == ["platt", "histogram_binning", "isotonic"]
    assert "beta" not in candidates
    assert candidates["isotonic"]["method"] == "isotonic"
    assert candidates["isotonic"]["params"] == {}
    chosen = outcome.selection["chosen"]
    # the stored out-of-fold predictions are the chosen candidate's from the selection CV
    assert log_loss(outcome.out_of_fold, y, w) == candidates[chosen]["log_loss"]
    direct = select_method(f, y, w, cv=5)
    np.testing.assert_array_equal(outcome.out_of_fold, direct.out_of_fold[chosen])


def test_a_tie_goes_to_the_simpler_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    # two candidates computing the very same thing: the first (simpler) one must be kept
    table = (Candidate("platt", "platt", {}), Candidate("isotonic", "platt", {}))
    monkeypatch.setattr(selection_module, "CANDIDATES", table)
    f, y, w = sigmoid_batch(np.random.default_rng(1), 300)
    chosen = select_method(f, y, w)
    assert chosen.log_losses["platt"] == chosen.log_losses["isotonic"]
    assert chosen.chosen.label == "platt"


def test_beta_is_a_candidate_only_for_scores_in_the_open_unit_interval() -> None:
    f, y, w = sigmoid_batch(np.random.default_rng(3), 300)
    probabilities = 1 / (1 + np.exp(-f))
    outcome = fit_calibrator("auto", {}, probabilities, y, w, n_jobs=2)
    assert outcome.selection is not None
    assert list(outcome.selection["candidates"])[:4] == [
        "platt",
        "beta",
        "histogram_binning",
        "isotonic",
    ]
    # threads over candidates x folds give the very same numbers as one thread
    serial = select_method(probabilities, y, w, n_jobs=1)
    assert serial.log_losses == {
        label: c["log_loss"] for label, c in outcome.selection["candidates"].items()
    }
    assert [c.label for c in eligible_candidates(np.array([0.0, 0.5]))][:1] == ["platt"]
    assert "beta" not in [c.label for c in eligible_candidates(np.array([0.0, 0.5]))]


def test_cv_reduced_for_a_rare_class() -> None:
    f, y, w = sigmoid_batch(np.random.default_rng(2), 60)
    y[:] = 0.0
    y[[1, 5, 9]] = 1.0
    outcome = fit_calibrator("auto", {"cv": 10}, f, y, w)
    assert outcome.selection is not None
    assert outcome.selection["cv_folds"] == 3


@pytest.mark.parametrize(
    ("params", "field"),
    [({"cv": 1}, "cv"), ({"cv": 21}, "cv"), ({"cv": "5"}, "cv"), ({"folds": 5}, "folds")],
)
def test_auto_params(params: dict[str, object], field: str) -> None:
    assert auto_params({}) == {"cv": 5}
    with pytest.raises(ParamError) as info:
        auto_params(params)
    assert info.value.field == field
