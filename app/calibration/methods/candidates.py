"""``auto``'s candidates: the catalogue, the default set, the parameters, and eligibility.

Which candidates ``auto`` tries is a measured choice (``make bench-quality``); every number
behind it is in the docstrings below. The selection itself is
:mod:`app.calibration.methods.selection`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from app.calibration.base import FloatArray, JSONValue, ParamError, check_param_keys, int_param
from app.calibration.kernels.pooling import count_distinct
from app.calibration.measures.multiclass_metrics import is_probability_matrix
from app.calibration.methods.registry import CAPABILITIES


@dataclass(frozen=True)
class Candidate:
    """One entry of ``auto``'s catalogue: a label for the record, a method and its params.

    ``max_distinct`` and ``fallback``: past that many distinct scores (rows x columns for a
    matrix), the default set tries the candidate labelled ``fallback`` instead.
    """

    label: str
    method: str
    params: Mapping[str, JSONValue]
    max_distinct: int | None = None
    fallback: str | None = None


VENN_ABERS_MAX_DISTINCT = 50_000
"""Above this many distinct scores (rows x columns, for a matrix) the default set swaps
venn_abers for bounded isotonic: its exact fit is a sequential sweep (1.3-1.75 us per distinct
score, 50-70x an isotonic fit), and there the two differ by less than 2e-4 nats of test log loss
(measured on naive-Bayes-like scores: -0.0009 at 10^4 points, -0.0003 at 3 x 10^4, -0.0001 at
10^5)."""
_LAPLACE: Mapping[str, JSONValue] = MappingProxyType({"bound": "laplace"})
CATALOGUE: tuple[Candidate, ...] = (
    Candidate("temperature", "temperature", _LAPLACE),
    Candidate("bostrom", "bostrom", _LAPLACE),
    Candidate("platt", "platt", _LAPLACE),
    Candidate("beta", "beta", _LAPLACE),
    Candidate("histogram_binning", "histogram_binning", _LAPLACE),
    Candidate("venn_abers", "venn_abers", {}, VENN_ABERS_MAX_DISTINCT, fallback="isotonic"),
    Candidate("isotonic", "isotonic", _LAPLACE),
    Candidate("venn_abers_cross", "venn_abers", {"mode": "cross"}),
    Candidate("platt_trim_cv", "platt", {"trim": "cv", **_LAPLACE}),
    Candidate("isotonic_trim_trainset", "isotonic", {"trim": "trainset", **_LAPLACE}),
)
"""Every candidate ``auto`` knows, simplest first: a near-tie goes to the earlier one. The
order is by fitted freedom: temperature (one number), bostrom (two), platt (two per class),
beta (three), histogram binning (ten bins), then the isotonic family, Venn-ABERS before plain
isotonic because it hedges its ends. Venn-ABERS never answers 0 or 1 by construction; every
other candidate has the Laplace bound."""
DEFAULT_CANDIDATES: tuple[str, ...] = ("temperature", "bostrom", "platt", "beta", "venn_abers")
"""The candidates tried unless ``params.candidates`` names others. Chosen on real data
(``make bench-quality``: 12 data sets x 6 model families x 5 seeds, calibration sets of
142-1000 rows): with platt, beta and venn_abers, ``auto``'s mean test log loss is 0.2864
with a plain minimum (0.2865 with the half-standard-error rule of :data:`TIE_SE`) and no
case is worse than Platt's by more than 0.010 nats. Adding bounded isotonic or
histogram binning makes it worse (0.2873 and 0.2880, and 6 and 9 cases more than 0.02 nats
worse than Platt): on a few hundred points they win the cross-validation by luck, where
Venn-ABERS, an isotonic fit that hedges over the test point's label, does not. Cross
Venn-ABERS gained 0.0001 for five times the fit; the trimmed variants cost 10-100x and never
won. k-class batches use the same methods one-vs-rest, beside temperature and bostrom."""
_BY_LABEL = {candidate.label: candidate for candidate in CATALOGUE}


@dataclass(frozen=True)
class AutoSpec:
    """The validated parameters of ``auto``."""

    cv: int = 5
    candidates: tuple[str, ...] = DEFAULT_CANDIDATES
    explicit: bool = False
    """Whether ``params.candidates`` named the candidates (then every skip is recorded)."""

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> AutoSpec:
        """``cv``: folds, 2..20 (default 5); ``candidates``: labels of :data:`CATALOGUE`."""
        check_param_keys("auto", params, ("cv", "candidates"))
        cv = int_param(params, "cv", 2, 20, 5)
        explicit = "candidates" in params
        labels = params.get("candidates", list(DEFAULT_CANDIDATES))
        if not isinstance(labels, list) or not labels:
            raise ParamError("candidates", "must be a non-empty list of candidate names")
        for index, label in enumerate(labels):
            if not isinstance(label, str) or label not in _BY_LABEL:
                known = ", ".join(_BY_LABEL)
                raise ParamError("candidates", f"unknown {label!r}; expected {known}", index=index)
        return cls(cv, tuple(dict.fromkeys(labels)), explicit)

    @property
    def params(self) -> dict[str, JSONValue]:
        """Every parameter with its effective value."""
        return {"cv": self.cv, "candidates": list(self.candidates)}


def eligible_candidates(
    spec: AutoSpec, scores: FloatArray
) -> tuple[tuple[Candidate, ...], dict[str, str]]:
    """The candidates of ``spec`` that can take this batch, in catalogue order, and why each
    other one was skipped: it needs probabilities (scores strictly inside (0, 1) for a binary
    method, also one-vs-rest; probability rows for a k-class one) and the batch holds none, or
    it fits no vector (no matrix) of scores, which is recorded only for a candidate named in
    ``params.candidates``: the default set holds both kinds."""
    matrix = scores.ndim == 2
    in_open_interval = bool(np.all((scores > 0.0) & (scores < 1.0)))
    labels = spec.candidates
    skipped = {}
    for label in labels if not spec.explicit else ():
        limit, fallback = _BY_LABEL[label].max_distinct, _BY_LABEL[label].fallback
        if limit is None or fallback is None:
            continue
        distinct = scores.size if matrix else count_distinct(np.sort(scores))
        if distinct > limit:
            labels = tuple(fallback if name == label else name for name in labels)
            skipped[label] = f"{distinct} distinct scores, over {limit}: {fallback} instead"
    chosen = []
    for candidate in CATALOGUE:
        if candidate.label not in labels:
            continue
        can = CAPABILITIES[candidate.method]
        if (can.matrix == "none") if matrix else not can.vector:
            if spec.explicit:
                skipped[candidate.label] = f"fits no {'matrix' if matrix else 'vector'} of scores"
        elif can.probabilities and not (
            is_probability_matrix(scores) if can.matrix == "native" else in_open_interval
        ):
            skipped[candidate.label] = "needs probabilities"
        else:
            chosen.append(candidate)
    return tuple(chosen), skipped
