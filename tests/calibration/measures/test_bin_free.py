"""A report for other bins made from the parts an earlier report's bins do not change
(:class:`~app.calibration.measures.report.BinFree`): the same report as one made whole."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from scipy.special import expit, softmax

from app.calibration.measures import block_sums
from app.calibration.measures import report as report_module
from app.calibration.measures.diagnostics import (
    raw_as_probabilities,
    reliability_reports,
    report_and_view,
    reuses_bin_free,
)
from app.calibration.measures.report import BIN_FREE, BinFree, Report
from app.calibration.measures.report_bootstrap import LARGE_ROWS, SharedResamples

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


def _parts(reports: list[Report], n: int, class_index: int | None, resamples: int) -> list[BinFree]:
    return [BinFree.of(r, n=n, class_index=class_index, resamples=resamples) for r in reports]


@contextmanager
def _refusing_bin_free(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Within: computing a measure the bins do not change, or the AUC's placements, fails."""

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a measure the bins do not change was computed again")

    with monkeypatch.context() as patched:
        for name in ("ici", "smooth_ece", "spiegelhalter", "calibration_intercept"):
            patched.setattr(report_module, name, refused)
        patched.setattr(block_sums, "atom_placements", refused)
        yield


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
    case: str,
    class_index: int | None,
    weighted: str | None,
    n_bins: int | str,
    strategy: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p, scores, y = (_multiclass if case.startswith("multiclass") else _binary)(N, 3)
    weights = np.random.default_rng(4).uniform(0.5, 2.0, N) if weighted else None
    sets = [p, raw_as_probabilities(scores)]

    def reports(bins: int | str, how: str, known: list[BinFree] | None = None) -> list[Report]:
        return reliability_reports(
            sets,
            y,
            weights,
            n_bins=bins,
            strategy=how,
            class_index=class_index,
            resamples=200,
            known=known,
        )

    known = _parts(reports(10, "uniform"), N, class_index, 200)
    whole = reports(n_bins, strategy)
    with _refusing_bin_free(monkeypatch):
        reused = reports(n_bins, strategy, known)
    assert _text(reused) == _text(whole)
    assert whole[0].intervals  # there is much to compare
    assert whole[0].smooth is not None


def test_the_parts_are_read_not_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the parts given, the measures the bins do not change are theirs."""
    p, scores, y = _binary(N, 5)
    sets = [p, raw_as_probabilities(scores)]
    earlier = reliability_reports(sets, y, None, n_bins=10, strategy="uniform", resamples=100)
    with _refusing_bin_free(monkeypatch):
        reused = reliability_reports(
            sets,
            y,
            None,
            n_bins=12,
            strategy="uniform",
            resamples=100,
            known=_parts(earlier, N, None, 100),
        )
    shared = set(BIN_FREE) & set(earlier[0].metrics)
    assert shared >= {"ici", "smooth_ece", "calibration_intercept", "spiegelhalter_z", "auc"}
    assert {k: reused[0].metrics[k] for k in shared} == {k: earlier[0].metrics[k] for k in shared}
    assert reused[0].bins.count.size == 12


def test_small_batches_are_reported_whole_and_without_resamples_the_parts_serve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Below LARGE_ROWS the row bootstrap's AUC atoms are cut at the bins' edges: the parts
    are not used there (the report is made whole); without resamples they are."""
    n = 3_000
    p, scores, y = _binary(n, 6)
    sets = [p, raw_as_probabilities(scores)]
    for resamples in (100, 0):
        assert reuses_bin_free(n, resamples) == (resamples == 0)
        earlier = reliability_reports(
            sets, y, None, n_bins=10, strategy="uniform", resamples=resamples
        )
        known = _parts(earlier, n, None, resamples)
        whole = reliability_reports(
            sets, y, None, n_bins=15, strategy="uniform", resamples=resamples
        )
        with monkeypatch.context() as patched:
            if resamples == 0:  # the parts serve: nothing of theirs is computed
                patched.setattr(report_module, "ici", lambda *a, **k: 1 / 0)
            reused = reliability_reports(
                sets, y, None, n_bins=15, strategy="uniform", resamples=resamples, known=known
            )
        assert _text(reused) == _text(whole)


@pytest.mark.parametrize(
    ("n", "class_index", "resamples", "sets"),
    [(2_000, None, 60, 2), (1_999, None, 50, 2), (2_000, 1, 50, 2), (2_000, None, 50, 1)],
)
def test_parts_of_other_rows_classes_resamples_or_sets_are_refused(
    n: int, class_index: int | None, resamples: int, sets: int
) -> None:
    p, scores, y = _binary(2_000, 7)
    both = [p, raw_as_probabilities(scores)]
    earlier = reliability_reports(both, y, None, n_bins=10, strategy="uniform", resamples=50)
    known = _parts(earlier, n, class_index, resamples)[:sets]
    with pytest.raises(ValueError, match="same rows, class and resamples"):
        reliability_reports(both, y, None, n_bins=12, strategy="uniform", resamples=50, known=known)


@pytest.mark.parametrize(("case", "class_index", "weighted"), CASES)
def test_whole_reports_of_other_bins_agree_on_all_the_bins_do_not_change(
    case: str, class_index: int | None, weighted: str | None
) -> None:
    """What BIN_FREE names, its intervals and the smoothed curve are the same whatever the
    bins, in reports made whole: the premise of reusing them."""
    p, scores, y = (_multiclass if case.startswith("multiclass") else _binary)(N, 8)
    weights = np.random.default_rng(9).uniform(0.5, 2.0, N) if weighted else None
    sets = [p, raw_as_probabilities(scores)]
    options = {"class_index": class_index, "resamples": 200}
    few = reliability_reports(sets, y, weights, n_bins=5, strategy="uniform", **options)
    many = reliability_reports(sets, y, weights, n_bins=37, strategy="quantile", **options)
    pairs = zip(_parts(few, N, class_index, 200), _parts(many, N, class_index, 200), strict=True)
    for a, b in pairs:
        assert (a.metrics, a.intervals) == (b.metrics, b.intervals)
        assert a.smooth is not None
        assert b.smooth is not None
        assert json.dumps(a.smooth.as_json()) == json.dumps(b.smooth.as_json())


def test_the_smooth_eces_consistency_draws_do_not_depend_on_the_bins() -> None:
    """The block bootstrap's draws of a calibrated model's smooth ECE (for the test at 0)
    come from a stream of their own, not after the bins' draws: their count would move them
    (which once made the smooth ECE's interval reach 0 for some bins and not for others)."""
    p, _, y = _binary(N, 10)
    view = report_and_view(p, y, None, None)[1]
    shared = SharedResamples(N, 100)
    point = {"ece": 0.01, "smooth_ece": 0.01, "smooth_ece_sigma": 0.05}
    draws = [
        shared.sampler(view, np.linspace(0.0, 1.0, bins + 1)[1:-1], point).consistent(0, 50)
        for bins in (5, 37)
    ]
    np.testing.assert_array_equal(draws[0]["smooth_ece"], draws[1]["smooth_ece"])
    assert not np.array_equal(draws[0]["ece"][:5], draws[1]["ece"][:5])  # the bins' own
