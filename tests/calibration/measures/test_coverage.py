"""Coverage of the bootstrap's 95% intervals on data of known truth, by both of its methods:
the row bootstrap (1000 rows) and the block sums of large batches (25,000 rows: see
:data:`BLOCK_ROWS`).

The generator: p ~ Beta(2, 3) and y ~ Bernoulli(f(p)) with f(p) = expit(logit(p) + 1/2), a
model that under-predicts everywhere (so every bin's gap is well away from 0 and the
population ECE is clearly positive). The population values:

- log loss: E[-f(p) log p - (1 - f(p)) log(1 - p)], Brier: E[f(p)(1 - p)^2 + (1 - f(p)) p^2],
  each one integral over p's density (``scipy.integrate.quad``);
- ECE over the reports' 10 uniform bins: sum over bins of P(bin) |E[f(p) - p | bin]|, that is
  sum_b |integral over bin b of (f(p) - p) density(p) dp|: the ECE of the population;
- smooth ECE: the limit of the estimator as n grows, which is the estimator applied to the
  population itself: :func:`smooth_ece` of a fine midpoint rule over p (2 x 10^5 points), each
  point a positive row of weight f(p) density(p) and a negative one of weight
  (1 - f(p)) density(p), scaled to 10^9 rows so that relplot's density floor (1e-4, absolute)
  is as negligible as it becomes at large n. Its grid, kernel and width search are the
  estimator's own, so the population value is what the estimator converges to.

Cost: one core, each draw computes its four point values and one :func:`bootstrap` of those
four only. The smooth ECE's width search per resample is the cost (about 0.3 ms each), so the
draws take 50 resamples (and so 50 consistency resamples): the intervals read quantiles at the
(B + 1) q-th resampled value, whose expected coverage does not depend on B
(:func:`~app.calibration.measures.bootstrap.percentile_interval`); fewer resamples make each
interval noisier, not the coverage lower. 400 draws per size put a 95% coverage's standard
error at 1.1%; the window is 93-97%. The block method's searches read per-block grids and
cost the same at any number of rows: its draws cost 0.13 s each at 10^5 rows and 0.09 s at
25,000 (measured), the difference being the rows themselves (drawing them, their point
values, their block sums).
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
import pytest
from scipy import integrate, stats

from app.calibration.measures.metrics import expected_calibration_error, log_losses, squared_errors
from app.calibration.measures.reliability import bin_table
from app.calibration.measures.report_bootstrap import LARGE_ROWS, bootstrap
from app.calibration.measures.resampled import View
from app.calibration.measures.smooth_ece import smooth_ece

SHIFT = 0.5
DENSITY = stats.beta(2.0, 3.0)
EDGES = np.linspace(0.0, 1.0, 11)[1:-1]
DRAWS = 400
RESAMPLES = 50
MEASURES = ("log_loss", "brier", "ece", "smooth_ece")
BLOCK_ROWS = 25_000
"""The block method's batch: just above :data:`~app.calibration.measures.report_bootstrap.
LARGE_ROWS`, the fewest rows the service resamples by blocks, where the method's
approximations are coarsest (the first-order argument by which block sums stand for rows;
the consistency labels' sums drawn as Gaussians over a bin's or a grid cell's rows, the fewer
the rows the less Gaussian)."""


def truth(p: np.ndarray) -> np.ndarray:
    """f(p) = expit(logit(p) + SHIFT), without the logarithm."""
    odds = p * np.exp(SHIFT)
    return odds / (odds + 1.0 - p)


@cache
def population() -> dict[str, float]:
    """The four measures of the population (see the module's docstring)."""

    def integral(g, low: float = 0.0, high: float = 1.0) -> float:  # type: ignore[no-untyped-def]
        value, _ = integrate.quad(lambda p: g(p) * DENSITY.pdf(p), low, high, limit=200)
        return float(value)

    def loss(p: float) -> float:
        f = float(truth(np.array(p)))
        return -(f * np.log(p) + (1.0 - f) * np.log1p(-p))

    def brier(p: float) -> float:
        f = float(truth(np.array(p)))
        return f * (1.0 - p) ** 2 + (1.0 - f) * p * p

    cuts = np.concatenate([[0.0], EDGES, [1.0]])
    ece = sum(
        abs(integral(lambda p: float(truth(np.array(p))) - p, low, high))
        for low, high in itertools.pairwise(cuts)
    )
    points = 200_000
    p = (np.arange(points) + 0.5) / points
    mass = DENSITY.pdf(p) / points * 1e9
    f = truth(p)
    rows = np.concatenate([p, p])
    labels = np.concatenate([np.ones(points), np.zeros(points)])
    smooth = smooth_ece(rows, labels, np.concatenate([mass * f, mass * (1.0 - f)])).value
    return {"log_loss": integral(loss), "brier": integral(brier), "ece": ece, "smooth_ece": smooth}


def intervals(n: int, seed: int, large: bool) -> dict[str, tuple[float, float]]:
    """One draw of n rows and the intervals of its four measures (the block sums' method if
    ``large``, else the rows')."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2.0, 3.0, n)
    y = (rng.random(n) < truth(p)).astype(np.float64)
    losses, errors = log_losses(p, y), squared_errors(p, y)
    view = View(
        p,
        y,
        np.broadcast_to(1.0, n),
        lambda rows: {"log_loss": losses[rows], "brier": errors[rows]},
    )
    point: dict[str, float | None] = {
        "log_loss": float(losses.mean()),
        "brier": float(errors.mean()),
        "ece": expected_calibration_error(bin_table(p, y, np.ones(n), 10, "uniform")),
        "smooth_ece": smooth_ece(p, y).value,
    }
    threshold = 1 if large else n + 1
    (found,) = bootstrap([view], [EDGES], [point], RESAMPLES, n_jobs=1, large_rows=threshold)
    return found.intervals


@pytest.mark.parametrize(("n", "large"), [(1000, False), (BLOCK_ROWS, True)])
def test_intervals_cover_the_population_values(n: int, large: bool) -> None:
    assert not large or n >= LARGE_ROWS  # a size the service gives the block method itself
    truth_values = population()
    assert truth_values["ece"] > 0.05  # miscalibrated: the ECE's lower end is not merely 0
    covered = dict.fromkeys(MEASURES, 0)
    for draw in range(DRAWS):
        found = intervals(n, 10_000 * n + draw, large)
        for name in MEASURES:
            low, high = found[name]
            covered[name] += low <= truth_values[name] <= high
    shares = {name: count / DRAWS for name, count in covered.items()}
    assert all(0.93 <= share <= 0.97 for share in shares.values()), shares


@pytest.mark.parametrize(("n", "large"), [(500, False), (20_000, True)])
def test_a_calibrated_models_errors_reach_0_at_the_tests_level(n: int, large: bool) -> None:
    """On batches drawn from a calibrated model (y ~ Bernoulli(p)) the ECE's interval reaches
    0 as often as its consistency test accepts (95%, within 200 draws' error), and the log
    loss's covers the expected entropy."""
    entropy, _ = integrate.quad(
        lambda p: DENSITY.pdf(p) * -(p * np.log(p) + (1 - p) * np.log1p(-p)), 0.0, 1.0
    )
    covered = {"log_loss": 0, "ece": 0}
    for draw in range(200):
        rng = np.random.default_rng(1000 + draw)
        p = rng.beta(2.0, 3.0, n)
        y = (rng.random(n) < p).astype(np.float64)
        losses = log_losses(p, y)
        view = View(p, y, np.broadcast_to(1.0, n), lambda rows: {"log_loss": losses[rows]})  # noqa: B023
        ece = expected_calibration_error(bin_table(p, y, np.ones(n), 10, "uniform"))
        point: dict[str, float | None] = {"log_loss": float(losses.mean()), "ece": ece}
        threshold = 1 if large else n + 1
        (found,) = bootstrap([view], [EDGES], [point], 400, n_jobs=1, large_rows=threshold)
        low, high = found.intervals["log_loss"]
        covered["log_loss"] += low <= entropy <= high
        covered["ece"] += found.intervals["ece"][0] == 0.0
    assert 180 <= covered["log_loss"] <= 198, covered
    assert 180 <= covered["ece"] <= 198, covered


def test_the_population_ece_is_the_binned_integral() -> None:
    """The population ECE against a large sample's: 10^6 draws of p with E[y | p] in place
    of y, so only p's sampling moves it (by about 10^-4)."""
    rng = np.random.default_rng(3)
    p = rng.beta(2.0, 3.0, 1_000_000)
    f = truth(p)
    gaps = bin_table(p, f, np.ones(p.size), 10, "uniform")  # E[y | p] in place of y
    assert expected_calibration_error(gaps) == pytest.approx(population()["ece"], abs=1e-3)
