"""Bootstrap intervals: each resample's measures against the measures computed directly on
the resample's weights, and determinism (coverage: ``test_coverage.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.special import expit, logit

from app.calibration import CalibrationError
from app.calibration.kernels.weights import relative_weights
from app.calibration.measures.auc import roc_auc
from app.calibration.measures.bootstrap import (
    Resamples,
    _quantiles,
    calibration_error_interval,
    check_resamples,
    percentile_interval,
)
from app.calibration.measures.clinical import calibration_intercept, calibration_line
from app.calibration.measures.diagnostics import raw_as_probabilities, reliability_reports
from app.calibration.measures.metrics import brier_score, log_loss, summarize
from app.calibration.measures.resampled import View, ViewResampler


def _batch(seed: int, n: int, *, distinct: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.beta(2.0, 3.0, n)
    if distinct is not None:
        p = np.round(p * distinct) / distinct
    y = (rng.random(n) < expit(1.3 * logit(np.clip(p, 1e-3, 1 - 1e-3)))).astype(np.float64)
    return p, y


def _resampler(p: np.ndarray, y: np.ndarray, w: np.ndarray) -> ViewResampler:
    relative, _ = relative_weights(w)
    view = View(
        p,
        y,
        relative,
        lambda rows: {"log_loss": _losses(p[rows], y[rows]), "brier": (p[rows] - y[rows]) ** 2},
    )
    edges = np.linspace(0.0, 1.0, 11)[1:-1]
    line = calibration_line(p, y, relative)
    return ViewResampler(
        view, edges, line=line, offset_intercept=calibration_intercept(p, y, relative)
    )


def _losses(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-15, 1 - 1e-15)
    return -(y * np.log(q) + (1 - y) * np.log1p(-q))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("distinct", [50, None])
def test_each_resample_is_the_batch_weighted_by_its_counts(
    weighted: bool, distinct: int | None
) -> None:
    """Log loss, Brier, binned ECE and AUC of each resample equal the measures computed on
    the batch with the resample's counts as weights (the AUC up to float32's rounding while
    distinct p are fewer than the atoms; within the within-atom term's variation otherwise)."""
    p, y = _batch(1, 3000, distinct=distinct)
    w = np.random.default_rng(2).uniform(0.2, 3.0, p.size) if weighted else np.ones(p.size)
    sampler = _resampler(p, y, w)
    draws = Resamples(p.size, 12, seed=5)
    counts = draws.counts(0, draws.chunk)
    found = sampler.statistics(counts)
    for b in range(counts.shape[1]):
        weights = counts[:, b].astype(np.float64) * w
        assert found["log_loss"][b] == pytest.approx(log_loss(p, y, weights), rel=1e-5)
        assert found["brier"][b] == pytest.approx(brier_score(p, y, weights), rel=1e-5)
        ece = summarize(p, y, weights, n_bins=10).metrics["ece"]
        assert found["ece"][b] == pytest.approx(ece, rel=1e-4, abs=1e-6)
        auc = roc_auc(p, y, weights)
        # The atoms' sums are float32 products (2^-24 relative per term): over 3000 rows of
        # weights up to 3 their rounding moves the AUC by a few 1e-6 (2.5e-6 here with numpy
        # 2.4.6 and scipy 1.17.1; under 1e-6 with the versions installed before)
        tolerance = (1e-5 if weighted else 1e-6) if distinct is not None else 2e-4
        assert found["auc"][b] == pytest.approx(auc, abs=tolerance)


