"""Label shift (app/calibration/measures/label_shift.py) against references: the EM fixed
point against the likelihood maximised by scipy, the priors and posteriors of a model whose
posteriors are known in closed form (Gaussian classes), and the intervals' coverage over
replicated batches."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar
from scipy.special import expit, softmax

from app.calibration.measures.label_shift import FLOOR, adjust, em_priors, prior_intervals

MEANS = np.array([-1.0, 1.0])


def gaussian_batch(
    n: int, prior: float, training: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores x | y ~ N(+-1, 1), labels with P(y = 1) = ``prior``; the exact posteriors under
    the ``training`` prior (what a calibrated model trained there says), and x."""
    y = (rng.random(n) < prior).astype(int)
    x = rng.normal(MEANS[y], 1.0)
    logit = np.log(training / (1 - training)) + 2 * x  # log-likelihood ratio of N(1,1)/N(-1,1)
    return expit(logit), y, x


def test_em_finds_the_maximum_likelihood_prior() -> None:
    rng = np.random.default_rng(1)
    p, _, _ = gaussian_batch(3_000, 0.55, 0.3, rng)
    found, steps = em_priors(p, 0.3)
    assert steps < 10_000

    def negative_log_likelihood(prior: float) -> float:
        return -float(np.log(prior / 0.3 * p + (1 - prior) / 0.7 * (1 - p)).sum())

    best = minimize_scalar(
        negative_log_likelihood, bounds=(1e-6, 1 - 1e-6), method="bounded", options={"xatol": 1e-12}
    )
    assert found[1] == pytest.approx(best.x, abs=1e-7)
    assert found.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("prior", [0.15, 0.3, 0.6])
def test_em_recovers_a_shifted_prior_and_its_interval_covers_it(prior: float) -> None:
    rng = np.random.default_rng(int(prior * 100))
    hits, errors = 0, []
    for _ in range(200):
        p, _, _ = gaussian_batch(5_000, prior, 0.3, rng)
        found, _ = em_priors(p, 0.3)
        low, high = prior_intervals(p, 0.3, found)[1]
        errors.append(abs(found[1] - prior))
        hits += low <= prior <= high
    assert max(errors) < 0.04
    assert np.median(errors) < 0.01
    assert 0.9 <= hits / 200 <= 0.99


def test_adjusted_probabilities_are_the_posteriors_under_the_new_prior() -> None:
    rng = np.random.default_rng(2)
    p, _, x = gaussian_batch(1_000, 0.6, 0.3, rng)
    truth = expit(np.log(0.6 / 0.4) + 2 * x)
    assert np.allclose(adjust(p, 0.3, 0.6), truth, atol=1e-12)
    assert np.allclose(adjust(adjust(p, 0.3, 0.6), 0.6, 0.3), p, atol=1e-12)
    assert np.allclose(adjust(p, 0.3, 0.3), p, atol=1e-15)


def test_multiclass_priors_by_em_and_their_intervals() -> None:
    rng = np.random.default_rng(3)
    means = np.array([-2.0, 0.0, 2.0])
    training = np.array([0.5, 0.3, 0.2])
    shifted = np.array([0.2, 0.3, 0.5])

    def batch(n: int) -> np.ndarray:
        y = rng.choice(3, size=n, p=shifted)
        x = rng.normal(means[y], 1.0)
        log_likelihood = -0.5 * (x[:, None] - means[None, :]) ** 2
        return softmax(log_likelihood + np.log(training), axis=1)

    hits = np.zeros(3)
    for _ in range(100):
        P = batch(4_000)
        found, _ = em_priors(P, training)
        bands = prior_intervals(P, training, found)
        hits += [low <= s <= high for (low, high), s in zip(bands, shifted, strict=True)]
    assert np.all(hits / 100 >= 0.88), hits
    # the fixed point is the likelihood's maximum (scipy over softmax-parametrised priors)
    P = batch(2_000)
    found, _ = em_priors(P, training)

    def negative_log_likelihood(theta: np.ndarray) -> float:
        priors = softmax(np.append(theta, 0.0))
        return -float(np.log((P / training) @ priors).sum())

    best = minimize(negative_log_likelihood, np.zeros(2), method="BFGS", options={"gtol": 1e-10})
    assert np.allclose(found, softmax(np.append(best.x, 0.0)), atol=1e-5)
    # and correcting to the found priors moves the mean probability onto them
    assert np.allclose(adjust(P, training, found).mean(axis=0), found, atol=1e-8)


def test_bad_priors_are_refused() -> None:
    with pytest.raises(ValueError, match="priors"):
        adjust(np.array([[0.2, 0.8]]), np.array([0.5, 0.3, 0.2]), np.array([0.5, 0.5]))


def test_a_weak_model_converges_to_the_likelihoods_maximum_in_few_steps() -> None:
    """EM alone creeps here (probabilities barely move with the class: 10^4 steps were not
    enough); Newton's steps on the one prior reach scipy's maximum."""
    rng = np.random.default_rng(0)
    p = expit(0.05 * rng.normal(size=200_000) + 0.06)
    found, steps = em_priors(p, 0.515)
    assert steps < 40

    def negative_log_likelihood(prior: float) -> float:
        return -float(np.log(prior / 0.515 * p + (1 - prior) / 0.485 * (1 - p)).sum())

    best = minimize_scalar(
        negative_log_likelihood,
        bounds=(1e-9, 1 - 1e-9),
        method="bounded",
        options={"xatol": 1e-12},
    )
    assert found[1] == pytest.approx(best.x, abs=1e-6)
    # a maximum on the boundary: scores that all say "more positives than in training"
    edge, _ = em_priors(np.full(1_000, 0.52), 0.5)
    assert edge[1] > 1 - 1e-6
    assert 1 - edge[1] >= FLOOR  # the other class's, as a caller takes it, is above the floor
    low, _ = em_priors(np.full(1_000, 0.48), 0.5, np.arange(1.0, 1_001.0))
    assert low[1] < 1e-6
    # a flat likelihood (every probability the training prior): nothing moves the prior
    flat, _ = em_priors(np.full(1_000, 0.3), 0.3)
    assert flat == pytest.approx([0.7, 0.3], abs=1e-15)


def test_weighted_binary_priors_maximise_the_weighted_likelihood() -> None:
    """Monitoring's EM runs on a rollup's cells: their mean probabilities, weighted by their
    counts. The estimate is the weighted likelihood's maximum (scipy's), and the same as the
    rows repeated."""
    rng = np.random.default_rng(4)
    p = expit(rng.normal(-0.5, 1.5, 300))
    counts = rng.integers(1, 50, 300).astype(float)
    found, _ = em_priors(p, 0.4, counts)

    def negative_log_likelihood(prior: float) -> float:
        return -float(counts @ np.log(prior / 0.4 * p + (1 - prior) / 0.6 * (1 - p)))

    best = minimize_scalar(
        negative_log_likelihood, bounds=(1e-9, 1 - 1e-9), method="bounded", options={"xatol": 1e-12}
    )
    assert found[1] == pytest.approx(best.x, abs=1e-7)
    repeated, _ = em_priors(np.repeat(p, counts.astype(int)), 0.4)
    assert found == pytest.approx(repeated, abs=1e-9)


def test_an_interval_the_data_cannot_give_is_the_whole_range() -> None:
    P = np.array([[1 - 2e-12, 1e-12, 1e-12]] * 5)
    training = np.array([0.3, 0.3, 0.4])
    found, _ = em_priors(P, training)
    assert prior_intervals(P, training, found) == [(0.0, 1.0)] * 3
