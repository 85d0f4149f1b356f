"""The scores an exported graph is checked on: every knot of the fitted map, the floats on
either side of it, the points between knots, values outside the fitted range, +-1e6, and
for binary maps +-inf and NaN, and ties.

A map with knots (isotonic thresholds, histogram edges, Venn-ABERS cells) can only differ
from its graph at or next to a knot, where a comparison decides the step, or inside a
segment, where the interpolation's arithmetic decides the value; the probes hit both. The
smooth maps (Platt, beta, logistic, temperature) are probed across their whole working range,
including where the sigmoid saturates. Every grid is deterministic: the same version always
gets the same parity figure.
"""

from __future__ import annotations

import itertools
from typing import cast

import numpy as np
from scipy.special import expit

from app.calibration import (
    BETA_EPS,
    BetaCalibrator,
    BostromCalibrator,
    Calibrator,
    FloatArray,
    HistogramBinning,
    IsotonicCalibrator,
    MinMaxScaling,
    MulticlassCalibrator,
    OneVsRest,
    PlattCalibrator,
    TemperatureScaling,
    VennAbersCalibrator,
    beta_features,
)

from .graph import ExportError

_SEED = 20141013  # any fixed seed: the probes are part of what the parity figure means
_WIDE = np.array(
    [-1e300, -1e6, -1e3, -100.0, -10.0, -1.0, -1e-12, 0.0, 1e-300, 1e-12, 1.0, 10.0, 1e6, 1e300]
)
_NON_FINITE = np.array([-np.inf, np.inf, np.nan])  # a float32 logit of 0 or 1; a NaN
_ENTRIES = 1 << 22
"""About the most entries (rows x classes) of each kind of probability rows, 32 MB of float64:
up to 2,048 classes every class has its one-hot row, and up to 5,000 there are 100 draws per
concentration; past that the draws thin out (4 each at least) and the one-hot rows are those
of classes evenly spaced from the first to the last: many classes never cost a k x k matrix."""
_UNIT = np.concatenate(
    [np.linspace(0.0, 1.0, 201), [BETA_EPS, 1.0 - BETA_EPS, 1e-300, 1e-12, 1 - 1e-12]]
)


def probe_scores(calibrator: Calibrator | MulticlassCalibrator, n_classes: int) -> FloatArray:
    """The probe grid of a fitted calibrator: a vector (binary) or an n x k matrix."""
    if n_classes == 2:
        return _with_ties(_binary_probes(calibrator))
    return _with_ties(_matrix_probes(cast(MulticlassCalibrator, calibrator), n_classes))


def _binary_probes(calibrator: Calibrator | MulticlassCalibrator) -> FloatArray:
    knots = _knots(calibrator)
    around = [knots, np.nextafter(knots, -np.inf), np.nextafter(knots, np.inf)]
    if knots.size > 1:  # halves and quarters of each gap, which cannot overflow
        left, right = knots[:-1], knots[1:]
        around += [left * 0.5 + right * 0.5, left * 0.75 + right * 0.25]
    if knots.size:
        around += [knots[:1] - 1.0, knots[-1:] + 1.0]
    grid = np.concatenate([*around, _WIDE, np.linspace(-8.0, 8.0, 161), _UNIT])
    return np.concatenate([np.sort(grid[np.isfinite(grid)]), _NON_FINITE])


def _knots(calibrator: Calibrator | MulticlassCalibrator) -> FloatArray:
    """Where the fitted map bends or steps (for a sigmoid: around its midpoint)."""
    if isinstance(calibrator, IsotonicCalibrator):
        return calibrator.thresholds
    if isinstance(calibrator, HistogramBinning):
        return calibrator.edges
    if isinstance(calibrator, VennAbersCalibrator):
        return calibrator.table.edges
    if isinstance(calibrator, MinMaxScaling):
        return np.array([calibrator.low, calibrator.high])
    if isinstance(calibrator, PlattCalibrator) and calibrator.A != 0.0:
        middle, unit = -calibrator.B / calibrator.A, 1.0 / abs(calibrator.A)
        return middle + unit * np.linspace(-40.0, 40.0, 81)  # past saturation on both sides
    if isinstance(calibrator, BetaCalibrator):
        return np.concatenate([np.geomspace(1e-16, 0.5, 60), _beta_transition(calibrator)])
    return np.zeros(0)


