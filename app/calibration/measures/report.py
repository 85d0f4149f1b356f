"""A reliability report: bins, measures and their 95% intervals, as one typed, array-backed value.

A report reads a labelled batch through a :class:`~app.calibration.measures.resampled.View` (binary;
top-label or one class against the rest for multiclass) and holds what the diagnostics answer:
the reliability bins (:class:`~app.calibration.measures.reliability.Bins`), the measures of
:mod:`app.calibration.measures.metrics` and :mod:`app.calibration.measures.clinical`, and the
bootstrap intervals of the headline ones. The API serialises it once (:meth:`Report.as_json`); the
diagrams read its arrays directly.

The intervals come from :mod:`app.calibration.measures.report_bootstrap`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.calibration.base import FloatArray, JSONValue
from app.calibration.measures.bootstrap import (
    Interval,
)
from app.calibration.measures.clinical import (
    calibration_intercept,
    ece_debiased,
    spiegelhalter,
)
from app.calibration.measures.ici import ici
from app.calibration.measures.reliability import Bins
from app.calibration.measures.resampled import View
from app.calibration.measures.smooth_ece import smooth_curve, smooth_ece


@dataclass(frozen=True)
class SmoothCurve:
    """The kernel-smoothed reliability curve at bandwidth ``sigma`` on a mesh ``x`` of [0, 1]:
    fraction of positives ``y``, its pointwise 95% band (bootstrap percentiles), and the
    density of the predictions."""

    sigma: float
    x: FloatArray
    y: FloatArray
    low: FloatArray | None
    high: FloatArray | None
    density: FloatArray

    def as_json(self) -> dict[str, JSONValue]:
        """The curve as JSON lists (``low`` and ``high`` null without resamples)."""

        def listed(values: FloatArray | None) -> JSONValue:
            return None if values is None else [float(v) for v in values]

        return {
            "sigma": self.sigma,
            "x": listed(self.x),
            "y": listed(self.y),
            "low": listed(self.low),
            "high": listed(self.high),
            "density": listed(self.density),
        }


@dataclass(frozen=True)
class Report:
    """One report: the bins, the measures (None where undefined) and their intervals."""

    bins: Bins
    metrics: dict[str, float | None]
    intervals: dict[str, Interval] = field(default_factory=dict)
    smooth: SmoothCurve | None = None

    def as_json(self) -> dict[str, JSONValue]:
        """``{"bins": [...], "metrics": {..., "intervals": {name: [low, high]}}}`` (and
        ``"smooth"`` when there is a smooth curve)."""
        metrics: dict[str, JSONValue] = dict(self.metrics)
        if self.intervals:
            metrics["intervals"] = {k: [low, high] for k, (low, high) in self.intervals.items()}
        out: dict[str, JSONValue] = {
            "bins": [row.as_dict() for row in self.bins.rows()],
            "metrics": metrics,
        }
        if self.smooth is not None:
            out["smooth"] = self.smooth.as_json()
        return out


BIN_FREE = (
    "brier",
    "log_loss",
    "accuracy",
    "auc",
    "smooth_ece",
    "smooth_ece_sigma",
    "calibration_slope",
    "calibration_intercept",
    "spiegelhalter_z",
    "spiegelhalter_p",
    "ici",
    "ici_e50",
    "ici_e90",
    "ici_emax",
)
"""The measures of a report that its bins do not change (``n_bins``, ``strategy``)."""


@dataclass(frozen=True)
class BinFree:
    """What a report holds that its bins do not change: the :data:`BIN_FREE` measures, their
    intervals, and the smoothed curve; what they were made of (a batch of ``n`` rows, its
    class ``class_index``, ``resamples`` resamples); and the order of the whole report's keys,
    so that a report made with them reads as one made without."""

    metrics: dict[str, float | None]
    intervals: dict[str, Interval]
    smooth: SmoothCurve | None
    n: int
    class_index: int | None
    resamples: int
    keys: tuple[str, ...]
    interval_keys: tuple[str, ...]

    @classmethod
    def of(cls, report: Report, n: int, class_index: int | None, resamples: int) -> BinFree:
        """The parts of ``report`` other bins share (made of ``n`` rows, the class
        ``class_index``, ``resamples`` resamples)."""
        return cls(
            {k: v for k, v in report.metrics.items() if k in BIN_FREE},
            {k: v for k, v in report.intervals.items() if k in BIN_FREE},
            report.smooth,
            n,
            class_index,
            resamples,
            tuple(report.metrics),
            tuple(report.intervals),
        )

    def completed(self, binned: Report) -> Report:
        """``binned`` (a report of the binned measures only, on the same batch) with these."""
        metrics, intervals = (
            {**binned.metrics, **self.metrics},
            {**binned.intervals, **self.intervals},
        )
        return Report(
            binned.bins,
            {k: metrics[k] for k in _ordered(self.keys, metrics)},
            {k: intervals[k] for k in _ordered(self.interval_keys, intervals)},
            self.smooth,
        )


def _ordered(keys: tuple[str, ...], found: Mapping[str, object]) -> list[str]:
    """``found``'s keys in the order ``keys`` gives, any others after them."""
    return [k for k in keys if k in found] + [k for k in found if k not in keys]


def view_measures(
    view: View, n_bins: int, *, with_bin_free: bool = True
) -> dict[str, float | None]:
    """The measures beyond the binned ones, for one view: the debiased L2 error on ``n_bins``
    equal-mass bins (unweighted batches only: Kumar et al.'s estimator counts rows), the
    smooth ECE (:mod:`app.calibration.measures.smooth_ece`, at its own width), the calibration slope
    and intercept, Spiegelhalter's test, and the integrated calibration index with its
    quantiles (:mod:`app.calibration.measures.ici`); only the first unless ``with_bin_free``.
    Weights are the view's relative ones (equal weights count as 1), so no measure depends
    on the weights' unit beyond the smooth ECE's density floor and the LOWESS span's
    rounding to whole rows."""
    p, y, w = view.p, view.y, view.w
    unweighted = bool(w.min() == w.max())
    if not with_bin_free:
        return {"ece_debiased": ece_debiased(p, y, n_bins) if unweighted else None}
    test = spiegelhalter(p, y, w)
    smooth = smooth_ece(p, y, w)
    index = ici(p, y, None if unweighted else w)
    return {
        "ece_debiased": ece_debiased(p, y, n_bins) if unweighted else None,
        "smooth_ece": smooth.value,
        "smooth_ece_sigma": smooth.sigma,
        "calibration_slope": None if (line := view.line()) is None else line.slope,
        "calibration_intercept": calibration_intercept(p, y, w),
        "spiegelhalter_z": None if test is None else test.z,
        "spiegelhalter_p": None if test is None else test.p_value,
        "ici": None if index is None else index.ici,
        "ici_e50": None if index is None else index.e50,
        "ici_e90": None if index is None else index.e90,
        "ici_emax": None if index is None else index.emax,
    }


Band = tuple[FloatArray, FloatArray]
"""A smoothed curve's pointwise 95% band: its low and high ends at each mesh point."""


def smooth_curve_of(view: View, sigma: float, band: Band | None) -> SmoothCurve:
    """The view's smoothed reliability curve at width ``sigma`` (relplot's diagram), with the
    pointwise 95% band of its bootstrap resamples when there is one."""
    curve = smooth_curve(view.p, view.y, view.w, sigma)
    low, high = (None, None) if band is None else band
    return SmoothCurve(sigma, curve.t, curve.mu, low, high, curve.density)
