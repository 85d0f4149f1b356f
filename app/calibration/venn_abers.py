"""Venn-ABERS predictors: two isotonic fits per score, a probability interval, and a merged p.

Vovk & Petej, *Venn-Abers predictors* (UAI 2014): for a test score s, p0 is the isotonic
regression of the calibration batch plus (s, 0), read at s, and p1 the same with (s, 1). One of
the two is perfectly calibrated in the Venn sense, whichever label s turns out to have; the
pair is the prediction and its distance measures how much the batch leaves undecided. Vovk,
Petej & Fedorova, *Large-scale probabilistic predictors with and without guarantees of
validity* (NeurIPS 2015): the inductive predictor (IVAP) computes both for every s at once from
the cumulative sum diagram (section 2; :mod:`app.calibration._venn_abers_kernel`); the cross
predictor (CVAP, section 3) fits one IVAP per fold; the single probability for log loss is
p = p1 / (1 - p0 + p1), and for CVAP p = GM(p1) / (GM(1 - p0) + GM(p1)) over the folds
(section 4). Section numbers are those of the paper's arXiv version, 1511.00213.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Self

import numpy as np

from app.calibration._venn_abers_kernel import StepTable, venn_abers_cells
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
from app.calibration.crossval import effective_folds, stratified_folds

MODES = ("inductive", "cross")
_FIT_KEYS = ("thresholds", "p0_at", "p1_at", "p0_between", "p1_between")


@dataclass(frozen=True)
class VennAbersFit:
    """One IVAP: the k distinct calibration scores and p0, p1 on the 2k + 1 cells.

    Cell 2j is the open interval below ``thresholds[j]`` (above ``thresholds[j - 1]``), cell
    2j + 1 is ``thresholds[j]`` itself and cell 2k lies above the last threshold. Both
    sequences are non-decreasing, with 0 <= p0 < p1 <= 1 on every cell.
    """

    thresholds: FloatArray
    p0: FloatArray
    p1: FloatArray

    def state(self) -> dict[str, JSONValue]:
        """The five lists of the state: thresholds, then p0, p1 at and between them."""
        return {
            "thresholds": self.thresholds.tolist(),
            "p0_at": self.p0[1::2].tolist(),
            "p1_at": self.p1[1::2].tolist(),
            "p0_between": self.p0[0::2].tolist(),
            "p1_between": self.p1[0::2].tolist(),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, object]) -> VennAbersFit:
        """Read :meth:`state` back; :class:`StateError` names the first inconsistency."""
        check_state_keys(state, _FIT_KEYS)
        thresholds = state_floats(state, "thresholds")
        k = thresholds.size
        cells = []
        for label in ("p0", "p1"):
            at, between = (
                state_floats(state, f"{label}_at"),
                state_floats(state, f"{label}_between"),
            )
            if at.size != k or between.size != k + 1:
                raise StateError(
                    f"state.{label}_at, state.{label}_between: need {k} and {k + 1} values for "
                    f"{k} thresholds, not {at.size} and {between.size}"
                )
            values = np.empty(2 * k + 1)
            values[1::2], values[0::2] = at, between
            if np.any(values[1:] < values[:-1]) or values[0] < 0 or values[-1] > 1:
                raise StateError(
                    f"state.{label}_at, state.{label}_between: must be non-decreasing in the "
                    "score, within [0, 1]"
                )
            cells.append(values)
        if np.any(thresholds[1:] <= thresholds[:-1]):
            raise StateError("state.thresholds: must be strictly increasing")
        if np.any(cells[0] >= cells[1]):
            raise StateError("state.p0_at, state.p0_between: must be below p1 at every score")
        return cls(thresholds, cells[0], cells[1])


def fit_ivap(scores: FloatArray, labels: FloatArray, sample_weight: FloatArray) -> VennAbersFit:
    """The inductive Venn-ABERS predictor of a batch (see :func:`venn_abers_cells`)."""
    return VennAbersFit(*venn_abers_cells(scores, labels, sample_weight))


class VennAbersCalibrator:
    """Venn-ABERS: p0 and p1 for each score, answered as p = p1 / (1 - p0 + p1).

    Parameters
    ----------
    mode : {"inductive", "cross"}, default "inductive"
        ``"inductive"`` (IVAP): one predictor on the whole batch. ``"cross"`` (CVAP): the
        batch is split into ``folds`` stratified folds
        (:func:`~app.calibration.crossval.stratified_folds`, seed 0) and one IVAP is fitted on
        each fold's complement. Fewer folds are used when a class has fewer points of positive
        weight than ``folds`` (:func:`~app.calibration.crossval.effective_folds`); with fewer
        than two such points there is nothing to cross and the one IVAP of the batch is used.
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

    Attributes
    ----------
    fits : list of VennAbersFit
        One IVAP (inductive) or one per fold (cross). The state is one fit's
        :meth:`VennAbersFit.state`, or ``{"folds": [...]}`` in cross mode.
    """

    method: ClassVar[str] = "venn_abers"
    capabilities: ClassVar[Capabilities] = Capabilities(intervals=True)

    def __init__(self, mode: str = "inductive", folds: int = 5) -> None:
        self.mode = mode
        self.folds = folds
        self.fits: list[VennAbersFit] = []
        self._table = StepTable(np.zeros(0), np.full(1, 0.5), np.zeros(1), np.ones(1))

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
        """Fit one IVAP, or one per fold in cross mode; return ``self``."""
        positive = sample_weight > 0
        n_points = int(np.count_nonzero(positive))
        if self.mode == "inductive" or n_points < 2:
            return self._set_fits([fit_ivap(scores, labels, sample_weight)])
        k = min(effective_folds(labels[positive], self.folds), n_points)
        fold = stratified_folds(labels, k, seed=0, sample_weight=sample_weight)
        return self._set_fits(
            [
                fit_ivap(scores[rest], labels[rest], sample_weight[rest])
                for rest in (fold != f for f in range(k))
            ]
        )

    def predict(self, scores: FloatArray) -> FloatArray:
        """The merged probability p in (0, 1) at each score."""
        table = self._table
        merged: FloatArray = table.p[table.step(scores)]
        return merged

    def predict_interval(self, scores: FloatArray) -> tuple[FloatArray, FloatArray]:
        """(p0, p1) at each score: the IVAP pair, or the fold envelope in cross mode."""
        table = self._table
        step = table.step(scores)
        return table.low[step], table.high[step]

    def state(self) -> dict[str, JSONValue]:
        """One fit's lists (inductive) or ``{"folds": [...]}`` (cross)."""
        if self.mode == "cross":
            return {"folds": [fit.state() for fit in self.fits]}
        return self.fits[0].state()

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild a fitted calibrator; :class:`StateError` unless every fit is consistent."""
        calibrator = cls.from_params(params)
        if calibrator.mode == "inductive":
            return calibrator._set_fits([VennAbersFit.from_state(state)])
        check_state_keys(state, ("folds",))
        folds = state["folds"]
        if not isinstance(folds, list) or not 1 <= len(folds) <= calibrator.folds:
            raise StateError(f"state.folds: must be a list of 1..{calibrator.folds} fits")
        fits = []
        for n, fold in enumerate(folds):
            try:
                fits.append(VennAbersFit.from_state(fold))
            except StateError as error:  # name the fold: state.folds[n].p0_at ...
                raise StateError(
                    re.sub(r"\bstate(?=[.:])", f"state.folds[{n}]", str(error))
                ) from None
        return calibrator._set_fits(fits)

    def _set_fits(self, fits: Sequence[VennAbersFit]) -> Self:
        """Keep ``fits`` and tabulate p and the interval as one step function of the score."""
        self.fits = list(fits)
        self._table = StepTable.merge([(fit.thresholds, fit.p0, fit.p1) for fit in fits])
        return self