@pytest.mark.parametrize(
    ("n", "within"), [(500, 5e-3), (5000, 5e-3), (20_000, 5e-3), (40_000, 0.05)]
)
def test_the_slope_and_intercept_are_the_resamples_own_fits(n: int, within: float) -> None:
    """Up to 20,000 rows each resample's slope and intercept are its own maximum likelihood
    fit within 0.5% of the resamples' spread (two Newton steps from the batch's); past that
    one step, the one-step bootstrap, lands within a few percent of it."""
    p, y = _batch(3, n)
    sampler = _resampler(p, y, np.ones(p.size))
    draws = Resamples(p.size, 6, seed=9)
    counts = draws.counts(0, min(draws.chunk, 6))
    found = sampler.statistics(counts)
    weights = [counts[:, b].astype(np.float64) for b in range(counts.shape[1])]
    lines = [calibration_line(p, y, w) for w in weights]
    slopes = np.array([line.slope for line in lines if line is not None])
    intercepts = np.array([calibration_intercept(p, y, w) for w in weights])
    assert slopes.size == counts.shape[1]
    for name, exact in (("calibration_slope", slopes), ("calibration_intercept", intercepts)):
        error = np.max(np.abs(found[name] - exact))
        assert error < within * max(np.std(exact), 1e-3), name


def test_intervals_are_seeded_and_shared() -> None:
    p, y = _batch(4, 2000)
    labels = y.astype(np.int64)
    scores = logit(np.clip(p, 1e-3, 1 - 1e-3)) * 2.0
    args = ([p, raw_as_probabilities(scores)], labels, None)
    first = reliability_reports(*args, n_bins=10, strategy="uniform", resamples=300)
    again = reliability_reports(*args, n_bins=10, strategy="uniform", resamples=300)
    assert [r.intervals for r in first] == [r.intervals for r in again]
    calibrated, raw = first
    # the raw scores rank the rows as p does: the same resamples give the same AUCs
    assert calibrated.intervals["auc"] == pytest.approx(raw.intervals["auc"], abs=1e-7)
    for name in ("log_loss", "brier", "auc", "calibration_slope", "calibration_intercept"):
        low, high = calibrated.intervals[name]
        assert low <= calibrated.metrics[name] <= high, name
    none = reliability_reports(*args, n_bins=10, strategy="uniform", resamples=0)
    assert none[0].intervals == {}
    assert "intervals" not in none[0].as_json()["metrics"]


@settings(max_examples=300, deadline=None)
@given(
    values=arrays(
        np.float64,
        st.integers(1, 60),
        elements=st.floats(-1e6, 1e6) | st.sampled_from([0.0, 1.0, 2.5]),  # ties too
    ),
    levels=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4),
)
def test_quantiles_are_numpys_weibull_quantiles_to_the_bit(
    values: np.ndarray, levels: list[float]
) -> None:
    expected = np.quantile(values, levels, method="weibull")
    assert np.array_equal(_quantiles(values, levels), expected)


def test_interval_rules() -> None:
    values = np.arange(1000, dtype=np.float64)
    # the (B + 1) q-th smallest: the 25.025th and 975.975th of 1000
    assert percentile_interval(values) == pytest.approx((24.025, 974.975))
    undefined = np.full(1000, np.nan)
    undefined[:400] = 1.0
    assert percentile_interval(undefined) is None  # most resamples had one class
    # a calibration error: basic interval, reaching 0 when the consistency test accepts
    resampled = np.linspace(0.05, 0.09, 1001)
    assert calibration_error_interval(0.06, resampled, np.linspace(0.0, 0.08, 1001)) == (
        0.0,
        pytest.approx(2 * 0.06 - np.quantile(resampled, 0.025, method="weibull")),
    )
    low, high = calibration_error_interval(0.06, resampled, np.linspace(0.0, 0.04, 1001))
    assert low == pytest.approx(2 * 0.06 - np.quantile(resampled, 0.975, method="weibull"))
    assert low > 0.03  # rejected: 0.031
    assert high == pytest.approx(2 * 0.06 - np.quantile(resampled, 0.025, method="weibull"))
    with pytest.raises(CalibrationError, match="bootstrap"):
        check_resamples(10_001)
    with pytest.raises(CalibrationError, match="bootstrap"):
        check_resamples(True)


