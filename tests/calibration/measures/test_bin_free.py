"""The measures of a report that no bins change, computed once and passed back
(:func:`~app.calibration.reliability_bin_free`), give the reports of one pass, bit for bit:
binary, top-label and one class against the rest, weighted, with intervals."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.calibration import reliability_bin_free, reliability_reports


@pytest.mark.parametrize(("k", "class_index"), [(2, None), (2, 0), (3, None), (3, 2)])
@pytest.mark.parametrize(("n_bins", "strategy"), [(7, "uniform"), (12, "quantile")])
def test_kept_bin_free_measures_give_the_reports_of_one_pass(
    k: int, class_index: int | None, n_bins: int, strategy: str
) -> None:
    rng = np.random.default_rng(k)
    labels = rng.integers(0, k, 400)
    if k == 2:
        sets = [rng.random(400), rng.beta(2.0, 5.0, 400)]
    else:
        sets = [rng.dirichlet(np.ones(k), 400), rng.dirichlet(np.ones(k), 400)]
    weights = rng.random(400) + 0.5
    options: dict[str, Any] = {"n_bins": n_bins, "strategy": strategy, "resamples": 50}
    kept = reliability_bin_free(sets, labels, weights, class_index=class_index)
    assert all(measures["smooth_ece"] is not None for measures in kept)
    once = reliability_reports(sets, labels, weights, class_index=class_index, **options)
    reused = reliability_reports(
        sets, labels, weights, class_index=class_index, bin_free=kept, **options
    )
    assert [r.as_json() for r in reused] == [r.as_json() for r in once]


def test_the_reports_read_the_measures_they_are_given() -> None:
    """What is passed is what the reports hold (nothing is computed again): a kept value
    that differs shows, and its interval comes from the resamples as before."""
    rng = np.random.default_rng(5)
    sets, labels = [rng.random(300)], rng.integers(0, 2, 300)
    (kept,) = reliability_bin_free(sets, labels, None)
    marked = {**kept, "ici": 0.123}
    (report,) = reliability_reports(
        sets, labels, None, n_bins=10, strategy="uniform", resamples=30, bin_free=[marked]
    )
    assert report.metrics["ici"] == 0.123
    assert report.metrics["smooth_ece"] == kept["smooth_ece"]
