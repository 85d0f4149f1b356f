"""The large-batch bootstrap (block sums) against the row bootstrap, where both run.

Tolerances, from the Monte Carlo error, in units of s, the standard deviation of the row
bootstrap's resampled values of the measure:

- an end of a 95% interval read from R = 1000 resamples has a standard error of
  sqrt(0.025 x 0.975 / R) / phi(1.96) = 0.085 s, so two independent runs differ by 0.12 s;
- the block sums estimate the spread from K blocks, a relative error of 1 / sqrt(2K): 1.6% at
  K = 2048 (0.03 s at an end, 1.96 s from the centre), 4.4% for the smooth ECE's 256 blocks
  (0.09 s);
- together 0.12 s (0.15 s for the smooth ECE); the ends must agree within 4 of those, 0.5 s
  (0.6 s). The spreads themselves have relative errors of 1 / sqrt(2R) = 2.2% per run: with
  the blocks' 3.5% (5.4% for the smooth ECE), so they must agree within 14% (22%).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.special import expit, logit, softmax

from app.calibration.kernels.searching import EdgeCounter
from app.calibration.measures import block_placements, block_sums, diagnostics, report_bootstrap
from app.calibration.measures.block_resampled import BlockResampler
from app.calibration.measures.diagnostics import raw_as_probabilities, reliability_reports
from app.calibration.measures.headline_reports import headline_resampled
from app.calibration.measures.report import Report
from app.calibration.measures.report_bootstrap import Resampled

N = 40_000
EDGES = np.linspace(0.0, 1.0, 11)[1:-1]
ENDS = {"smooth_ece": 0.6}
SPREADS = {"smooth_ece": 0.22}


def _binary(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.beta(2.0, 3.0, n)
    y = (rng.random(n) < expit(1.3 * logit(p) + 0.2)).astype(np.int64)
    return p, y


def _multiclass(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=1.5, size=(n, 3))
    truth = softmax(1.4 * logits, axis=1)
    y = (rng.random(n)[:, None] > np.cumsum(truth, axis=1)).sum(axis=1)
    return softmax(logits, axis=1), y.astype(np.int64)


def _reports(
    p: np.ndarray, y: np.ndarray, threshold: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[Report, Resampled]:
    """The report of ``p`` with 1000 resamples, by rows or blocks as ``threshold`` says, and
    what its bootstrap returned."""
    seen: list[list[Resampled]] = []

    def spy(*args: Any, **kwargs: Any) -> list[Resampled]:
        found = report_bootstrap.bootstrap(*args, **kwargs, large_rows=threshold)
        seen.append(found)
        return found

    monkeypatch.setattr(diagnostics, "bootstrap", spy)
    (report,) = reliability_reports([p], y, None, n_bins=10, strategy="uniform")
    return report, seen[0][0]


@pytest.mark.parametrize("batch", [_binary, _multiclass])
def test_the_block_sums_agree_with_the_row_bootstrap(
    batch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every interval's ends, every measure's spread over the resamples, and the smooth
    curve's band, by both methods on one batch of 40,000 rows (binary; multiclass top-label)."""
    p, y = batch(N, 7)
    rows, by_rows = _reports(p, y, N + 1, monkeypatch)
    blocks, by_blocks = _reports(p, y, 1, monkeypatch)
    assert set(rows.intervals) == set(blocks.intervals)
    assert {"log_loss", "brier", "ece", "smooth_ece", "calibration_slope"} <= set(rows.intervals)
    for name, (low, high) in rows.intervals.items():
        spread = float(np.nanstd(by_rows.values[name]))
        within = ENDS.get(name, 0.5) * spread
        assert blocks.intervals[name][0] == pytest.approx(low, abs=within), name
        assert blocks.intervals[name][1] == pytest.approx(high, abs=within), name
        ratio = float(np.nanstd(by_blocks.values[name])) / spread
        assert abs(ratio - 1.0) <= SPREADS.get(name, 0.14), (name, ratio)
    assert rows.smooth is not None
    assert blocks.smooth is not None
    assert rows.smooth.low is not None
    assert rows.smooth.high is not None
    assert blocks.smooth.low is not None
    assert blocks.smooth.high is not None
    dense = rows.smooth.density > 0.1 * rows.smooth.density.max()
    width = (rows.smooth.high - rows.smooth.low)[dense]
    other = (blocks.smooth.high - blocks.smooth.low)[dense]
    assert np.median(other / width) == pytest.approx(1.0, abs=0.1)
    for ours, theirs in (
        (blocks.smooth.low, rows.smooth.low),
        (blocks.smooth.high, rows.smooth.high),
    ):
        # each end within 0.6 of the pointwise spread (the band's half width / 1.96), at most
        # places; the sparse ends of the curve vary more
        assert np.median(np.abs(ours - theirs)[dense] / (width / 3.92)) < 0.6