@pytest.mark.parametrize("n", [1000, 3000, 15_000])
def test_consistency_resamples_are_capped_and_give_the_ece_of_their_labels(
    n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most CONSISTENCY_RESAMPLES consistency resamples, whatever the chunking, and each
    one's binned ECE is the ECE of the batch's p against its drawn labels."""
    from app.calibration.measures import report_bootstrap as report

    seen: list[int] = []
    original = ViewResampler.consistent

    def counted(self: ViewResampler, labels: np.ndarray) -> dict[str, np.ndarray]:
        found = original(self, labels)
        seen.append(labels.shape[1])
        if len(seen) == 1:  # the first chunk's first column, against the ECE's definition
            y = labels[:, 0].astype(np.float64)
            ece = summarize(self.p, y, None, n_bins=10, strategy="uniform").metrics["ece"]
            assert found["ece"][0] == pytest.approx(ece, abs=1e-6)
        return found

    monkeypatch.setattr(ViewResampler, "consistent", counted)
    p, y = _batch(5, n)
    reliability_reports([p], y.astype(np.int64), None, n_bins=10, strategy="uniform")
    assert sum(seen) == report.CONSISTENCY_RESAMPLES


def test_the_smooth_ece_reads_at_most_its_share_of_many_resamples() -> None:
    """bootstrap=5000 on a small batch: every other interval from all 5000 resamples, the
    smooth ECE's from the first SMOOTH_RESAMPLES (its width search is the costly part): the
    same as with 1024 resamples, which draw the same first chunks (of 128 resamples)."""
    from app.calibration.measures import report_bootstrap as report

    p, y = _batch(6, 300)
    labels = y.astype(np.int64)
    (many,) = reliability_reports([p], labels, None, n_bins=10, strategy="uniform", resamples=5000)
    (few,) = reliability_reports([p], labels, None, n_bins=10, strategy="uniform", resamples=1024)
    assert report.SMOOTH_RESAMPLES <= 1024
    assert many.intervals["smooth_ece"] == few.intervals["smooth_ece"]
    assert many.intervals["log_loss"] != few.intervals["log_loss"]
    assert many.smooth is not None
    assert few.smooth is not None
    np.testing.assert_array_equal(many.smooth.low, few.smooth.low)


def test_a_cancelled_job_stops_in_any_chunk_of_its_bootstrap() -> None:
    """The budget reaches every chunk, however joblib hands them out: a job cancelled
    after its sixth chunk stops there (joblib draws tasks past the first few from a thread of
    its own, which once ran them without the budget)."""
    from app.calibration.kernels import budget as budgets
    from app.calibration.measures import report_bootstrap as report

    p, y = _batch(8, 200)
    job = budgets.Budget(60.0)
    ran: list[int] = []
    original = ViewResampler.statistics

    def counted(self: ViewResampler, counts: np.ndarray, smooth: bool = True) -> dict:
        ran.append(counts.shape[1])
        if len(ran) == 6:
            job.cancelled.set()
        return original(self, counts, smooth)

    def run() -> None:
        budgets.enter(job)
        reliability_reports(
            [p], y.astype(np.int64), None, n_bins=10, strategy="uniform", resamples=5000
        )

    import contextvars

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ViewResampler, "statistics", counted)
        with pytest.raises(budgets.Abandoned):
            contextvars.copy_context().run(run)
    chunks = -(-5000 // report.Resamples(200, 5000).chunk)
    assert len(ran) < 6 + 2 * 2 < chunks  # the chunks already running or queued, no more


def test_calibration_error_intervals_stay_within_0_and_1() -> None:
    resampled = np.linspace(0.0, 0.2, 1001)  # resamples far below a large value
    low, high = calibration_error_interval(0.7, resampled, np.zeros(1001))
    assert high == 1.0
    assert 0.0 < low <= high
    assert percentile_interval(np.linspace(0, 1, 19)) is None  # too few to place 2.5%
    assert percentile_interval(np.linspace(0, 1, 20)) is not None
