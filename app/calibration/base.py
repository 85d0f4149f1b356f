"""The one protocol every calibration method implements, and the errors it raises.

A calibrator is built from validated parameters (:meth:`Calibrator.from_params`), fitted on a
binary batch, and then maps raw scores to probabilities. What it learned is exposed as a
JSON-able *state* of plain numbers (floats, ints, strings and lists of floats); the store
persists that state, never a Python object, and :meth:`Calibrator.from_state` rebuilds an
equivalent calibrator from it without executing any stored code (see :mod:`app.store.artifacts`).

A batch is checked once, by :mod:`~app.calibration.kernels.checks`, before any method sees it, and
its weights are read as relative weights (:mod:`~app.calibration.kernels.weights`). Nothing in
:mod:`app.calibration` imports FastAPI, pydantic or SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, Self, TypeAlias

import numpy as np
from numpy.typing import NDArray

FloatArray: TypeAlias = NDArray[np.float64]
"""A 1-d float64 array: scores, labels (as 0.0/1.0), weights or probabilities."""

JSONValue: TypeAlias = Any
"""A value that orjson can write and read back unchanged (numbers, strings, lists, dicts)."""


class CalibrationError(ValueError):
    """A batch or parameter set that a method cannot work with.

    Raised as ``CalibrationError("must be 0 or 1", loc=("labels", 3))``: ``loc`` is where the
    problem is, as field names and indices (empty when it names no field), and ``reason`` what
    is wrong there, so the API can say where without parsing messages. The message reads
    ``labels[3]: must be 0 or 1``, or ``reason`` alone when ``loc`` is empty.
    """

    def __init__(self, reason: str, *, loc: tuple[str | int, ...] = ()) -> None:
        super().__init__(f"{_render_loc(loc)}: {reason}" if loc else reason)
        self.loc = loc
        self.reason = reason


def _render_loc(loc: tuple[str | int, ...]) -> str:
    """A location as the messages name it: ``("params", "targets")`` → ``params.targets``,
    ``("scores", 3)`` → ``scores[3]``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


class ParamError(CalibrationError):
    """An unknown parameter or a parameter with an invalid value.

    ``field`` is the parameter's name, so the API can answer ``params.targets: ...``; ``index``
    locates an element of a list parameter (``params.candidates[1]``).
    """

    def __init__(self, field: str, message: str, *, index: int | None = None) -> None:
        where = ("params", field) if index is None else ("params", field, index)
        super().__init__(message, loc=where)
        self.field = field


class StateError(CalibrationError):
    """A stored state that does not describe a valid fitted calibrator of this method."""


@dataclass(frozen=True)
class Capabilities:
    """What a method accepts, declared once on its class; the catalogues derive from these.

    Attributes
    ----------
    vector : bool
        Fits a binary batch: one score per row, labels 0/1.
    matrix : {"native", "one_vs_rest", "none"}
        How it fits a k-class batch (an n x k score matrix): by itself, one class against the
        rest with the rows renormalised, or not at all.
    probabilities : bool
        Its scores must be probabilities: strictly inside (0, 1) for a binary method (also
        one-vs-rest), rows of a probability matrix for a k-class one.
    intervals : bool
        It also answers a probability interval per score (``predict_interval``).
    bound : bool
        It takes the ``bound`` parameter (:mod:`app.calibration.kernels.bounds`).
    """

    vector: bool = True
    matrix: Literal["native", "one_vs_rest", "none"] = "one_vs_rest"
    probabilities: bool = False
    intervals: bool = False
    bound: bool = False

    def __post_init__(self) -> None:
        if self.vector == (self.matrix == "native"):
            raise ValueError(
                "a method fits vectors (and maybe matrices one-vs-rest or not at "
                "all), or matrices natively and no vectors"
            )


