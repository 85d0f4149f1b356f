"""The one protocol every calibration method implements, and the errors it raises.

A calibrator is built from validated parameters (:meth:`Calibrator.from_params`), fitted on a
binary batch, and then maps raw scores to probabilities. What it learned is exposed as a
JSON-able *state* of plain numbers (floats, ints, strings and lists of floats); the store
persists that state, never a Python object, and :meth:`Calibrator.from_state` rebuilds an
equivalent calibrator from it without executing any stored code (see :mod:`app.store.artifacts`).

Nothing in :mod:`app.calibration` imports FastAPI, pydantic or SQLAlchemy.
"""

from __future__ import annotations

import math
import re
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

    Raised as ``CalibrationError("labels: must be 0 or 1 (index 3)")``: the text before the
    first ``": "`` names the field when it is one (``labels``, ``scores[3]``, ``n_bins``).
    ``loc`` is that field as a location (``("scores", 3)``; empty when none is named) and
    ``reason`` the rest, so the API can say where without parsing messages.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        head, separator, rest = message.partition(": ")
        match = _FIELD.fullmatch(head) if separator else None
        self.loc: tuple[str | int, ...] = () if match is None else _location(head)
        self.reason = message if match is None else rest


_FIELD = re.compile(r"[a-z_]+(?:\.[a-z_]+|\[[0-9]+\])*")
"""A field as the messages name it: ``labels``, ``params.targets``, ``scores[3]``."""


def _location(field: str) -> tuple[str | int, ...]:
    parts = re.findall(r"[a-z_]+|\[[0-9]+\]", field)
    return tuple(int(p[1:-1]) if p.startswith("[") else p for p in parts)


class ParamError(CalibrationError):
    """An unknown parameter or a parameter with an invalid value.

    ``field`` is the parameter's name, so the API can answer ``params.targets: ...``.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"params.{field}: {message}")
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
        It takes the ``bound`` parameter (:mod:`app.calibration.bounds`).
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
    (weights are relative: see :func:`relative_weights`). A training fold may hold a single
    class (cross-validation on small batches); a method must still fit.
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


# --- validation shared by every method -------------------------------------------------------


def check_batch(
    scores: object, labels: object, sample_weight: object = None, *, scores_field: str = "scores"
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Check a binary batch and return it as three 1-d float64 arrays (weights default to 1).

    Raises :class:`CalibrationError` naming the field: ``scores`` (or ``scores_field``) must be
    finite, ``labels`` 0/1, ``sample_weight`` finite, non-negative with a positive sum, and all
    three of one length n >= 1. The weights may be of any finite size, their sum too
    (see :func:`relative_weights`).
    """
    f = _float_vector(scores, scores_field)
    y = _float_vector(labels, "labels")
    if f.size == 0:
        raise CalibrationError(f"{scores_field}: the batch is empty")
    if y.size != f.size:
        raise CalibrationError(f"labels: has {y.size} values for {f.size} {scores_field}")
    if not np.all(np.isfinite(f)):
        raise CalibrationError(f"{scores_field}: must be finite (index {_first(~np.isfinite(f))})")
    bad = (y != 0.0) & (y != 1.0)
    if bad.any():
        raise CalibrationError(f"labels: must be 0 or 1 (index {_first(bad)})")
    if sample_weight is None:
        return f, y, np.ones_like(f)
    w = _float_vector(sample_weight, "sample_weight")
    if w.size != f.size:
        raise CalibrationError(f"sample_weight: has {w.size} values for {f.size} {scores_field}")
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        raise CalibrationError(f"sample_weight: must be finite and >= 0 (index {_first(bad)})")
    if not w.max() > 0:  # not w.sum(): finite weights may have a sum past 1.8e308
        raise CalibrationError("sample_weight: the weights must have a positive sum")
    return f, y, w


def relative_weights(sample_weight: FloatArray) -> tuple[FloatArray, int]:
    """(w 2^-e, e): the weights divided by the power of two that brings the largest into [0.5, 1).

    Sample weights are relative: a weighted fit or mean depends on their ratios, not on their
    unit. Every computation that needs only the ratios reads the weights through this function
    first: the logistic fits of Platt and beta, isotonic regression, histogram binning,
    temperature scaling, Boström's correction, Kish's effective size (so the Laplace bound)
    and the measures of :mod:`~app.calibration.metrics`. (Venn-ABERS divides by the largest
    weight instead, which makes any equal weights exactly 1 for its exact hull arithmetic.)
    So any finite weights work, whatever their unit. Without it, subnormal weights (below
    2.2e-308) lose digits in every product, and a sum of them is too small to divide by
    (1 / 6e-309 overflows), while weights near 1e308 overflow in squares and sums. The
    alternative, refusing subnormal weights, would refuse ``c * w`` for a valid ``w`` and
    leave the large end broken.

    Dividing by a power of two is exact, so weights of ordinary size give the same results,
    bit for bit, as the weights as given, and ``c * w`` gives ``w``'s results up to the rounding
    of ``c * w`` itself. Only a weight more than 2^1021 times below the largest loses digits
    (it becomes subnormal), and one 2^1075 times below becomes 0: next to the largest, either
    vanishes from any sum anyway.

    Not scale-invariant, by definition: the few places that add pseudo-counts to weighted
    counts (Laplace's rule of succession) count the weights in the caller's units, via
    :func:`unit_weight`: Platt's smoothed targets (N+ + 1) / (N+ + 2) and 1 / (N- + 2), as
    scikit-learn computes them (weights of 1e-300 pull every target to 1/2, and weights of
    1e300 make them the hard 0/1), and histogram binning's ``smoothing="laplace"``. So
    ``platt`` with its default targets, the binning with Laplace smoothing, and ``auto``
    whenever it tries Platt are not scale-invariant. A reliability bin also reports its
    ``weight`` in the caller's units. Everything else is scale-invariant, including beta's
    negligible ridge, which is counted per unit of mean weight.
    """
    exponent = math.frexp(float(sample_weight.max()))[1]
    with np.errstate(under="ignore"):
        relative: FloatArray = np.ldexp(sample_weight, -exponent)
    return relative, exponent


_UNIT_WEIGHT_CAP = 1000


def unit_weight(exponent: int) -> float:
    """A weight of 1 in the caller's units, in the units of :func:`relative_weights`: 2^-e.

    Used for pseudo-counts added to relative weighted counts (e.g. (N+ + 1) / (N+ + 2) is
    (n + u) / (n + 2u) with n = N+ 2^-e and u this). Capped at 2^1000, reached for weights
    below ~1e-301: a relative sum is at most the number of points, so past the cap it falls
    below float64's resolution next to the pseudo-count either way. The cap changes no
    result, and it keeps the count from overflowing.
    """
    return math.ldexp(1.0, min(-exponent, _UNIT_WEIGHT_CAP))


def _float_vector(values: object, field: str) -> FloatArray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise CalibrationError(f"{field}: must be an array of numbers") from None
    if array.ndim != 1:
        raise CalibrationError(f"{field}: must be a 1-d array, not {array.ndim}-d")
    return array


def _first(mask: NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(mask)[0])


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
