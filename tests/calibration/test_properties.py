"""Properties over random batches: fit_calibrator fails only with CalibrationError, predicts
probabilities, and platt and isotonic are monotone in the score."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.calibration import METHODS, CalibrationError, fit_calibrator, load_calibrator

SCORES = st.one_of(
    st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False, allow_subnormal=True),
    st.sampled_from([0.0, 1.0, 0.5, -1.0, 1e-300, 5e-324, 1.7e308, -1.7e308]),
    st.floats(0.0, 1.0),
    st.integers(-3, 3).map(float),
)


@st.composite
def batches(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    n = draw(st.integers(2, 40))
    scores = np.array(draw(st.lists(SCORES, min_size=n, max_size=n)))
    labels = np.array(draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n)))
    labels[draw(st.integers(0, n - 1))] = 1.0 - labels[0]  # usually both classes
    weights = draw(
        st.one_of(
            st.none(),
            st.lists(st.sampled_from([0.0, 1e-6, 0.5, 1.0, 3.0, 1e6]), min_size=n, max_size=n).map(
                np.array
            ),
        )
    )
    return scores, labels, weights


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches(), method=st.sampled_from(METHODS), cv=st.integers(2, 6))
def test_fit_only_raises_calibration_errors_and_predicts_probabilities(
    batch: tuple[np.ndarray, np.ndarray, np.ndarray | None], method: str, cv: int
) -> None:
    scores, labels, weights = batch
    params = {"cv": cv} if method == "auto" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow or invalid-value warnings either
        try:
            outcome = fit_calibrator(method, params, scores, labels, weights, n_folds=cv)
        except CalibrationError:
            return
        grid = np.concatenate([np.sort(scores), np.linspace(-1e300, 1e300, 21)])
        grid.sort()
        p = outcome.calibrator.predict(grid)
        loaded = load_calibrator(outcome.method, outcome.params, outcome.calibrator.state())
        np.testing.assert_array_equal(loaded.predict(grid), p)
    for values in (p, outcome.out_of_fold):
        assert np.all(np.isfinite(values))
        assert np.all((values >= 0.0) & (values <= 1.0))
    assert outcome.out_of_fold.shape == scores.shape
    if outcome.method == "isotonic":
        assert np.all(np.diff(p) >= 0.0)
    if outcome.method == "platt":
        # 1/(1 + exp(A f + B)) is non-decreasing when A <= 0, which is what a score that ranks
        # positives higher gets; Platt does not constrain A, so anti-ranked data gets A > 0.
        direction = 1.0 if state_a(outcome.calibrator.state()) <= 0 else -1.0
        assert np.all(direction * np.diff(p) >= 0.0)


def state_a(state: dict[str, object]) -> float:
    a = state["A"]
    assert isinstance(a, float)
    return a
