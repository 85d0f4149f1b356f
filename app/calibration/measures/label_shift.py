"""Label shift: the class priors of unlabelled predictions, found by maximum likelihood, and
probabilities corrected to new priors by Bayes' rule.

Under label shift the base rates move while p(x | y) stays. Saerens, Latinne & Decaestecker
(*Adjusting the outputs of a classifier to new a priori probabilities*, Neural Computation
2002) estimate the new priors from the predictions alone by EM: with training priors pi and
calibrated probabilities P_ic, iterate q_ic proportional to (pi'_c / pi_c) P_ic, then
pi'_c = mean_i q_ic, to the fixed point, which maximises the likelihood of the unlabelled
scores. Alexandari, Kundaje & Shrikumar (ICML 2020) show that on calibrated probabilities
this is hard to beat by the alternatives (BBSE, RLLS). The corrected probabilities q are the
posteriors under the new priors (METHODS.md, "Label shift").

The interval is the likelihood's: the inverse of its observed information at the estimate
(minus the Hessian of the log likelihood, which for this log of a linear function is exactly
the sum of the rows' score outer products), priors parametrised by the first k - 1 classes; a
normal band clipped to (0, 1). It says how far the data pin the priors down, not whether the
probabilities are calibrated: an estimate is only as good as the calibration and the model's
discrimination.

Newton's steps and the interval invert a (k - 1) x (k - 1) matrix: up to
:data:`NEWTON_CLASSES` classes. Past that (a thousand classes would take seconds a step), EM
alone runs to the fixed point, within :data:`EM_ONLY_STEPS`, and there is no interval.
"""

from __future__ import annotations

import numpy as np

from app.calibration.base import FloatArray
from app.calibration.kernels.budget import checkpoint
from app.calibration.measures.expected import Z

TOLERANCE = 1e-10
"""EM stops when no prior moves by more than this."""
EM_STEPS = 10
"""EM steps before Newton's method takes over."""
NEWTON_STEPS = 100
"""Newton steps at most: from near the maximum it needs a handful."""
HALVINGS = 30
"""Halvings of a Newton step that does not raise the likelihood, before it is given up."""
FLOOR = 1e-12
"""Probabilities and priors are kept above this, so that ratios and logs stay finite."""
NEWTON_CLASSES = 64
"""The most classes whose priors get Newton's steps and an interval."""
EM_ONLY_STEPS = 1000
"""EM steps at most past :data:`NEWTON_CLASSES` classes."""


def as_matrix(p: FloatArray) -> FloatArray:
    """A binary vector of P(y = 1) as its two-column (P(y = 0), P(y = 1)) matrix; a matrix
    as it is."""
    p = np.asarray(p, dtype=np.float64)
    return np.column_stack([1.0 - p, p]) if p.ndim == 1 else p


def adjust(p: FloatArray, prior_from: FloatArray, prior_to: FloatArray) -> FloatArray:
    """Probabilities computed under ``prior_from`` corrected to ``prior_to`` by Bayes' rule:
    each class's probability times prior_to / prior_from, rows renormalised. A binary
    vector (priors of class 1 as scalars or 2-vectors) answers a vector."""
    binary = np.asarray(p).ndim == 1
    matrix = as_matrix(p)
    weighted = matrix * prior_ratio(prior_from, prior_to, matrix.shape[1])
    adjusted: FloatArray = weighted / weighted.sum(axis=1, keepdims=True)
    return np.ascontiguousarray(adjusted[:, 1]) if binary else adjusted


def prior_ratio(prior_from: FloatArray | float, prior_to: FloatArray | float, k: int) -> FloatArray:
    """prior_to / prior_from of each of ``k`` classes (binary priors of class 1 may be
    scalars), each prior kept above :data:`FLOOR`: what Bayes' rule multiplies a class's
    probability by, and a row of that class's weight by to move a batch's class shares from
    ``prior_from`` to ``prior_to`` (importance weights under label shift)."""
    ratio: FloatArray = _priors(prior_to, k) / _priors(prior_from, k)
    return ratio


