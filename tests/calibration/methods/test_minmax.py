"""Min-max scaling: the formula, constant batches, and scores near the float64 limits."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from app.calibration import MinMaxScaling, ParamError


def test_equals_its_formula() -> None:
    rng = np.random.default_rng(0)
    f = rng.normal(scale=3.0, size=200)
    w = np.ones(200)
    w[np.argmax(f)] = 0.0  # a zero-weight point is not part of the batch
    scaling = MinMaxScaling().fit(f, np.zeros(200), w)
    kept = f[w > 0]
    grid = np.linspace(-12, 12, 97)
    expected = np.clip((grid - kept.min()) / (kept.max() - kept.min()), 0, 1)
    np.testing.assert_allclose(scaling.predict(grid), expected, rtol=1e-14, atol=1e-15)
    assert scaling.state() == {"min": kept.min(), "max": kept.max()}


def test_constant_scores_give_one_half() -> None:
    scaling = MinMaxScaling().fit(np.full(4, 2.5), np.array([0, 1, 0, 1.0]), np.ones(4))
    np.testing.assert_array_equal(scaling.predict(np.array([-1e300, 2.5, 1e300])), 0.5)


def test_no_overflow_near_the_float64_limits() -> None:
    f = np.array([-1.7e308, 0.0, 1.7e308])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaling = MinMaxScaling().fit(f, np.array([0, 1, 1.0]), np.ones(3))
        np.testing.assert_array_equal(
            scaling.predict(np.array([-1.7e308, 0.0, 1.7e308])), [0, 0.5, 1]
        )
        tiny = MinMaxScaling().fit(np.array([5e-324, 1e-323]), np.array([0, 1.0]), np.ones(2))
        np.testing.assert_array_equal(tiny.predict(np.array([-1.7e308, 1.7e308])), [0.0, 1.0])


def test_no_params() -> None:
    with pytest.raises(ParamError, match="minmax takes no parameters"):
        MinMaxScaling.from_params({"clip": True})
