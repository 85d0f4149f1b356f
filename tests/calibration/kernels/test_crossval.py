"""Cross-validation: out of fold, stratified, deterministic, the same in threads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np
import pytest

from app.calibration import CalibrationError, IsotonicCalibrator, PlattCalibrator
from app.calibration.base import FloatArray, JSONValue
from app.calibration.kernels.crossval import (
    effective_folds,
    out_of_fold_predictions,
    stratified_folds,
)
from tests.calibration.batches import random_weights, sigmoid_batch


class RecordingCalibrator:
    """A spy: remembers what each instance was fitted on and predicted; predicts 1 for a seen
    score, 0 for an unseen one (scores are point ids here)."""

    method: ClassVar[str] = "recording"
    log: ClassVar[list[tuple[set[float], list[float]]]] = []

    def __init__(self) -> None:
        self.seen: set[float] = set()

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> Self:
        return cls()

    @property
    def params(self) -> dict[str, JSONValue]:
        return {}

    def fit(self, scores: FloatArray, labels: FloatArray, sample_weight: FloatArray) -> Self:
        self.seen = set(scores.tolist())
        return self

    def predict(self, scores: FloatArray) -> FloatArray:
        self.log.append((self.seen, scores.tolist()))
        return np.isin(scores, list(self.seen)).astype(np.float64)

    def state(self) -> dict[str, JSONValue]:
        return {}

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        return cls()


def test_every_point_is_predicted_once_out_of_fold() -> None:
    rng = np.random.default_rng(0)
    n = 103
    ids = np.arange(n, dtype=np.float64)
    labels = (rng.random(n) < 0.3).astype(np.float64)
    RecordingCalibrator.log.clear()
    out = out_of_fold_predictions(RecordingCalibrator, ids, labels, np.ones(n), 5)
    assert np.all(out == 0.0)  # no point was predicted by a calibrator that saw it
    assert len(RecordingCalibrator.log) == 5
    predicted = [i for _, test in RecordingCalibrator.log for i in test]
    assert sorted(predicted) == ids.tolist()  # each point exactly once
    for train, test in RecordingCalibrator.log:
        assert train | set(test) == set(ids.tolist())


@pytest.mark.parametrize(("n", "n_pos", "k"), [(100, 30, 5), (57, 7, 5), (23, 11, 3), (40, 20, 20)])
def test_folds_are_stratified_and_balanced(n: int, n_pos: int, k: int) -> None:
    labels = np.zeros(n)
    labels[np.random.default_rng(n).choice(n, n_pos, replace=False)] = 1.0
    folds = stratified_folds(labels, k)
    assert set(folds.tolist()) == set(range(k))
    sizes = np.bincount(folds, minlength=k)
    positives = np.bincount(folds, weights=labels, minlength=k)
    assert sizes.max() - sizes.min() <= 1
    assert positives.max() - positives.min() <= 1
    assert (sizes - positives).max() - (sizes - positives).min() <= 1


def test_folds_are_deterministic_and_shuffled() -> None:
    labels = (np.arange(200) % 3 == 0).astype(np.float64)
    first = stratified_folds(labels, 5)
    np.testing.assert_array_equal(first, stratified_folds(labels, 5))
    assert not np.array_equal(first, stratified_folds(labels, 5, seed=1))
    assert not np.array_equal(first[:10], np.arange(10) % 5)  # not simply in input order


def test_effective_folds() -> None:
    def labels(n_pos: int, n_neg: int) -> np.ndarray:
        return np.r_[np.ones(n_pos), np.zeros(n_neg)]

    assert effective_folds(labels(50, 50), 5) == 5
    assert effective_folds(labels(3, 50), 5) == 3  # reduced to the smaller class
    assert effective_folds(labels(1, 50), 5) == 2  # never below 2
    assert effective_folds(labels(1, 1), 10) == 2
    with pytest.raises(CalibrationError, match=r"^n_folds: "):
        effective_folds(labels(5, 5), 1)


def test_a_single_positive_still_gets_out_of_fold_predictions() -> None:
    f = np.linspace(-1, 1, 9)
    y = np.r_[np.zeros(8), 1.0]
    out = out_of_fold_predictions(lambda: PlattCalibrator.from_params({}), f, y, np.ones(9), 5)
    assert np.all((out > 0) & (out < 1))


@pytest.mark.parametrize("make", [PlattCalibrator, IsotonicCalibrator])
def test_threads_give_the_same_predictions(
    make: type[PlattCalibrator | IsotonicCalibrator],
) -> None:
    rng = np.random.default_rng(1)
    f, y, _ = sigmoid_batch(rng, 2000, decimals=2)
    w = random_weights(rng, 2000)
    serial = out_of_fold_predictions(make, f, y, w, 5, n_jobs=1)
    threaded = out_of_fold_predictions(make, f, y, w, 5, n_jobs=2)
    np.testing.assert_array_equal(serial, threaded)


def test_positive_weight_reaches_every_training_part() -> None:
    n = 50
    f = np.linspace(0, 1, n)
    y = (np.arange(n) % 2).astype(np.float64)
    w = np.zeros(n)
    w[[3, 4]] = 1.0  # only two points carry weight: they must land in different folds
    out = out_of_fold_predictions(IsotonicCalibrator, f, y, w, 5)
    assert np.all((out >= 0) & (out <= 1))
    w[4] = 0.0
    with pytest.raises(CalibrationError, match=r"^sample_weight: "):
        out_of_fold_predictions(IsotonicCalibrator, f, y, w, 5)
