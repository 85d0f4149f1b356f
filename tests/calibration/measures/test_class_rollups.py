"""A k-class version's rollup (app/calibration/measures/class_rollups.py) against its rows:
the top-label calibration sums are the rows' own (scikit-learn's log loss, the service's
multiclass Brier and top-label ECE), the expected measures are the rows' own, and each
hour's sample is the rows of lowest id hash whatever the order and grouping they came in."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from sklearn.metrics import log_loss

from app.calibration import ClassRollup, id_keys
from app.calibration.measures.class_rollups import sample_size
from app.calibration.measures.multiclass_metrics import multiclass_brier, top_label
from app.service.traffic.sums import CalibrationSums

K = 4


def _rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(K, 0.7), size=n)
    y = np.array([rng.choice(K, p=row) for row in p])
    return p, y, [f"id-{seed}-{i}" for i in range(n)]


def _summed(p: np.ndarray, y: np.ndarray, ids: list[str], hour: int, parts: int) -> ClassRollup:
    rollup = ClassRollup(K)
    for part in np.array_split(np.arange(p.shape[0]), parts):
        delta = ClassRollup(K)
        delta.add_predictions(p[part], id_keys([ids[i] for i in part]), hour)
        delta.add_labels(p[part], y[part])
        rollup.add(ClassRollup.from_bytes(delta.to_bytes()))
    return rollup


@pytest.mark.parametrize("n_bins", [5, 10, 20])
def test_the_calibration_sums_are_the_rows(n_bins: int) -> None:
    p, y, ids = _rows(3_000, 0)
    rollup = _summed(p, y, ids, 100, 1)
    sums = CalibrationSums.of_rollup(rollup.top, n_bins)
    assert sums is not None
    found = sums.result()
    confidence, correct = top_label(p, y)
    assert found["mean_predicted"] == pytest.approx(confidence.mean(), rel=1e-12)
    assert found["observed_rate"] == pytest.approx(correct.mean(), rel=1e-12)
    assert found["log_loss"] == pytest.approx(log_loss(y, p, labels=range(K)), rel=1e-9)
    assert found["brier"] == pytest.approx(multiclass_brier(p, y), rel=1e-9)
    bins = np.searchsorted(np.linspace(0.0, 1.0, n_bins + 1)[1:-1], confidence)  # (lo, hi]
    gaps = [abs(correct[bins == b].sum() - confidence[bins == b].sum()) for b in range(n_bins)]
    assert found["ece"] == pytest.approx(sum(gaps) / y.size, rel=1e-9)


def test_the_expected_measures_are_the_rows() -> None:
    """Each row's label drawn from the row: E[accuracy] = max p, E[log loss] = sum p (-log p),
    E[Brier] = sum_c p_c |p - e_c|^2, averaged over the rows."""
    p, y, ids = _rows(2_000, 1)
    found = _summed(p, y, ids, 5, 4).expected.estimate()
    distances = ((p[:, None, :] - np.eye(K)[None, :, :]) ** 2).sum(axis=2)  # row i, label c
    assert found["accuracy"] == pytest.approx(p.max(axis=1).mean(), rel=1e-12)
    assert found["log_loss"] == pytest.approx((-p * np.log(p)).sum(axis=1).mean(), rel=1e-9)
    assert found["brier"] == pytest.approx((p * distances).sum(axis=1).mean(), rel=1e-12)


def test_labels_past_k_count_as_labelled_only_and_a_label_never_added_is_clamped() -> None:
    p, y, ids = _rows(300, 5)
    rollup = _summed(p, np.where(np.arange(300) < 30, K + 2, y), ids, 2, 1)
    plain = _summed(p[30:], y[30:], ids[30:], 2, 1)
    assert rollup.n_labelled == 300
    assert np.array_equal(rollup.top.positives, plain.top.positives)
    assert rollup.top.loss == pytest.approx(plain.top.loss, rel=1e-12)
    fresh = ClassRollup(K)  # takes out labels it never had: kept at zero
    fresh.add_labels(p[:5], y[:5], sign=-1)
    assert fresh.clamp()
    assert (fresh.n_labelled, fresh.top.positives.sum(), fresh.top.negatives.sum()) == (0, 0, 0)


def test_an_hours_sample_is_its_lowest_hashes_however_it_came() -> None:
    p, y, ids = _rows(1_500, 2)
    keys = np.array([int.from_bytes(hashlib.blake2b(i.encode(), digest_size=8).digest(),
                                    "little") for i in ids], dtype=np.uint64)  # fmt: skip
    assert np.array_equal(keys, id_keys(ids))
    lowest = np.sort(keys)[: sample_size(K)]
    at_once = _summed(p, y, ids, 9, 1)
    order = np.random.default_rng(3).permutation(p.shape[0])
    shuffled = _summed(p[order], y[order], [ids[i] for i in order], 9, 7)
    for rollup in (at_once, shuffled):
        assert np.array_equal(np.sort(rollup.keys), lowest)
        assert rollup.strata == {9: 1_500}
        rows, weights = rollup.sample()
        assert weights == pytest.approx(np.full(sample_size(K), 1_500 / sample_size(K)))
        wanted = {int(k): row for k, row in zip(keys, p.astype(np.float32), strict=True)}
        assert all(
            np.array_equal(row, wanted[int(k)]) for k, row in zip(rollup.keys, rows, strict=True)
        )


def test_labels_taken_out_leave_the_sums_of_the_rest() -> None:
    p, y, ids = _rows(800, 4)
    rollup = _summed(p, y, ids, 1, 1)
    flipped = (y + 1) % K
    rollup.add_labels(p[:100], y[:100], sign=-1)
    rollup.add_labels(p[:100], flipped[:100])
    relabelled = np.concatenate([flipped[:100], y[100:]])
    again = _summed(p, relabelled, ids, 1, 1)
    assert not rollup.clamp()
    assert (rollup.n, rollup.n_labelled) == (again.n, again.n_labelled)
    assert np.array_equal(rollup.top.positives, again.top.positives)
    assert rollup.top.loss == pytest.approx(again.top.loss, rel=1e-9)


def test_rollups_of_different_classes_do_not_add() -> None:
    with pytest.raises(ValueError, match="classes"):
        ClassRollup(3).add(ClassRollup(4))


def test_a_windows_limit_keeps_each_hours_lowest_keys_whatever_the_order() -> None:
    """Monitoring holds a window within its share of the samples: the rows that stay are each
    hour's of lowest key, the same however the hours were added and limited on the way."""
    hours = []
    for hour in range(12):
        p, y, ids = _rows(400, 10 + hour)
        hours.append(_summed(p, y, ids, hour, 2))
    hours.append(_summed(*_rows(5, 40)[:2], ["q1", "q2", "q3", "q4", "q5"], 12, 1))  # quiet
    windows = []
    for order in (range(13), [12, *reversed(range(12))], [*range(6), 12, *range(6, 12)]):
        window = ClassRollup(K)
        for hour in order:
            window.add(hours[hour])
            window.limit(1_200)
        window.sample()
        windows.append(window)
    first = np.sort(windows[0].keys)
    for other in windows[1:]:
        assert np.array_equal(np.sort(other.keys), first)
    cap = 1_200 // (K * 13)
    assert windows[0].keys.size == 12 * cap + 5  # the quiet hour under the cap: whole
    for hour in range(12):  # each hour's lowest keys
        mine = np.sort(windows[0].keys[windows[0].hours == hour])
        assert np.array_equal(mine, np.sort(hours[hour].keys)[: mine.size])
    _, weights = windows[0].sample()
    assert weights.sum() == pytest.approx(12 * 400 + 5)


def test_a_version_of_very_many_classes_keeps_no_sample() -> None:
    k = 70_000  # past what a 16-bit header could say
    rollup = ClassRollup(k)
    rollup.add_predictions(np.full((3, k), 1 / k), id_keys(["a", "b", "c"]), 5)
    again = ClassRollup.from_bytes(rollup.to_bytes())
    assert (again.k, again.n, again.keys.size, again.strata) == (k, 3, 0, {5: 3})
    assert len(rollup.to_bytes()) < 4_096
