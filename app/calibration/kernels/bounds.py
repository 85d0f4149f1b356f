"""Bounded outputs: no probability of exactly 0 or 1 from a finite batch.

A calibrated probability of 0 or 1 claims a certainty that n labelled points cannot support,
and log loss charges one wrong such claim -log(1e-15) = 34.5 nats. On small batches isotonic
regression and histogram binning produce exactly that at their ends (a block or bin that
happens to hold one class), and a sigmoid saturates to 1.0 in float64 past |z| ~ 37.
Measured on real classifiers (``make bench-quality``), those zeros and ones made ``auto`` worse
than always using Platt scaling.

The bound is Laplace's rule of succession applied to the whole batch: after n draws of which
none was positive, the probability of a positive is estimated at 1 / (n + 2), so no output is
allowed below 1 / (n + 2) nor above (n + 1) / (n + 2) (for k classes: each probability is
raised to at least 1 / (n + k) and the row renormalised, so none ends below 1 / (n + 2k)).
n is the batch's effective size, Kish's (sum w)^2 / sum w^2, which is the number of points
for an unweighted batch and does not change when every weight is multiplied by a constant.
The bound only clips: a probability already inside the interval is returned unchanged, so
a bounded calibrator agrees with the unbounded one wherever that one is not extreme.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Self

import numpy as np

from app.calibration.base import (
    FloatArray,
    JSONValue,
    StateError,
    check_param_keys,
    choice_param,
    state_floats,
)
from app.calibration.kernels.weights import relative_weights

BOUND_RULES = ("none", "laplace")
BOUND_KEY = "bound"


@dataclass(frozen=True)
class OutputBound:
    """The ``bound`` parameter and, once fitted, the interval it imposes on the outputs.

    Parameters
    ----------
    rule : {"none", "laplace"}
        ``"none"``: outputs as the method computes them. ``"laplace"``: clipped into
        [1 / (n + 2), (n + 1) / (n + 2)] for binary calibrators; for k classes each probability
        below 1 / (n + k) is raised to it and the row renormalised, so that none ends below
        1 / (n + 2k) (the raise adds less than k / (n + k) to the row). n is the effective size
        of the fitting batch (:func:`effective_size`).
    low, high : float
        The fitted interval; [0, 1] until :meth:`fitted` (and always for ``"none"``).
    """

    rule: str = "none"
    low: float = 0.0
    high: float = 1.0

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> OutputBound:
        """Read ``params["bound"]`` (default ``"none"``); :class:`ParamError` if unknown."""
        return cls(choice_param(params, BOUND_KEY, BOUND_RULES, "none"))

    @property
    def params(self) -> dict[str, JSONValue]:
        """``{"bound": rule}``, or ``{}`` for ``"none"`` (so unbounded params read as before)."""
        return {} if self.rule == "none" else {BOUND_KEY: self.rule}

    def fitted(self, sample_weight: FloatArray, n_classes: int = 2) -> OutputBound:
        """The bound for a batch with these weights: Laplace's interval, or [0, 1] for none."""
        if self.rule == "none":
            return self
        n = effective_size(sample_weight)
        return OutputBound(self.rule, 1.0 / (n + n_classes), (n + 1.0) / (n + 2.0))

    def apply(self, p: FloatArray) -> FloatArray:
        """Clip binary probabilities into [low, high], or rows (n x k) below at low, renormalised.

        Works in place on ``p`` (a fresh array from ``predict``) and returns it.
        """
        if self.rule == "none":
            return p
        if p.ndim == 1:
            return np.clip(p, self.low, self.high, out=p)
        np.maximum(p, self.low, out=p)
        p /= p.sum(axis=1, keepdims=True)
        return p

    def state(self) -> dict[str, JSONValue]:
        """``{"bound": [low, high]}`` when bounded, else ``{}``: what a version records."""
        return {} if self.rule == "none" else {BOUND_KEY: [self.low, self.high]}

    def read_state(self, state: Mapping[str, object]) -> tuple[tuple[str, ...], OutputBound]:
        """The state keys this bound adds and the fitted bound read from ``state``.

        :class:`StateError` when a bounded calibrator's state lacks a valid ``bound`` or an
        unbounded one has one.
        """
        if self.rule == "none":
            if BOUND_KEY in state:
                raise StateError("state.bound: present, but params.bound is 'none'")
            return (), self
        if BOUND_KEY not in state:
            raise StateError("state.bound: missing; params.bound is not 'none'")
        interval = state_floats(state, BOUND_KEY)
        if interval.size != 2 or not 0.0 < interval[0] <= 0.5 <= interval[1] < 1.0:
            raise StateError("state.bound: must be [low, high] with 0 < low <= 0.5 <= high < 1")
        return (BOUND_KEY,), OutputBound(self.rule, float(interval[0]), float(interval[1]))


class BoundOnly:
    """For methods whose one parameter is ``bound``: params ``{}`` or ``{"bound": rule}``."""

    method: ClassVar[str]

    def __init__(self, bound: OutputBound | None = None) -> None:
        self.bound = OutputBound() if bound is None else bound

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> Self:
        """Validate ``params``: only ``bound``; :class:`ParamError` names a bad or unknown key."""
        check_param_keys(cls.method, params, (BOUND_KEY,))
        return cls(OutputBound.from_params(params))

    @property
    def params(self) -> dict[str, JSONValue]:
        """``{"bound": ...}`` when bounded, else ``{}``."""
        return self.bound.params


def effective_size(sample_weight: FloatArray) -> float:
    """Kish's effective sample size (sum w)^2 / sum w^2: n for equal weights, scale-free.

    Computed on :func:`~app.calibration.kernels.weights.relative_weights` (the largest in [0.5, 1)),
    so the squares neither underflow nor overflow, whatever the weights' size; unit weights (any
    power of two) give n exactly, other equal weights n to rounding.
    """
    w, _ = relative_weights(sample_weight)
    total = float(w.sum())
    return total * total / float(np.dot(w, w))
