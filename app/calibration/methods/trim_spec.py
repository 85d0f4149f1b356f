"""What trimmed calibration is asked to do, and what a trimmed fit stores.

:class:`TrimSpec` reads the ``trim*`` parameters that ``platt`` and ``isotonic`` share;
:func:`trim_state` and :func:`read_trim_state` write and read the ``"trim"`` record of a fitted
state (:meth:`~app.calibration.methods.trimming.TrimResult.record`). The trimming itself, Rüping's
choice of tau and the kept points, is :mod:`~app.calibration.methods.trimming`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from app.calibration.base import (
    FloatArray,
    JSONValue,
    ParamError,
    StateError,
    check_state_keys,
    choice_param,
    int_param,
    state_float,
    state_floats,
)

TRIM_MODES = ("none", "trainset", "cv")
TRIM_LOSSES = ("brier", "log_loss")
TRIM_KEYS = ("trim", "trim_tau_min", "trim_grid", "trim_center", "trim_loss", "trim_folds")
TRIM_STATE_KEYS = ("tau", "center", "radius", "grid_losses")


@dataclass(frozen=True)
class TrimSpec:
    """The trimming parameters shared by ``platt`` and ``isotonic``.

    Parameters
    ----------
    mode : {"none", "trainset", "cv"}, default "none"
        How tau is chosen: Rüping's trainset-trimmed or CV-trimmed calibration; ``"none"`` fits
        the plain method (the paper found CV best for Platt, trainset best for isotonic).
    tau_min : float in (0, 1], default 0.9
        The smallest kept fraction tried (the paper's value, *Robust Probabilistic
        Calibration* section 3.1); the grid is ``linspace(tau_min, 1, grid)``, just [1] at 1.
    grid : int in 11..101, default 11
        Number of tau values tried.
    center : float or None, default None
        The centre c of |f - c|. ``None``: 0.5 when every (positively weighted) score lies in
        [0, 1], i.e. probabilities, otherwise 0, i.e. margins.
    loss : {"brier", "log_loss"}, default "brier"
        The criterion for tau. The squared loss by default: it is bounded by 1 while the
        cross-entropy is infinite for a confident wrong prediction, which is exactly what the
        trimmed-away outliers receive, so a handful of them would dominate the criterion; and
        in the paper's Table 2 CV-trimmed Platt wins more clearly on MSE than on cross-entropy.
    folds : int in 2..20, default 10
        Folds of the ``"cv"`` criterion (the paper's 10), reduced by
        :func:`~app.calibration.kernels.crossval.effective_folds` for a rare class.
    """

    mode: str = "none"
    tau_min: float = 0.9
    grid: int = 11
    center: float | None = None
    loss: str = "brier"
    folds: int = 10

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> TrimSpec:
        """Read the ``trim*`` keys of ``params``; :class:`ParamError` names a bad value."""
        mode = choice_param(params, "trim", TRIM_MODES, "none")
        tau_min = _number_param(params, "trim_tau_min", 0.9)
        if tau_min is None or not 0.0 < tau_min <= 1.0:
            raise ParamError(
                "trim_tau_min", f"must be a number in (0, 1], not {params['trim_tau_min']!r}"
            )
        return cls(
            mode=mode,
            tau_min=tau_min,
            grid=int_param(params, "trim_grid", 11, 101, 11),
            center=_number_param(params, "trim_center", None),
            loss=choice_param(params, "trim_loss", TRIM_LOSSES, "brier"),
            folds=int_param(params, "trim_folds", 2, 20, 10),
        )

    @property
    def params(self) -> dict[str, JSONValue]:
        """The ``trim*`` parameters with their effective values; ``{}`` when ``mode="none"``.

        Untrimmed calibrators list no trim keys, so their params read exactly as before.
        """
        if self.mode == "none":
            return {}
        return {
            "trim": self.mode,
            "trim_tau_min": self.tau_min,
            "trim_grid": self.grid,
            "trim_center": self.center,
            "trim_loss": self.loss,
            "trim_folds": self.folds,
        }

    def taus(self) -> FloatArray:
        """The kept fractions tried, increasing: ``linspace(tau_min, 1, grid)``, [1] at 1."""
        if self.tau_min >= 1.0:
            return np.ones(1)
        return np.linspace(self.tau_min, 1.0, self.grid)


def trim_record_from_state(value: object) -> dict[str, JSONValue]:
    """Validate a stored ``"trim"`` record; :class:`StateError` names the bad field."""
    if not isinstance(value, Mapping):
        raise StateError(f"state.trim: must be an object, not {type(value).__name__}")
    check_state_keys(value, TRIM_STATE_KEYS)
    tau, radius = state_float(value, "tau"), state_float(value, "radius")
    if not 0.0 < tau <= 1.0 or radius < 0.0:
        raise StateError("state.trim: tau must be in (0, 1] and radius >= 0")
    return {
        "tau": tau,
        "center": state_float(value, "center"),
        "radius": radius,
        "grid_losses": state_floats(value, "grid_losses").tolist(),
    }


def trim_state(record: dict[str, JSONValue] | None) -> dict[str, JSONValue]:
    """``{"trim": record}`` to add to a fitted state, ``{}`` for an untrimmed fit."""
    return {} if record is None else {"trim": record}


def read_trim_state(
    state: Mapping[str, object],
) -> tuple[tuple[str, ...], dict[str, JSONValue] | None]:
    """The extra state key (``("trim",)`` or ``()``) and the validated record, if any.

    States without ``"trim"`` (plain fits, artifacts stored before trimming) read as before.
    """
    if not isinstance(state, Mapping) or "trim" not in state:
        return (), None
    return ("trim",), trim_record_from_state(state["trim"])


def _number_param(params: Mapping[str, object], key: str, default: float | None) -> float | None:
    """``params[key]`` (or ``default``): a finite number or ``None``; else :class:`ParamError`."""
    value = params.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ParamError(key, f"must be a finite number, not {value!r}")
    return float(value)
