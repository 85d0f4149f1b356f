"""A report for other bins made from the parts an earlier report's bins do not change
(:class:`~app.calibration.measures.report.BinFree`): the same report as one made whole."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import expit, softmax

from app.calibration.measures import report as report_module
from app.calibration.measures.diagnostics import raw_as_probabilities, reliability_reports
from app.calibration.measures.report import BIN_FREE, BinFree, Report
from app.calibration.measures.report_bootstrap import LARGE_ROWS

N = LARGE_ROWS + 5_000


def _binary(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=n)
    p = np.round(expit(1.2 * scores + 0.1), 3)  # ties, as a step function's output has
    y = (rng.random(n) < expit(1.3 * scores)).astype(np.int64)
    return p, scores, y


def _multiclass(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=1.5, size=(n, 3))
    truth = softmax(1.4 * logits, axis=1)
    y = (rng.random(n)[:, None] > np.cumsum(truth, axis=1)).sum(axis=1)
    return softmax(logits, axis=1), logits, y.astype(np.int64)


def _text(reports: list[Report]) -> str:
    """The reports as the API writes them, key order included."""
    return json.dumps([r.as_json() for r in reports])


CASES = [
    ("binary", None, None),
    ("binary weighted", None, "weights"),
    ("binary class 0", 0, None),
    ("multiclass top label", None, None),
    ("multiclass class 2", 2, "weights"),
]


@pytest.mark.parametrize(("case", "class_index", "weighted"), CASES)
@pytest.mark.parametrize(
    ("n_bins", "strategy"), [(13, "uniform"), (7, "quantile"), ("auto", "uniform")]
)
def test_a_report_from_another_reports_parts_equals_one_made_whole(
    case: str, class_index: int | None, weighted: str | None, n_bins: int | str, strategy: str
) -> None:
    p, scores, y = (_multiclass if case.startswith("multiclass") else _binary)(N, 3)
    weights = np.random.default_rng(4).uniform(0.5, 2.0, N) if weighted else None
    sets = [p, raw_as_probabilities(scores)]
    options = {"class_index": class_index, "resamples": 200}
    earlier = reliability_reports(sets, y, weights, n_bins=10, strategy="uniform", **options)
    known = [BinFree.of(r, 200) for r in earlier]
    whole = reliability_reports(sets, y, weights, n_bins=n_bins, strategy=strategy, **options)
    reused = reliability_reports(
        sets, y, weights, n_bins=n_bins, strategy=strategy, known=known, **options
    )
    assert _text(reused) == _text(whole)
    assert whole[0].intervals  # there is something to compare
    assert set(known[0].metrics) & {"smooth_ece", "log_loss", "brier"}


def test_the_parts_are_not_computed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the parts given, the measures the bins do not change are read from them."""
    p, scores, y = _binary(N, 5)
    sets = [p, raw_as_probabilities(scores)]
    earlier = reliability_reports(sets, y, None, n_bins=10, strategy="uniform", resamples=100)
    known = [BinFree.of(r, 100) for r in earlier]

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a bin-free measure was computed again")

    for name in ("ici", "smooth_ece", "spiegelhalter", "calibration_intercept"):
        monkeypatch.setattr(report_module, name, refused)
    reused = reliability_reports(
        sets, y, None, n_bins=12, strategy="uniform", resamples=100, known=known
    )
    shared = set(BIN_FREE) & set(earlier[0].metrics)
    assert shared >= {"ici", "smooth_ece", "calibration_intercept", "spiegelhalter_z"}
    assert {k: reused[0].metrics[k] for k in shared} == {k: earlier[0].metrics[k] for k in shared}
    assert reused[0].bins.count.size == 12


def test_small_batches_are_reported_whole_and_without_resamples_the_parts_serve() -> None:
    """Below LARGE_ROWS the row bootstrap's AUC atoms are cut at the bins' edges: the parts
    are not used there (the report is the same as one made whole); without resamples they are."""
    p, scores, y = _binary(3_000, 6)
    sets = [p, raw_as_probabilities(scores)]
    for resamples in (100, 0):
        earlier = reliability_reports(
            sets, y, None, n_bins=10, strategy="uniform", resamples=resamples
        )
        known = [BinFree.of(r, resamples) for r in earlier]
        whole = reliability_reports(
            sets, y, None, n_bins=15, strategy="uniform", resamples=resamples
        )
        reused = reliability_reports(
            sets, y, None, n_bins=15, strategy="uniform", resamples=resamples, known=known
        )
        assert _text(reused) == _text(whole)


def test_parts_of_other_resamples_or_sets_are_refused() -> None:
    p, scores, y = _binary(2_000, 7)
    sets = [p, raw_as_probabilities(scores)]
    earlier = reliability_reports(sets, y, None, n_bins=10, strategy="uniform", resamples=50)
    with pytest.raises(ValueError, match="same resamples"):
        reliability_reports(
            sets,
            y,
            None,
            n_bins=12,
            strategy="uniform",
            resamples=60,
            known=[BinFree.of(r, 50) for r in earlier],
        )
    with pytest.raises(ValueError, match="one BinFree per set"):
        reliability_reports(
            sets,
            y,
            None,
            n_bins=12,
            strategy="uniform",
            resamples=50,
            known=[BinFree.of(earlier[0], 50)],
        )
