"""Histogram binning: equal-frequency bins, a direct per-bin computation, ties, cv, params."""

from __future__ import annotations

import numpy as np
import pytest

from app.calibration import HistogramBinning, ParamError
from app.calibration.methods.binning import CV_GRID


def test_equals_a_direct_per_bin_computation() -> None:
    rng = np.random.default_rng(0)
    f = rng.normal(size=1000)  # distinct scores: bins of exactly 100
    y = (rng.random(1000) < 1 / (1 + np.exp(-2 * f))).astype(np.float64)
    binning = HistogramBinning(10).fit(f, y, np.ones(1000))
    order = np.argsort(f)
    chunks = np.split(order, 10)
    expected = np.array([y[c].mean() for c in chunks])
    np.testing.assert_allclose(binning.values, expected, rtol=1e-12)
    np.testing.assert_array_equal(binning.edges[1:-1], [f[c[0]] for c in chunks[1:]])
    np.testing.assert_allclose(binning.predict(f), expected[np.argsort(order) // 100])
    # outside the training range: the end bins
    np.testing.assert_array_equal(binning.predict(np.array([-1e300, 1e300])), expected[[0, -1]])
    laplace = HistogramBinning(10, "laplace").fit(f, y, np.ones(1000))
    sums = np.array([y[c].sum() for c in chunks])
    np.testing.assert_allclose(laplace.values, (sums + 1) / (100 + 2), rtol=1e-12)


def test_weights_count_as_frequencies() -> None:
    rng = np.random.default_rng(1)
    f, y = rng.normal(size=300), (rng.random(300) < 0.4).astype(np.float64)
    w = rng.integers(0, 4, size=300).astype(np.float64)
    weighted = HistogramBinning(7).fit(f, y, w)
    repeated = HistogramBinning(7).fit(
        np.repeat(f, w.astype(int)), np.repeat(y, w.astype(int)), np.ones(int(w.sum()))
    )
    np.testing.assert_array_equal(weighted.edges, repeated.edges)
    np.testing.assert_allclose(weighted.values, repeated.values, rtol=1e-12)


def test_ties_never_make_an_empty_bin() -> None:
    f = np.array([0.0] * 50 + [1.0] * 3 + [2.0] * 40 + [3.0])
    y = np.tile([0.0, 1.0], 47)
    binning = HistogramBinning(20).fit(f, y, np.ones(f.size))
    assert binning.values.size <= 4
    index = np.searchsorted(binning.edges[1:-1], f, side="right")
    assert np.all(np.bincount(index, minlength=binning.values.size) > 0)
    assert binning.state()["n_bins"] == 20


def test_cv_chooses_from_the_grid_and_records_it() -> None:
    rng = np.random.default_rng(2)
    f = rng.normal(size=3000)
    y = (rng.random(3000) < np.where(f > 0, 0.8, 0.2)).astype(np.float64)
    binning = HistogramBinning.from_params({"n_bins": "cv"}).fit(f, y, np.ones(3000))
    assert binning.params == {"n_bins": "cv", "smoothing": "none"}
    assert binning.state()["n_bins"] in CV_GRID
    assert binning.values.size == binning.state()["n_bins"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"n_bins": 1}, "n_bins"),
        ({"n_bins": 1001}, "n_bins"),
        ({"n_bins": True}, "n_bins"),
        ({"n_bins": "auto"}, "n_bins"),
        ({"smoothing": "m"}, "smoothing"),
        ({"bins": 3}, "bins"),
    ],
)
def test_bad_params_name_the_key(params: dict[str, object], field: str) -> None:
    assert HistogramBinning.from_params({}).params == {"n_bins": 10, "smoothing": "none"}
    with pytest.raises(ParamError) as info:
        HistogramBinning.from_params(params)
    assert info.value.field == field
