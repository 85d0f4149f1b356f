"""Decisions (app/calibration/measures/decisions.py): the Bayes-optimal threshold against a
brute-force search of thresholds on calibrated probabilities, and the expected cost against
the mean realized cost of labels drawn from them."""

from __future__ import annotations

import numpy as np
import pytest

from app.calibration.measures.decisions import Costs, decide, expected_cost


@pytest.mark.parametrize(
    "costs",
    [Costs(1, 5), Costs(5, 1), Costs(1, 1), Costs(2, 3, true_positive=4, true_negative=1)],
)
def test_the_threshold_minimises_the_expected_cost(costs: Costs) -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(size=20_000)
    grid = np.linspace(0, 1, 2001)
    costs_on_grid = [expected_cost(p, t, costs) for t in grid]
    best = grid[int(np.argmin(costs_on_grid))]
    assert costs.threshold == pytest.approx(best, abs=2e-3)
    assert expected_cost(p, costs.threshold, costs) <= min(costs_on_grid) + 1e-12
    if costs == Costs(1, 5):
        assert costs.threshold == pytest.approx(1 / 6)


def test_the_expected_cost_is_the_mean_cost_of_drawn_labels() -> None:
    rng = np.random.default_rng(1)
    p = rng.beta(2, 5, size=5_000)
    costs = Costs(1.0, 5.0, true_positive=0.5)
    t = costs.threshold
    drawn = [
        float(np.mean(costs.per_case(decide(p, t), (rng.random(p.size) < p).astype(float))))
        for _ in range(400)
    ]
    assert expected_cost(p, t, costs) == pytest.approx(np.mean(drawn), abs=3 * np.std(drawn) / 20)


def test_decisions_are_strictly_above_the_threshold() -> None:
    assert decide(np.array([0.2, 0.5, 0.51]), 0.5).tolist() == [0.0, 0.0, 1.0]


@pytest.mark.parametrize(
    "bad",
    [
        {"false_positive": -1},
        {"false_negative": float("nan")},
        {"false_positive": 0, "false_negative": 0},
    ],
)
def test_costs_out_of_range_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"costs|must be"):
        Costs(**bad)
