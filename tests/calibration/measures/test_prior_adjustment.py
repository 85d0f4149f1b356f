"""Bayes' rule to new priors (Saerens et al. 2002), its importance weights and its intervals,
against numpy written out here: the binary closed form, the k-class posterior, and the
bounds of a class's probability over every mix of the other classes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit, logit

from app.calibration import adjust, adjust_interval, bayes_bound, prior_ratio, rest_ratios


def test_binary_adjustment_is_the_closed_form_on_the_logit() -> None:
    p = np.concatenate([np.linspace(1e-9, 1 - 1e-9, 1001), [0.0, 1.0]])
    for pi, new in ((0.3, 0.08), (0.5, 0.9), (0.02, 0.5), (0.7, 0.7)):
        q = adjust(p, np.array([1 - pi, pi]), np.array([1 - new, new]))
        inside = (p > 0) & (p < 1)
        shift = np.log(new * (1 - pi) / (pi * (1 - new)))
        np.testing.assert_allclose(q[inside], expit(logit(p[inside]) + shift), rtol=1e-12)
        assert (q[-2], q[-1]) == (0.0, 1.0)  # certainty stays certain
    # scalars of class 1 mean the same as the 2-vectors
    assert np.array_equal(adjust(p, 0.3, 0.08), adjust(p, np.array([0.7, 0.3]), [0.92, 0.08]))


def test_k_class_adjustment_is_the_posterior_under_the_new_priors() -> None:
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(4), size=500)
    old, new = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1])
    q = adjust(p, old, new)
    brute = np.empty_like(p)
    for i in range(p.shape[0]):  # the posterior written out row by row
        joint = [p[i, c] * new[c] / old[c] for c in range(4)]
        brute[i] = np.array(joint) / sum(joint)
    np.testing.assert_allclose(q, brute, rtol=1e-14)
    np.testing.assert_allclose(q.sum(axis=1), 1.0, rtol=1e-15)
    # there and back again, and in two steps as in one
    np.testing.assert_allclose(adjust(q, new, old), p, rtol=1e-12)
    middle = np.full(4, 0.25)
    np.testing.assert_allclose(adjust(adjust(p, old, middle), middle, new), q, rtol=1e-13)


def test_the_importance_weights_move_the_class_shares_to_the_new_prior() -> None:
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 10_000)
    w = rng.uniform(0.2, 3.0, y.size)
    old = np.bincount(y, weights=w) / w.sum()
    new = np.array([0.6, 0.3, 0.1])
    moved = w * prior_ratio(old, new, 3)[y]
    np.testing.assert_allclose(np.bincount(y, weights=moved) / moved.sum(), new, rtol=1e-13)
    np.testing.assert_array_equal(prior_ratio(0.25, 0.5, 2), [0.5 / 0.75, 2.0])


def test_rest_ratios_are_the_extremes_of_the_other_classes() -> None:
    rng = np.random.default_rng(2)
    for ratio in (rng.uniform(0.1, 5, 6), np.array([2.0, 2.0, 1.0]), np.array([1.0, 3.0])):
        largest, smallest = rest_ratios(ratio)
        for c in range(ratio.size):
            others = np.delete(ratio, c)
            assert (largest[c], smallest[c]) == (others.max(), others.min())


def test_binary_intervals_keep_holding_their_point() -> None:
    rng = np.random.default_rng(3)
    p = rng.uniform(0, 1, 2_000)
    p0 = p * rng.uniform(0, 1, p.size)
    p1 = p + (1 - p) * rng.uniform(0, 1, p.size)
    old, new = np.array([0.8, 0.2]), np.array([0.3, 0.7])
    q0, q1 = adjust_interval(p0, p1, old, new)
    assert np.array_equal(q0, adjust(p0, old, new))
    assert np.array_equal(q1, adjust(p1, old, new))
    q = adjust(p, old, new)
    assert np.all((q0 <= q) & (q <= q1))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(3, 6),
    st.integers(0, 2**32 - 1),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
)
def test_k_class_intervals_hold_the_class_probability_under_any_mix(
    k: int, seed: int, below: float, above: float
) -> None:
    """Whatever the row P (its class c inside [p0_c, p1_c]), the posterior of class c under
    the new priors lies inside the corrected interval."""
    rng = np.random.default_rng(seed)
    old, new = rng.dirichlet(np.ones(k)), rng.dirichlet(np.ones(k))
    old, new = (np.clip(v, 1e-3, None) / np.clip(v, 1e-3, None).sum() for v in (old, new))
    rows = rng.dirichlet(np.full(k, 0.5), size=200)
    p0 = rows * below
    p1 = rows + (1 - rows) * above
    q0, q1 = adjust_interval(p0, p1, old, new)
    q = adjust(rows, old, new)
    assert np.all(q0 <= q * (1 + 1e-12) + 1e-300)
    assert np.all(q <= q1 * (1 + 1e-12) + 1e-300)
    # and the bound is attained: all of the rest on its largest (smallest) ratio
    ratio = new / old
    c = int(np.argmin(ratio))
    worst = np.zeros(k)
    worst[c] = rows[0, c]
    other = int(np.argmax(np.delete(ratio, c)))
    worst[other + (other >= c)] = 1 - rows[0, c]
    tight = bayes_bound(rows[:1], ratio, rest_ratios(ratio)[0])[0, c]
    assert adjust(worst[None, :], old, new)[0, c] == pytest.approx(tight, rel=1e-12)
