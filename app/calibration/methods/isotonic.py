"""Isotonic regression by pair-adjacent violators (Ayer et al. 1955).

Niculescu-Mizil & Caruana, *Predicting Good Probabilities With Supervised Learning*, section 2.2
and Table 1: the non-decreasing step function m minimising sum w_i (y_i - m(f_i))^2 (eq. 6).
The fit reproduces scikit-learn's ``IsotonicRegression(out_of_bounds="clip")``: zero-weight
points dropped, tied scores pooled, PAV, and only the ends of each constant block kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, NamedTuple, Self

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import isotonic_regression

from app.calibration.base import (
    Capabilities,
    FloatArray,
    JSONValue,
    StateError,
    check_param_keys,
    check_state_keys,
    choice_param,
    state_floats,
)
from app.calibration.kernels.bounds import BOUND_KEY, OutputBound
from app.calibration.kernels.knots import Knots, interp, interp_slopes
from app.calibration.kernels.pooling import pool_ties
from app.calibration.kernels.weights import relative_weights
from app.calibration.methods.trim_spec import TRIM_KEYS, TrimSpec, read_trim_state, trim_state
from app.calibration.methods.trimming import trim_batch

INTERPOLATIONS = ("linear", "step")
# scikit-learn's _make_unique pools scores closer than float64's resolution, not only equal ones
_TIE_RESOLUTION = float(np.finfo(np.float64).resolution)


class IsotonicCalibrator:
    """A non-decreasing map from score to probability, fitted by PAV.

    Parameters
    ----------
    interpolation : {"linear", "step"}, default "linear"
        Between fitted thresholds: ``"linear"`` interpolates (scikit-learn's
        ``IsotonicRegression.predict``); ``"step"`` is piecewise constant, the value of the
        last threshold <= f (the paper's stepwise-constant PAV output, Table 1, step 4; the
        table leaves the gaps between blocks open, here each block's value holds up to the next
        block). Outside the fitted range both clip to the end values.
    trim, trim_tau_min, trim_grid, trim_center, trim_loss, trim_folds
        Trimmed isotonic regression (Rüping, *Robust Probabilistic Calibration*), see
        :class:`~app.calibration.methods.trim_spec.TrimSpec`; ``trim="none"`` by default. The paper
        found ``trim="trainset"`` best for isotonic regression (cross-validation leaves PAV
        too few points). Listed in ``params`` only when trimming.
    bound : {"none", "laplace"}, default "none"
        ``"none"`` keeps scikit-learn's outputs, which reach exactly 0 and 1 at end blocks
        holding one class; ``"laplace"`` clips them into [1 / (n + 2), (n + 1) / (n + 2)]
        (:class:`~app.calibration.kernels.bounds.OutputBound`), as ``auto`` does. Listed in
        ``params`` and the state (``"bound": [low, high]``) only when bounded.

    Attributes
    ----------
    thresholds, values : ndarray
        The fitted map at its knots: thresholds strictly increasing, values non-decreasing in
        [0, 1]; the state is ``{"thresholds": [...], "values": [...]}``, plus ``"trim"``
        (:meth:`~app.calibration.methods.trimming.TrimResult.record`) when trimmed.
    trim_info : dict or None
        The chosen tau, centre, kept radius and each tau's loss; ``None`` untrimmed.
    """

    method: ClassVar[str] = "isotonic"
    capabilities: ClassVar[Capabilities] = Capabilities(bound=True)

    def __init__(
        self,
        interpolation: str = "linear",
        trim: TrimSpec | None = None,
        bound: OutputBound | None = None,
    ) -> None:
        self.interpolation = interpolation
        self.trim = TrimSpec() if trim is None else trim
        self.bound = OutputBound() if bound is None else bound
        self.trim_info: dict[str, JSONValue] | None = None
        self.thresholds: FloatArray = np.zeros(1)
        self.values: FloatArray = np.full(1, 0.5)
        self._prepared_map: _PreparedMap | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> Self:
        """Validate ``params``; :class:`ParamError` names a bad or unknown key."""
        check_param_keys(cls.method, params, ("interpolation", *TRIM_KEYS, BOUND_KEY))
        return cls(
            interpolation=choice_param(params, "interpolation", INTERPOLATIONS, "linear"),
            trim=TrimSpec.from_params(params),
            bound=OutputBound.from_params(params),
        )

    @property
    def params(self) -> dict[str, JSONValue]:
        """Every parameter with its effective value."""
        return {"interpolation": self.interpolation, **self.trim.params, **self.bound.params}

    def fit(self, scores: FloatArray, labels: FloatArray, sample_weight: FloatArray) -> Self:
        """Fit the isotonic map on the batch; return ``self``."""
        self.bound = self.bound.fitted(sample_weight)
        # Trimmed isotonic regression: PAV on the kept points only (Robust Probabilistic
        # Calibration, section 3.1); each trial fit is a plain IsotonicCalibrator.fit.
        scores, labels, sample_weight, self.trim_info = trim_batch(
            lambda: type(self)(self.interpolation, bound=OutputBound(self.bound.rule)),
            scores,
            labels,
            sample_weight,
            self.trim,
        )
        # Zero weights dropped and ties pooled as scikit-learn's _make_unique does: a score
        # within float64's resolution of the previous one joins its pool, whose value is the
        # weighted mean label. Relative weights (exact), so subnormal ones keep their digits.
        w, _ = relative_weights(sample_weight)
        x, pooled_w, pooled_pos = pool_ties(scores, labels, w, min_gap=_TIE_RESOLUTION)
        pooled_y = pooled_pos / pooled_w
        # PAV on the pooled points, eq. (6) with weights
        m = np.clip(isotonic_regression(pooled_y, weights=pooled_w, increasing=True).x, 0.0, 1.0)
        # Keep the first and last point of each constant block (scikit-learn's trim_duplicates):
        # the interpolant is unchanged.
        kept = np.ones(m.size, dtype=bool)
        kept[1:-1] = (m[1:-1] != m[:-2]) | (m[1:-1] != m[2:])
        self.thresholds, self.values = x[kept], m[kept]
        return self

    def predict(self, scores: FloatArray) -> FloatArray:
        """The fitted map at ``scores``, clipped to the end values outside the fitted range."""
        return self.bound.apply(self._predict_map(np.asarray(scores, dtype=np.float64)))

    def _predict_map(self, f: FloatArray) -> FloatArray:
        """The fitted map at ``f``, before the bound."""
        x, v = self.thresholds, self.values
        prepared = self._prepared()
        if self.interpolation == "linear" and x.size > 1 and prepared.interp_is_exact:
            return interp(prepared.knots, v, prepared.slopes, f)
        index = prepared.knots.count_at_most(f) - 1
        if self.interpolation == "step" or x.size == 1:
            return v[np.maximum(index, 0)]
        return _interpolate(np.clip(f, x[0], x[-1]), x, v, np.clip(index, 0, x.size - 2))

    def interp_is_exact(self) -> bool:
        """Whether np.interp is monotone and within [0, 1] on this map (checked once per map)."""
        return self._prepared().interp_is_exact

    def _prepared(self) -> _PreparedMap:
        """What predict needs of the map beyond its knots, computed once per map."""
        x, v = self.thresholds, self.values
        prepared = self._prepared_map
        if prepared is None or prepared.thresholds is not x or prepared.values is not v:
            slopes = interp_slopes(x, v)
            prepared = _PreparedMap(x, v, Knots(x), slopes, linear_is_monotone(x, v, slopes))
            self._prepared_map = prepared
        return prepared

    def state(self) -> dict[str, JSONValue]:
        """``{"thresholds": [...], "values": [...]}`` (floats), plus ``"trim"`` and ``"bound"``."""
        return {
            "thresholds": self.thresholds.tolist(),
            "values": self.values.tolist(),
            **trim_state(self.trim_info),
            **self.bound.state(),
        }

    @classmethod
    def from_state(cls, params: Mapping[str, object], state: Mapping[str, object]) -> Self:
        """Rebuild a fitted calibrator; :class:`StateError` unless the state is a valid map."""
        calibrator = cls.from_params(params)
        extra, calibrator.trim_info = read_trim_state(state)
        bounded, calibrator.bound = calibrator.bound.read_state(state)
        check_state_keys(state, ("thresholds", "values", *extra, *bounded))
        thresholds, values = state_floats(state, "thresholds"), state_floats(state, "values")
        if thresholds.size != values.size:
            raise StateError(
                f"state.values: has {values.size} values for {thresholds.size} thresholds"
            )
        if np.any(thresholds[1:] <= thresholds[:-1]):  # not np.diff: 1e308 - -1e308 overflows
            raise StateError("state.thresholds: must be strictly increasing")
        if np.any(values[1:] < values[:-1]) or values[0] < 0 or values[-1] > 1:
            raise StateError("state.values: must be non-decreasing within [0, 1]")
        calibrator.thresholds, calibrator.values = thresholds, values
        return calibrator


class _PreparedMap(NamedTuple):
    thresholds: FloatArray
    values: FloatArray
    knots: Knots
    slopes: FloatArray  # np.interp's, (v[j+1] - v[j]) / (x[j+1] - x[j])
    interp_is_exact: bool


def linear_is_monotone(x: FloatArray, v: FloatArray, slopes: FloatArray) -> bool:
    """Whether np.interp's formula, v[j] + slopes[j] (f - x[j]), stays in [v[j], v[j + 1]] on
    every segment [x[j], x[j + 1]], computed both by ``np.interp`` (small predicts) and by
    :func:`~app.calibration.kernels.knots.interp` (large ones).

    That formula is twice as fast as :func:`_interpolate` but can overflow for thresholds
    near +-1e308 and can round an ulp above v[j + 1] at a segment's right end: then the next
    segment, starting at exactly v[j + 1], would step down. Within a segment it is
    non-decreasing in f (each rounding is monotone and the slope is >= 0), so it is enough
    to evaluate it at the largest float below each x[j + 1] (v[j] itself at a knot). Both
    ways are checked, so a platform whose np.interp fused the multiply-add would be caught.
    """
    with np.errstate(all="ignore"):
        if not np.isfinite(x[-1] - x[0]):  # the widths, and so f - x[j], could overflow
            return False
        ends = np.nextafter(x[1:], -np.inf)
        formula = np.where(ends == x[:-1], v[:-1], slopes * (ends - x[:-1]) + v[:-1])
        library = np.interp(ends, x, v)
    return bool(np.all(formula <= v[1:]) and np.all(library <= v[1:]))  # NaN or inf fails


def overflow_scale(x: FloatArray) -> float:
    """0.5 when thresholds pass 2^1022 (their differences could overflow; halving is exact
    there), else 1."""
    return 0.5 if max(-x[0], x[-1]) > 2.0**1022 else 1.0


def _interpolate(f: FloatArray, x: FloatArray, v: FloatArray, j: NDArray[np.intp]) -> FloatArray:
    """Linear interpolation of (x, v) at f in [x[0], x[-1]], f in segment [x[j], x[j + 1]].

    What np.interp computes, but monotone to the last bit and overflow-free: thresholds past
    2^1022 are halved (exact) so differences stay finite, and each value is clipped into its
    segment's [v[j], v[j + 1]], which rounding could otherwise leave by an ulp.
    """
    scale = overflow_scale(x)
    x0, x1 = x[j] * scale, x[j + 1] * scale
    width = x1 - x0  # > 0 unless halving merged two subnormal thresholds
    t = np.divide(f * scale - x0, width, out=np.zeros_like(f), where=width > 0)
    v0, v1 = v[j], v[j + 1]
    p: FloatArray = np.clip(v0 + t * (v1 - v0), v0, v1)
    return p