def test_views_stay_paired_and_intervals_are_seeded() -> None:
    """Two views of one large batch read the same blocks and counts: the raw scores rank the
    rows as p does, so each resample's AUC is the same for both (up to the atoms they are read
    at), and the same request gives the same intervals."""
    p, y = _binary(200_000, 11)
    scores = logit(np.clip(p, 1e-6, 1 - 1e-6)) * 3.0
    args = ([p, raw_as_probabilities(scores)], y, None)
    points, (calibrated, raw) = headline_resampled(*args)
    _, (again, _) = headline_resampled(*args)
    assert calibrated.intervals == again.intervals
    auc, raw_auc = calibrated.values["auc"], raw.values["auc"]
    assert np.std(auc - raw_auc) < 0.02 * np.std(auc)
    low, high = calibrated.intervals["auc"]
    assert low < points[0]["auc"] < high


def test_the_threshold_picks_the_method(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below LARGE_ROWS the rows are resampled, from it the blocks; each of the blocks' loops
    (chunks of rows, chunks of resamples) passes a checkpoint."""
    calls: list[str] = []
    monkeypatch.setattr(block_sums, "checkpoint", lambda: calls.append("rows"))
    monkeypatch.setattr(block_placements, "checkpoint", lambda: calls.append("rows"))
    monkeypatch.setattr(block_sums, "ROW_CHUNK", 10_000)
    monkeypatch.setattr(report_bootstrap, "checkpoint", lambda: calls.append("resamples"))
    p, y = _binary(report_bootstrap.LARGE_ROWS - 1, 3)
    headline_resampled([p], y, None, 300)
    assert calls.count("rows") == 0
    assert calls.count("resamples") > 0
    calls.clear()
    p, y = _binary(report_bootstrap.LARGE_ROWS, 3)
    headline_resampled([p], y, None, 300)
    chunks = -(-report_bootstrap.LARGE_ROWS // 10_000)
    assert calls.count("rows") == 2 * chunks  # the atoms' pass, then the sums'
    assert calls.count("resamples") == -(-300 // 128)


def test_consistency_draws_are_capped_and_centred(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most CONSISTENCY_RESAMPLES consistency draws, over the chunks of a large batch, and
    their binned ECE is a calibrated model's: at most the ECE of labels drawn from p, on
    average (a draw per bin against one per row: the same mean and variance)."""
    seen: list[np.ndarray] = []
    original = BlockResampler.consistent

    def counted(self: BlockResampler, start: int, count: int) -> dict[str, np.ndarray]:
        found = original(self, start, count)
        seen.append(found["ece"])
        return found

    monkeypatch.setattr(BlockResampler, "consistent", counted)
    p, _ = _binary(100_000, 5)
    y = (np.random.default_rng(6).random(p.size) < p).astype(np.int64)
    headline_resampled([p], y, None)
    drawn = np.concatenate(seen)
    assert drawn.size == report_bootstrap.CONSISTENCY_RESAMPLES
    rng = np.random.default_rng(8)
    edges = np.linspace(0.0, 1.0, 11)
    labels = rng.random((200, p.size)) < p
    bins = np.searchsorted(edges[1:-1], p)
    per_row = [np.abs(np.bincount(bins, p - row, 10)).sum() / p.size for row in labels]
    # two means of 200 draws, each within about 1.4% of its value
    assert np.mean(drawn) == pytest.approx(np.mean(per_row), rel=0.06)
    assert np.std(drawn) == pytest.approx(np.std(per_row), rel=0.3)


@pytest.mark.parametrize("kind", ["uniform", "tied", "crowded", "narrow"])
def test_edge_counts_are_numpys_search(kind: str) -> None:
    """EdgeCounter counts as np.searchsorted (side left) does: values on edges, outside
    them, ties, and edges crowded in a tiny range (numpy's search then)."""
    rng = np.random.default_rng(len(kind))
    p = {
        "uniform": rng.random(20_000),
        "tied": np.round(rng.beta(0.3, 5.0, 20_000), 3),
        "crowded": np.concatenate([0.5 + 1e-9 * rng.random(2000), rng.random(100)]),
        "narrow": 0.3 + 1e-3 * rng.normal(size=20_000),
    }[kind]
    edges = np.unique(np.concatenate([np.quantile(p, np.arange(1, 1024) / 1024), EDGES]))
    values = np.concatenate([p, edges, [-1.0, 0.0, 1.0, 2.0]])
    counter = EdgeCounter(edges)
    np.testing.assert_array_equal(counter.count(values), np.searchsorted(edges, values))


def test_one_tied_prediction_keeps_an_auc_of_one_half() -> None:
    """Every row at one p: each resample's AUC is 1/2 (ties count half), as on rows."""
    _, y = _binary(30_000, 4)
    (report,) = reliability_reports(
        [np.full(y.size, 0.3)], y, None, n_bins=10, strategy="uniform", resamples=200
    )
    assert report.intervals["auc"] == (0.5, 0.5)