class Calibrator(Protocol):
    """A calibration method: ``from_params`` → ``fit`` → ``predict``; ``state``/``from_state``.

    ``fit`` receives validated arrays of equal length n >= 1: finite ``scores``; ``labels``
    as float64 0.0/1.0; non-negative ``sample_weight`` with a positive sum, of any finite size
    (weights are relative: see :func:`~app.calibration.kernels.weights.relative_weights`). A
    training fold may hold a single class (cross-validation on small batches); a method must still
    fit.
    """

    method: ClassVar[str]
    capabilities: ClassVar[Capabilities]

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> Self:
        """Validate ``params`` (raising :class:`ParamError` for an unknown key or bad value)."""
        ...

    @property
    def params(self) -> dict[str, JSONValue]:
        """Every parameter with its effective value, defaults included."""
        ...

    def fit(self, scores: FloatArray, labels: FloatArray, sample_weight: FloatArray) -> Self:
        """Fit on the batch and return ``self``."""
        ...

    def predict(self, scores: FloatArray) -> FloatArray:
        """Calibrated probabilities in [0, 1], one per score, in input order."""
        ...

    def state(self) -> dict[str, JSONValue]:
        """The fitted numbers, as JSON-able values; readable (shown as ``fitted`` by the API)."""
        ...

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild a fitted calibrator; :class:`StateError` if ``state`` is not valid."""
        ...


class IntervalCalibrator(Protocol):
    """A calibrator whose capabilities declare ``intervals``: p0 and p1 per score (per class)."""

    def predict_interval(self, scores: FloatArray) -> tuple[FloatArray, FloatArray]:
        """The lower and upper probability of each score (n, or n x k), p0 <= p1."""
        ...


# --- validation of params and states shared by every method ----------------------------------


def check_param_keys(method: str, params: Mapping[str, object], allowed: tuple[str, ...]) -> None:
    """Reject any key of ``params`` that is not in ``allowed`` with a :class:`ParamError`."""
    for key in params:
        if key not in allowed:
            expected = (
                f"expected one of {', '.join(allowed)}"
                if allowed
                else f"{method} takes no parameters"
            )
            raise ParamError(str(key), f"unknown parameter; {expected}")


def choice_param(
    params: Mapping[str, object], key: str, choices: tuple[str, ...], default: str
) -> str:
    """``params[key]`` (or ``default``), which must be one of the strings ``choices``."""
    value = params.get(key, default)
    if not isinstance(value, str) or value not in choices:
        raise ParamError(key, f"must be one of {', '.join(choices)}, not {value!r}")
    return value


def int_param(params: Mapping[str, object], key: str, low: int, high: int, default: int) -> int:
    """``params[key]`` (or ``default``), which must be an integer in ``low..high``."""
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ParamError(key, f"must be an integer in {low}..{high}, not {value!r}")
    return value


def check_state_keys(state: Mapping[str, object], expected: tuple[str, ...]) -> None:
    """A :class:`StateError` unless ``state`` is a mapping with exactly the keys ``expected``."""
    if not isinstance(state, Mapping):
        raise StateError(f"state: must be an object, not {type(state).__name__}")
    if set(state) != set(expected):
        keys = ", ".join(sorted(map(str, state))) or "none"
        raise StateError(f"state: expected the keys {', '.join(expected) or 'none'}; got {keys}")


def state_float(state: Mapping[str, object], key: str) -> float:
    """``state[key]`` as a finite float (a JSON number, not a boolean)."""
    value = state[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise StateError(f"state.{key}: must be a finite number, not {value!r}")
    return float(value)


def state_int(state: Mapping[str, object], key: str) -> int:
    """``state[key]`` as a non-negative integer."""
    value = state[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StateError(f"state.{key}: must be a non-negative integer, not {value!r}")
    return value


def state_floats(state: Mapping[str, object], key: str) -> FloatArray:
    """``state[key]`` as a non-empty 1-d array of finite floats."""
    value = state[key]
    if not isinstance(value, list) or not value:
        raise StateError(f"state.{key}: must be a non-empty list of numbers")
    if not set(map(type, value)) <= {int, float}:  # type() is exact: rejects bool and str
        raise StateError(f"state.{key}: must hold numbers only")
    array = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise StateError(f"state.{key}: must hold finite numbers only")
    return array


class WithoutParams:
    """For methods that take no parameters: ``{}`` is the only valid params mapping."""

    method: ClassVar[str]

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> Self:
        """Accept only ``{}``; any key is a :class:`ParamError`."""
        check_param_keys(cls.method, params, ())
        return cls()

    @property
    def params(self) -> dict[str, JSONValue]:
        """No parameters: ``{}``."""
        return {}