def adjust_interval(
    p0: FloatArray, p1: FloatArray, prior_from: FloatArray, prior_to: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Probability intervals [p0, p1] computed under ``prior_from``, corrected to ``prior_to``.

    Binary (vectors): each end by :func:`adjust`. Bayes' rule multiplies the odds by a
    constant, so it is increasing in p: an interval that held a probability holds its
    corrected value (Venn-ABERS' merged p included, which lies in [p0, p1]).

    k classes (n x k, each class's interval against the rest, before any renormalisation):
    the class-c probability under the new priors is q_c = P_c r_c / (P_c r_c + sum_{j != c}
    P_j r_j) with r = prior_to / prior_from, increasing in P_c and, whatever the other
    classes' shares of 1 - P_c, between P_c r_c / (P_c r_c + (1 - P_c) max_{j != c} r_j) and
    the same with the min. So p0_c is mapped with the largest ratio of the other classes and
    p1_c with the smallest: the interval holds q_c whenever [p0_c, p1_c] held P_c (for two
    classes both are the other class's ratio, Bayes' rule itself).
    """
    if np.ndim(p0) == 1:
        return adjust(p0, prior_from, prior_to), adjust(p1, prior_from, prior_to)
    ratio = prior_ratio(prior_from, prior_to, np.shape(p0)[1])
    largest, smallest = rest_ratios(ratio)
    return bayes_bound(p0, ratio, largest), bayes_bound(p1, ratio, smallest)


def rest_ratios(ratio: FloatArray) -> tuple[FloatArray, FloatArray]:
    """For each class, the largest and the smallest ratio among the other classes."""
    order = np.argsort(ratio, kind="stable")
    largest = np.full(ratio.size, ratio[order[-1]])
    largest[order[-1]] = ratio[order[-2]]
    smallest = np.full(ratio.size, ratio[order[0]])
    smallest[order[0]] = ratio[order[1]]
    return largest, smallest


def bayes_bound(p: FloatArray, ratio: FloatArray, rest: FloatArray) -> FloatArray:
    """p r / (p r + (1 - p) rest), column by column: Bayes' rule for a class of ratio r
    against the rest of the row taken to have the ratio ``rest``."""
    weighted = np.asarray(p, dtype=np.float64) * ratio
    bound: FloatArray = weighted / (weighted + (1.0 - p) * rest)
    return bound


def em_priors(
    p: FloatArray, training: FloatArray, weights: FloatArray | None = None
) -> tuple[FloatArray, int]:
    """The maximum-likelihood priors of the batch whose probabilities (under ``training``
    priors) are ``p``: the fixed point of Saerens et al.'s EM; and the steps it took. Binary
    input gives the two-class vector (P(y = 0), P(y = 1)).

    EM creeps where the probabilities barely depend on the class (a weak model, or scores
    near the prior: 10^4 steps over 10^6 rows took minutes), so a few EM steps bring the
    priors near the maximum and Newton's method finishes: the log likelihood is concave in
    the priors (a log of a linear function), its Hessian minus the sum of the rows' score
    outer products, so Newton converges in a few steps; a step is halved until the
    likelihood rises and the priors stay in the simplex. Each step checks the job's budget.
    Two classes take the one-dimensional shortcut of :func:`_binary_priors`.
    """
    matrix = np.clip(as_matrix(p), FLOOR, None)
    k = matrix.shape[1]
    base = _priors(training, k)
    w = np.ones(matrix.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    scaled = matrix / base
    if k == 2:
        return _binary_priors(scaled, w, float(base[1]))
    current = base.copy()
    em_steps = EM_STEPS if k <= NEWTON_CLASSES else EM_ONLY_STEPS
    for step in range(1, em_steps + 1):
        checkpoint()
        weighted = scaled * current
        posterior = weighted / weighted.sum(axis=1, keepdims=True)
        updated = np.clip(w @ posterior, FLOOR, None)
        updated /= updated.sum()
        if np.max(np.abs(updated - current)) < TOLERANCE:
            return updated, step
        current = updated
    if k > NEWTON_CLASSES:
        return current, em_steps
    for step in range(EM_STEPS + 1, EM_STEPS + NEWTON_STEPS + 1):
        checkpoint()
        moved = _newton_step(scaled, w, current)
        if moved is None:
            return current, step
        current = moved
    return current, EM_STEPS + NEWTON_STEPS


def _binary_priors(scaled: FloatArray, w: FloatArray, start: float) -> tuple[FloatArray, int]:
    """Two classes' maximum-likelihood priors, and the steps taken: the log likelihood is a
    concave function of the positive prior q alone, whose derivative
    g(q) = sum_i w_i d_i / (s0_i + q d_i), d = s1 - s0, falls with q. So the maximum is g's
    root in [2 FLOOR, 1 - 2 FLOOR], or the end g points past. Newton's steps from ``start`` find
    it, each kept inside the bracket of the root (a bisection when it would leave it: the
    safeguard of Numerical Recipes' ``rtsafe``, section 9.4)."""
    d = scaled[:, 1] - scaled[:, 0]

    def slope(q: float) -> tuple[float, float]:
        ratio = d / (scaled[:, 0] + q * d)
        return float(w @ ratio), -float(w @ (ratio * ratio))

    # two floors in from each end: the other class's prior, which callers take as 1 - q,
    # then stays above the floor too (1 - (1 - 1e-12) is 9.99978e-13 in floating point)
    low, high = 2.0 * FLOOR, 1.0 - 2.0 * FLOOR
    at_low, at_high = slope(low)[0], slope(high)[0]
    if at_low <= 0.0 or at_high >= 0.0:  # the maximum is at an end, or g is 0 throughout
        q = start if at_low <= 0.0 <= at_high else low if at_low <= 0.0 else high
        return np.array([1.0 - q, q]), 1
    q = min(max(start, low), high)
    for step in range(1, NEWTON_STEPS + 1):
        checkpoint()
        gradient, curvature = slope(q)
        if gradient > 0.0:
            low = q
        else:
            high = q
        moved = q - gradient / curvature if curvature < 0.0 else (low + high) / 2.0
        if not low < moved < high:
            moved = (low + high) / 2.0
        if abs(moved - q) < TOLERANCE or high - low < TOLERANCE:
            return np.array([1.0 - moved, moved]), step
        q = moved
    return np.array([1.0 - q, q]), NEWTON_STEPS


def _newton_step(scaled: FloatArray, w: FloatArray, current: FloatArray) -> FloatArray | None:
    """One safeguarded Newton step of the log likelihood over pi'_1..pi'_{k-1}; None when
    the priors no longer move (converged, or no step raises the likelihood)."""
    density = scaled @ current
    scores = (scaled[:, :-1] - scaled[:, -1:]) / density[:, None]
    gradient = w @ scores
    information = (scores * w[:, None]).T @ scores
    try:
        direction = np.linalg.solve(information, gradient)
    except np.linalg.LinAlgError:
        return None
    delta = np.append(direction, -direction.sum())
    if np.max(np.abs(delta)) < TOLERANCE:
        return None  # at the maximum: rounding alone would decide the halvings
    before = float(w @ np.log(density))
    falling = delta < 0
    # the longest step that keeps every prior above FLOOR (most of the way to it), then halved
    step = min(1.0, float(np.min(0.99 * (current[falling] - FLOOR) / -delta[falling], initial=1.0)))
    for _ in range(HALVINGS):
        moved = current + step * delta
        if float(w @ np.log(scaled @ moved)) >= before:
            return None if np.max(np.abs(moved - current)) < TOLERANCE else moved
        step /= 2
    return None


def prior_intervals(
    p: FloatArray,
    training: FloatArray,
    estimate: FloatArray,
    weights: FloatArray | None = None,
    *,
    sampled: bool = False,
) -> list[tuple[float, float]] | None:
    """95% intervals of each class's prior at the EM ``estimate``: the inverse of the
    outer-product information of the log likelihood sum_i w_i log sum_c (pi'_c / pi_c) P_ic,
    over pi'_1..pi'_{k-1} (the last is 1 minus their sum). ``weights`` count how many rows
    each row of ``p`` stands for: 1 each by default. Rows of a bin of equal probabilities
    are all observed, and the information is theirs. Rows of a ``sampled`` stratum stand for
    rows that were not: the variance is then the sandwich I^-1 J I^-1, J the scores' outer
    products weighted by the squared weights (the weighted estimating equation's; White,
    *Econometrica* 1982), which is I^-1 again when every weight is 1. None past
    :data:`NEWTON_CLASSES` classes."""
    matrix = np.clip(as_matrix(p), FLOOR, None)
    k = matrix.shape[1]
    if k > NEWTON_CLASSES:
        return None
    checkpoint()
    base = _priors(training, k)
    scaled = matrix / base  # d/dpi'_c of each row's likelihood
    density = scaled @ np.asarray(estimate, dtype=np.float64)
    scores = (scaled[:, :-1] - scaled[:, -1:]) / density[:, None]
    w = np.ones(matrix.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    information = (scores * w[:, None]).T @ scores
    if not np.all(np.isfinite(information)) or np.linalg.cond(information) > 1e12:
        return [(0.0, 1.0)] * k  # the data pin nothing down (or too little to say)
    covariance = np.linalg.inv(information)
    if sampled:
        spread = (scores * (w * w)[:, None]).T @ scores
        covariance = covariance @ spread @ covariance
    variances = [*np.diag(covariance).tolist(), float(covariance.sum())]
    bands = []
    for value, variance in zip(estimate, variances, strict=True):
        half = Z * float(np.sqrt(max(variance, 0.0)))
        bands.append((max(0.0, float(value) - half), min(1.0, float(value) + half)))
    return bands


def _priors(prior: FloatArray | float, k: int) -> FloatArray:
    """A prior as a k-vector: a scalar is the binary prior of class 1."""
    value = np.asarray(prior, dtype=np.float64)
    if value.ndim == 0:
        value = np.array([1.0 - float(value), float(value)])
    if value.shape != (k,):
        raise ValueError(f"priors of {value.shape} for {k} classes")
    return np.clip(value, FLOOR, None)
