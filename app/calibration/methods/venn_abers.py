"""Venn-ABERS predictors: two isotonic fits per score, a probability interval, and a merged p.

Vovk & Petej, *Venn-Abers predictors* (UAI 2014): for a test score s, p0 is the isotonic
regression of the calibration batch plus (s, 0), read at s, and p1 the same with (s, 1). One of
the two is perfectly calibrated in the Venn sense, whichever label s turns out to have; the
pair is the prediction and its distance measures how much the batch leaves undecided. Vovk,
Petej & Fedorova, *Large-scale probabilistic predictors with and without guarantees of
validity* (NeurIPS 2015): the inductive predictor (IVAP) computes both for every s at once from
the cumulative sum diagram (section 2; :mod:`app.calibration.methods._venn_abers_kernel`); the cross
predictor (CVAP, section 3) fits one IVAP per fold; the single probability for log loss is
p = p1 / (1 - p0 + p1), and for CVAP p = GM(p1) / (GM(1 - p0) + GM(p1)) over the folds
(section 4; :mod:`app.calibration.methods._venn_abers_table`). Section numbers are those of the
paper's arXiv version, 1511.00213.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np

from app.calibration.base import (
    Capabilities,
    FloatArray,
    JSONValue,
    ParamError,
    StateError,
    check_param_keys,
    check_state_keys,
    choice_param,
    int_param,
    state_floats,
)
from app.calibration.kernels.crossval import effective_folds, stratified_folds
from app.calibration.methods._venn_abers_kernel import venn_abers_cells
from app.calibration.methods._venn_abers_table import StepTable

MODES = ("inductive", "cross")
_TABLE_KEYS = ("edges", "p", "p0", "p1")


class VennAbersCalibrator:
    """Venn-ABERS: p0 and p1 for each score, answered as p = p1 / (1 - p0 + p1).

    Parameters
    ----------
    mode : {"inductive", "cross"}, default "inductive"
        ``"inductive"`` (IVAP): one predictor on the whole batch. ``"cross"`` (CVAP): the
        batch is split into ``folds`` stratified folds
        (:func:`~app.calibration.kernels.crossval.stratified_folds`, seed 0) and one IVAP is fitted
        on each fold's complement. Fewer folds are used when a class has fewer points of positive
        weight than ``folds`` (:func:`~app.calibration.kernels.crossval.effective_folds`); with
        fewer than two such points there is nothing to cross and the one IVAP of the batch is used.
    folds : int in 2..20, default 5
        Only with ``mode="cross"`` (listed in ``params`` only then).

    Notes
    -----
    *Ties.* Exactly equal scores pool, so p0 and p1 are functions of the score, as scikit-learn's
    isotonic regression is; a test score equal to a calibration score joins its pool (the
    brute-force definition: refit the batch plus (s, y) with ties pooled). The package
    ``venn-abers`` gives the same numbers on unweighted batches; its ``precision`` option
    rounds calibration scores first, which pools near-ties (here: only exact ties). Above
    the calibration range p1 = 1 and below it p0 = 0: a label-1 point beyond every other
    never violates monotonicity, so no merge pulls it down (likewise for 0 below).

    *Weights.* The test point has weight 1 after the batch's weights are rescaled to a mean
    of 1 over the points of positive weight. The papers' unweighted predictor is the case of
    unit weights; multiplying every weight by a constant changes nothing (as for isotonic
    regression itself), where a test weight of 1 in the caller's units would make the
    interval's width depend on the unit of the weights; and the test object counts as one
    typical calibration object. Weights are thus relative importances: weights of 2 on every
    row are unit weights, whereas repeating every row twice halves the test point's share.

    *Outputs.* Both p0 and p1 contain the test point, so p1 >= 1 / (W + 1) and
    p0 <= W / (W + 1), and the slope formula gives p1 - p0 >= 1 / (W + 1) (W the rescaled
    total weight): the merged p lies in [p0, p1] and never equals 0 or 1.

    *CVAP interval.* :meth:`predict_interval` answers [min over folds of p0, max over folds of
    p1]: it holds every fold's own IVAP pair (each with its validity guarantee), and it always
    contains the merged p. The pair whose merge gives p, (1 - GM(1 - p0), GM(p1)), is not an
    interval when folds disagree: folds (0.00, 0.01) and (0.98, 0.99) give (0.86, 0.10).

    *State.* The state is the step table that predict reads
    (:class:`~app.calibration.methods._venn_abers_table.StepTable`), four lists of floats:
    ``{"edges": [...], "p": [...], "p0": [...], "p1": [...]}``, where ``p[i]``, ``p0[i]`` and
    ``p1[i]`` hold for the scores with exactly i edges <= s (one more value than edges): the
    IVAP's own p0 and p1, or in cross mode the fold envelope and the merged p, plus
    ``"folds"``, the number of IVAPs merged (below the ``folds`` parameter when a class is
    rare, 1 when nothing could be crossed). Only the scores where a value changes are edges, so
    the state stays small: a sigmoid batch of 10^5 distinct scores gives 6327 edges and a
    0.46 MB artifact (``orjson.dumps``; 22422 edges and 1.6 MB at 10^6; 5-fold CVAP at 10^5:
    12315 edges, 0.92 MB). Storing each IVAP's p0 and p1 on every cell of its k distinct
    scores instead (five lists of about k numbers, per fold in cross mode) took 9.6 MB, 97 MB
    and 38 MB, all shown by the API, and reading the 10^6 one back took 0.6 s (now 6 ms). The
    per-fold pairs are not kept: the envelope and the merged p are all that predict answers.

    Attributes
    ----------
    table : StepTable
        p, p0 (``table.low``) and p1 (``table.high``) as step functions of the score.
    folds_used : int
        The number of IVAPs merged into ``table``: 1 in inductive mode, the folds actually
        used in cross mode.
    """

    method: ClassVar[str] = "venn_abers"
    capabilities: ClassVar[Capabilities] = Capabilities(intervals=True)

    def __init__(self, mode: str = "inductive", folds: int = 5) -> None:
        self.mode = mode
        self.folds = folds
        self.folds_used = 0
        self.table = StepTable(np.zeros(0), np.full(1, 0.5), np.zeros(1), np.ones(1))

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> Self:
        """Validate ``params``; :class:`ParamError` names a bad or unknown key."""
        check_param_keys(cls.method, params, ("mode", "folds"))
        mode = choice_param(params, "mode", MODES, "inductive")
        if mode != "cross" and "folds" in params:
            raise ParamError("folds", 'only used with mode "cross"')
        return cls(mode, int_param(params, "folds", 2, 20, 5))

    @property
    def params(self) -> dict[str, JSONValue]:
        """Every parameter with its effective value."""
        return (
            {"mode": "cross", "folds": self.folds} if self.mode == "cross" else {"mode": self.mode}
        )

    def fit(self, scores: FloatArray, labels: FloatArray, sample_weight: FloatArray) -> Self:
        """Fit one IVAP, or one per fold in cross mode, and keep only their table."""
        positive = sample_weight > 0
        n_points = int(np.count_nonzero(positive))
        if self.mode == "inductive" or n_points < 2:
            ivaps = [venn_abers_cells(scores, labels, sample_weight)]
        else:
            k = min(effective_folds(labels[positive], self.folds), n_points)
            fold = stratified_folds(labels, k, seed=0, sample_weight=sample_weight)
            ivaps = [
                venn_abers_cells(scores[rest], labels[rest], sample_weight[rest])
                for rest in (fold != f for f in range(k))
            ]
        # the per-fold cells (5 floats per distinct score and fold) go when this returns
        self.table, self.folds_used = StepTable.merge(ivaps), len(ivaps)
        return self

    def predict(self, scores: FloatArray) -> FloatArray:
        """The merged probability p in (0, 1) at each score."""
        table = self.table
        merged: FloatArray = table.p[table.step(scores)]
        return merged

    def predict_interval(self, scores: FloatArray) -> tuple[FloatArray, FloatArray]:
        """(p0, p1) at each score: the IVAP pair, or the fold envelope in cross mode."""
        table = self.table
        step = table.step(scores)
        return table.low[step], table.high[step]

    def state(self) -> dict[str, JSONValue]:
        """The table's ``edges``, ``p``, ``p0`` and ``p1``, plus ``folds`` in cross mode."""
        table = self.table
        state: dict[str, JSONValue] = {
            "edges": table.edges.tolist(),
            "p": table.p.tolist(),
            "p0": table.low.tolist(),
            "p1": table.high.tolist(),
        }
        if self.mode == "cross":
            state["folds"] = self.folds_used
        return state

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild a fitted calibrator; :class:`StateError` names the first key that is wrong."""
        calibrator = cls.from_params(params)
        if calibrator.mode == "cross":
            check_state_keys(state, (*_TABLE_KEYS, "folds"))
            k = calibrator.folds
            folds = state["folds"]
            if isinstance(folds, bool) or not isinstance(folds, int) or not 1 <= folds <= k:
                raise StateError(f"state.folds: must be an integer in 1..{k}, not {folds!r}")
            calibrator.folds_used = folds
        else:
            if isinstance(state, Mapping) and "folds" in state:
                raise StateError('state.folds: only stored with mode "cross"')
            check_state_keys(state, _TABLE_KEYS)
            calibrator.folds_used = 1
        calibrator.table = _table_from_state(state)
        return calibrator


def _table_from_state(state: Mapping[str, object]) -> StepTable:
    """The :class:`StepTable` of a state; :class:`StateError` names the key that breaks a rule.

    Every table a fit produces passes: edges strictly increasing, one more value than edges
    in each of p0, p, p1, each non-decreasing in the score, 0 <= p0 <= p <= p1 <= 1 with
    0 < p < 1 and p0 < p1 on every step (for an IVAP p1 - p0 >= 1 / (W + 1); a CVAP's envelope
    holds some fold's pair). The edges may be none: one step, when p0 = 0 below the
    calibration range and p1 = 1 above it leave no finite score (the batch at the largest
    float, all labelled 0).
    """
    if not isinstance(state["edges"], list):
        raise StateError("state.edges: must be a list of numbers")
    edges = state_floats(state, "edges") if state["edges"] else np.zeros(0)
    p, p0, p1 = (state_floats(state, key) for key in _TABLE_KEYS[1:])
    for key, values in (("p", p), ("p0", p0), ("p1", p1)):
        if values.size != edges.size + 1:
            raise StateError(
                f"state.{key}: has {values.size} values for {edges.size} edges; "
                f"need {edges.size + 1}"
            )
    if np.any(edges[1:] <= edges[:-1]):  # not np.diff: 1e308 - -1e308 overflows
        raise StateError("state.edges: must be strictly increasing")
    for key, values in (("p0", p0), ("p", p), ("p1", p1)):
        if np.any(values[1:] < values[:-1]):
            raise StateError(f"state.{key}: must be non-decreasing in the score")
    for key, values in (("p0", p0), ("p1", p1)):
        if np.any((values < 0) | (values > 1)):
            raise StateError(f"state.{key}: must be within [0, 1]")
    if np.any((p <= 0) | (p >= 1)):
        raise StateError("state.p: must be strictly between 0 and 1")
    if np.any((p < p0) | (p > p1)):
        raise StateError("state.p: must lie within [p0, p1] on every step")
    if np.any(p0 >= p1):
        raise StateError("state.p0: must be below p1 on every step")
    return StepTable(edges, p, p0, p1)
