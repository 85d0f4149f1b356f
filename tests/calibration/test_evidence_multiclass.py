"""Evidence for Boström, *Calibrating Random Forests*: a forest's out-of-bag probabilities
calibrate it, lowering the test Brier score without touching the accuracy."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

from app.calibration.measures.multiclass_metrics import accuracy, multiclass_brier
from app.calibration.methods.bostrom import BostromCalibrator


@pytest.fixture(scope="module")
def forest() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(out-of-bag P, train labels, test P, test labels) of a 100-tree forest on the digits."""
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.5, stratify=y, random_state=0
    )
    model = RandomForestClassifier(n_estimators=100, oob_score=True, random_state=0, n_jobs=1)
    model.fit(X_train, y_train)
    oob = model.oob_decision_function_
    assert np.all(np.isfinite(oob))  # every training point was out of bag for some tree
    return oob, y_train, model.predict_proba(X_test), y_test


@pytest.mark.parametrize("mode", ["constant", "sigmoid"])
def test_out_of_bag_calibration_lowers_the_test_brier(
    forest: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], mode: str
) -> None:
    oob, y_train, P_test, y_test = forest
    calibrator = BostromCalibrator(mode).fit(oob, y_train, np.ones(y_train.size))
    before = multiclass_brier(P_test, y_test)
    after = multiclass_brier(calibrator.predict(P_test), y_test)
    print(f"bostrom {mode}: {calibrator.state()}; test Brier {before:.5f} -> {after:.5f}")
    assert after < before - 0.01  # a clear gain: a forest's votes are under-confident
    assert accuracy(calibrator.predict(P_test), y_test) == accuracy(P_test, y_test)
