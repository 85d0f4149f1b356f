"""An hour's rollup (app/calibration/measures/rollups.py, rollup_figures.py) against the
rows it sums: what it keeps exactly, what binning changes and by how much at most."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import confusion_matrix, roc_auc_score

from app.calibration import (
    CELL_LOWER,
    CELL_UPPER,
    BinaryRollup,
    cell_means,
    confusion_of,
    expected_binary,
    expected_of,
)
from app.calibration.measures.rollups import CELL_EDGES, cell_of


def _rows(n: int, seed: int, spread: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = 1 / (1 + np.exp(-(rng.normal(size=n) * spread - 1)))
    y = (rng.random(n) < p).astype(np.float64)
    return p, y


def _rollup(p: np.ndarray, y: np.ndarray, bins: np.ndarray | None = None) -> BinaryRollup:
    rollup = BinaryRollup(0 if bins is None else 12)
    rollup.add_predictions(p, bins)
    known = y >= 0
    rollup.add_labels(p[known], y[known])
    return rollup


def _same(a: BinaryRollup, b: BinaryRollup, rel: float = 1e-12) -> None:
    for name in ("counts", "positives", "negatives", "scores"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for name in ("sums", "fine_sums", "spreads", "moments"):
        assert np.allclose(getattr(a, name), getattr(b, name), rtol=rel, atol=1e-9), name
    for name in ("n", "n_labelled"):
        assert getattr(a, name) == getattr(b, name)
    for name in ("entropy", "var_loss", "var_brier", "spread", "loss", "brier"):
        assert getattr(a, name) == pytest.approx(getattr(b, name), rel=rel)


probabilities = st.lists(
    st.one_of(
        st.floats(0.0, 1.0),
        st.sampled_from([0.0, 1.0, 0.5, 0.05, 0.95, float(CELL_EDGES[3]), float(CELL_EDGES[-4])]),
    ),
    min_size=1,
    max_size=80,
)


@settings(max_examples=80, deadline=None)
@given(p=probabilities, seed=st.integers(0, 2**16), cut=st.integers(0, 80))
def test_stored_and_added_in_parts_it_is_the_rollup_of_all_the_rows(
    p: list[float], seed: int, cut: int
) -> None:
    """Bytes and back keep every count and the float64 sums exactly (the rest to float32's
    precision); two parts added are the whole."""
    rng = np.random.default_rng(seed)
    q = np.array(p)
    y = rng.choice([-1.0, 0.0, 1.0, 2.0], size=q.size)  # none yet, the classes, a stray label
    bins = rng.integers(0, 12, size=q.size)
    whole = _rollup(q, y, bins)
    cut = min(cut, q.size)
    first = _rollup(q[:cut], y[:cut], bins[:cut])
    first.add(_rollup(q[cut:], y[cut:], bins[cut:]))
    _same(first, whole)
    back = BinaryRollup.from_bytes(whole.to_bytes())
    _same(back, whole, rel=1e-6)
    assert back.sums == pytest.approx(whole.sums, rel=1e-6)  # float32 once stored
    assert np.array_equal(back.fine_sums, whole.fine_sums)
    assert back.moments[:, 0].tolist() == whole.moments[:, 0].tolist()  # p: float64
    assert (back.loss, back.brier) == (whole.loss, whole.brier)
    assert whole.n == q.size
    assert whole.n_labelled == int((y >= 0).sum())
    assert whole.positives.sum() == (y == 1).sum()
    assert whole.negatives.sum() == (y == 0).sum()


def test_a_label_taken_out_again_leaves_the_rollup_as_it_was() -> None:
    p, y = _rows(500, 1)
    rollup = _rollup(p, np.full(p.size, -1.0))
    before = copy.deepcopy(rollup)
    rollup.add_labels(p[:50], y[:50])
    rollup.add_labels(p[:50], y[:50], sign=-1)
    _same(rollup, before, rel=1e-9)
    relabelled = _rollup(p, y)
    relabelled.add_labels(p[:20], y[:20], sign=-1)
    relabelled.add_labels(p[:20], 1 - y[:20])
    flipped = y.copy()
    flipped[:20] = 1 - y[:20]
    _same(relabelled, _rollup(p, flipped), rel=1e-9)


def test_cells_are_right_closed_and_hold_every_probability() -> None:
    assert np.all(np.diff(CELL_EDGES) > 0)
    for edge in (0.05, 0.3, 0.5, 0.95):
        assert edge in CELL_EDGES  # every multiple of 1/20 is an edge
    p = np.array([0.0, 0.5, np.nextafter(0.5, 1), 1.0, *CELL_EDGES])
    cells = cell_of(p)
    assert np.all((CELL_LOWER[cells] < p) | (cells == 0))
    assert np.all(p <= CELL_UPPER[cells])


@pytest.mark.parametrize("threshold", [0.5, 0.3, 0.05])
def test_expected_measures_at_an_edge_are_the_rows_own(threshold: float) -> None:
    """Every expected measure but the AUC equals expected_binary on the rows (CBPE); the
    AUC within half the expected pairs that share a cell."""
    p, _ = _rows(20_000, 2)
    ours = expected_of(_rollup(p, np.full(p.size, -1.0)), threshold)
    rows = expected_binary(p, threshold)
    for key in ("positive_rate", "accuracy", "precision", "recall", "f1", "log_loss", "brier"):
        assert ours[key] == pytest.approx(rows[key], rel=1e-12), key
        low, high = ours["intervals"][key]
        ref_low, ref_high = rows["intervals"][key]
        assert (low, high) == pytest.approx((ref_low, ref_high), rel=1e-9), key
    cells = cell_of(p)
    positives = np.bincount(cells, p, minlength=CELL_EDGES.size + 1)
    negatives = np.bincount(cells, 1 - p, minlength=CELL_EDGES.size + 1)
    slack = 0.5 * float(positives @ negatives) / (p.sum() * (1 - p).sum())
    assert abs(ours["roc_auc"] - rows["roc_auc"]) <= slack
    assert abs(ours["roc_auc"] - rows["roc_auc"]) < 2e-3


def test_a_threshold_inside_a_cell_is_off_by_at_most_that_cells_rows() -> None:
    p, _ = _rows(20_000, 3)
    threshold = 0.4321
    at = int(cell_of(np.array([threshold]))[0])
    assert CELL_LOWER[at] < threshold < CELL_UPPER[at]
    ours = expected_of(_rollup(p, np.full(p.size, -1.0)), threshold)
    rows = expected_binary(p, threshold)
    in_cell = cell_of(p) == at
    assert (
        abs(ours["precision"] * (p > threshold).sum() - rows["precision"] * (p > threshold).sum())
        <= in_cell.sum()
    )
    assert abs(ours["accuracy"] - rows["accuracy"]) * p.size <= in_cell.sum()


@pytest.mark.parametrize("threshold", [0.5, 0.25])
def test_realized_confusion_is_scikit_learns_and_the_auc_is_within_its_slack(
    threshold: float,
) -> None:
    p, y = _rows(20_000, 4)
    rollup = _rollup(p, y)
    ours = confusion_of(rollup, threshold)
    tn, fp, fn, tp = confusion_matrix(y, p > threshold).ravel()
    assert ours["accuracy"] == pytest.approx((tp + tn) / p.size, rel=1e-12)
    assert ours["precision"] == pytest.approx(tp / (tp + fp), rel=1e-12)
    assert ours["recall"] == pytest.approx(tp / (tp + fn), rel=1e-12)
    slack = (
        0.5
        * float(rollup.positives @ rollup.negatives)
        / (rollup.positives.sum() * rollup.negatives.sum())
    )
    assert abs(ours["roc_auc"] - roc_auc_score(y, p)) <= slack


def test_the_cells_means_stand_for_the_rows_in_em() -> None:
    """EM on the cells' means weighted by their counts: within 2e-3 of EM on the rows."""
    from app.service.estimates import prior_of

    p, _ = _rows(50_000, 5)
    training = np.array([0.7, 0.3])
    means, counts = cell_means(_rollup(p, np.full(p.size, -1.0)))
    ours = prior_of(means, training, counts)["estimated"]
    assert ours == pytest.approx(prior_of(p, training)["estimated"], abs=2e-3)


@pytest.mark.parametrize("spread", [1.0, 2.0, 3.0])
def test_an_hour_takes_under_four_kilobytes(spread: float) -> None:
    """An hour of 10 predictions a second, all labelled, 101 score bins, probabilities whose
    log odds spread 1, 2 or 3 (from 0.05 to 0.95 most of them, up to 1e-4 to 0.9999): the
    bytes grow with the cells filled, not with the rows."""
    p, y = _rows(36_000, 6, spread)
    rollup = _rollup(p, y, np.random.default_rng(6).integers(0, 12, p.size))
    rollup.scores = np.resize(rollup.scores, 101) * 30
    assert len(rollup.to_bytes()) < 4096
