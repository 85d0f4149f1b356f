"""A k-class version's rollup (app/calibration/measures/class_rollups.py) against its rows:
the top-label calibration sums are the rows' own (scikit-learn's log loss, the service's
multiclass Brier and top-label ECE), the expected measures are the rows' own, and each
hour's sample is the rows of lowest id hash whatever the order and grouping they came in."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import log_loss

from app.calibration import ClassRollup, expected_multiclass, id_keys
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
    p, y, ids = _rows(2_000, 1)
    rollup = _summed(p, y, ids, 5, 4)
    expected = expected_multiclass(p)
    found = rollup.expected.estimate()
    for key in ("accuracy", "log_loss", "brier"):
        assert found[key] == pytest.approx(expected[key], rel=1e-9), key


def test_an_hours_sample_is_its_lowest_hashes_however_it_came() -> None:
    p, y, ids = _rows(1_500, 2)
    keys = id_keys(ids)
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