def _beta_transition(calibrator: BetaCalibrator) -> FloatArray:
    """Scores where the beta map's z = a ln f - b ln(1 - f) + c crosses -40, -39, ..., 40,
    and 16 between each: where the sigmoid turns, however narrow (a = 1.7e5 squeezes it into
    1e-12 of the score). z never decreases in f (a, b >= 0), so each is found by bisection
    on the logit of f."""
    targets = np.arange(-40.0, 41.0)
    low, high = np.full(targets.size, -40.0), np.full(targets.size, 40.0)
    for _ in range(80):  # a loop over halvings, not scores
        middle = (low + high) / 2
        below = _beta_z(calibrator, expit(middle)) < targets
        low, high = np.where(below, middle, low), np.where(below, high, middle)
    crossings = expit(high)
    between = [np.linspace(a, b, 18)[1:-1] for a, b in itertools.pairwise(crossings)]
    return np.concatenate([crossings, *between])


def _beta_z(calibrator: BetaCalibrator, f: FloatArray) -> FloatArray:
    log_f, log_1mf = beta_features(f)
    with np.errstate(over="ignore", invalid="ignore"):
        z: FloatArray = calibrator.a * log_f + calibrator.b * log_1mf + calibrator.c
    return z


def _matrix_probes(calibrator: MulticlassCalibrator, k: int) -> FloatArray:
    rng = np.random.default_rng(_SEED)
    if isinstance(calibrator, OneVsRest):
        columns = [_binary_probes(binary) for binary in calibrator.calibrators]
        rows = max(c.size for c in columns)
        grid = np.column_stack([np.resize(rng.permutation(c), rows) for c in columns])
        ends = [[c[0] for c in columns], [c[-1] for c in columns]]  # rows of all-0 outputs
        return np.vstack([grid, ends])
    probabilities = _probability_rows(rng, k)
    if isinstance(calibrator, TemperatureScaling) and calibrator.input == "logits":
        each = _rows_within(k, 4, 100)  # rows per scale of the logits
        normal = rng.normal(size=(4 * each, k)) * np.repeat([0.1, 1.0, 10.0, 100.0], each)[:, None]
        extremes = np.array([np.resize([1e6, -1e6], k), np.resize([1e308, -1e308], k), np.zeros(k)])
        return np.vstack([normal, extremes, np.log(np.maximum(probabilities, 1e-300))])
    if isinstance(calibrator, TemperatureScaling | BostromCalibrator):
        return probabilities
    raise ExportError(f"no ONNX graph for {type(calibrator).__name__}")


def _probability_rows(rng: np.random.Generator, k: int) -> FloatArray:
    """Rows that are probability vectors: Dirichlet draws from peaked to nearly uniform (where
    a small temperature magnifies the logs' last bits), one-hot and uniform rows, rows whose
    top two tie, and rows that sum to 1 only within 1e-7."""
    alphas = (0.05, 0.5, 1.0, 10.0, 1e4, 1e8)
    each = _rows_within(k, 4, 100)
    draws = [rng.dirichlet(np.full(k, alpha), size=each) for alpha in alphas]
    hot = np.unique(
        np.linspace(0, k - 1, int(np.clip(_ENTRIES // k, 2, k))).round().astype(np.intp)
    )
    one_hot = np.zeros((hot.size, k))
    one_hot[np.arange(hot.size), hot] = 1.0
    tied = np.zeros((1, k))
    tied[0, :2] = 0.5
    off = rng.dirichlet(np.ones(k), size=max(2, each // 5)) * (1.0 + 1e-7)
    return np.vstack([*draws, one_hot, np.full((1, k), 1.0 / k), tied, off])


def _rows_within(k: int, least: int, most: int) -> int:
    """Rows of k entries for one kind of probe: an eighth of :data:`_ENTRIES`, clipped to
    ``least``..``most``."""
    return int(np.clip(_ENTRIES // (8 * k), least, most))


def _with_ties(grid: FloatArray) -> FloatArray:
    """The grid with every seventh entry repeated: tied scores in one request."""
    return np.concatenate([grid, grid[::7]])
