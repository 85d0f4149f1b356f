"""The two panels of a reliability diagram (:mod:`app.figures.reliability`): the curves with their
intervals against the diagonal, and the histogram of predicted values beneath."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.container import ErrorbarContainer

from app.calibration import Report, SmoothCurve

FloatArray = np.ndarray[Any, np.dtype[np.float64]]

# Every colour that draws a curve, a marker or a bar's outline has a contrast of at least 3:1
# against the white background (WCAG 2.1, 1.4.11; tests/ui/test_accessibility.py checks):
# matplotlib's blue, a darker orange than its #ff7f0e (2.5:1), and for versions its ten with
# the light ones darkened.
BACKGROUND_COLOUR = "#ffffff"
CALIBRATED_COLOUR = "#1f77b4"
RAW_COLOUR = "#b35900"
VERSION_COLOURS = (
    "#1f77b4",
    "#b35900",
    "#2a7d2a",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#c2185b",
    "#6a6a6a",
    "#8a8a00",
    "#127a87",
)
LOG_SCALE_SPAN = 1000.0  # histogram on a log scale when max count / min positive count exceeds
MIN_BAR_WIDTH = 0.004  # quantile bins of tied predictions can have zero width; keep them visible
SPARSE_DENSITY = 0.01
"""The smooth curve is drawn where the density of predictions is at least this share of its
peak: elsewhere the kernel has no rows to average and the curve is the kernel's tail."""


@dataclass(frozen=True)
class Series:
    """The bins of one report as arrays; ``filled`` marks the bins that have statistics."""

    lower: FloatArray
    upper: FloatArray
    count: FloatArray
    filled: np.ndarray[Any, np.dtype[np.bool_]]
    mean: FloatArray
    fraction: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    metrics: Mapping[str, Any]
    smooth: SmoothCurve | None = None


def series(report: Report) -> Series:
    """The report's bins as the panels draw them: an empty bin's interval is its (NaN)
    fraction, and its count 0."""
    bins = report.bins
    return Series(
        lower=bins.lower,
        upper=bins.upper,
        count=bins.count.astype(np.float64),
        filled=bins.filled & (bins.count > 0),
        mean=bins.mean_predicted,
        fraction=bins.fraction_positive,
        ci_low=bins.ci_low,
        ci_high=bins.ci_high,
        metrics=report.metrics,
        smooth=report.smooth,
    )


def draw_reliability(ax: Axes, cal: Series, raw: Series, curve: str = "binned") -> None:
    """The diagonal, both curves (``curve``: the bins with their Wilson intervals, the smooth
    curves with their bands, or both), the legend and the metrics."""
    _diagonal(ax)
    for series, name, colour, marker in (
        (raw, "raw", RAW_COLOUR, "s"),
        (cal, "calibrated", CALIBRATED_COLOUR, "o"),
    ):
        label = "raw scores" if name == "raw" else "calibrated"
        if curve in ("smooth", "both"):
            draw_smooth(ax, series.smooth, name, colour, label if curve == "smooth" else None)
        if curve == "smooth":
            continue
        shown = label if series.filled.any() else f"_{label}"
        bars = _binned(
            ax, series, colour, marker=marker, ms=5, lw=1.5, capsize=3, elinewidth=1, label=shown
        )
        line, _, (interval,) = bars.lines
        line.set_gid(f"{name}-curve")
        interval.set_gid(f"{name}-interval")
    _unit_square(ax, legend="medium")
    text = _metrics_text({"calibrated": cal.metrics, "raw": raw.metrics})
    if text:
        box = ax.text(
            0.98,
            0.03,
            text,
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            family="monospace",
            fontsize="small",
            parse_math=False,
            bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "0.7", "alpha": 0.9},
        )
        box.set_gid("metrics")


def draw_smooth(
    ax: Axes, smooth: SmoothCurve | None, name: str, colour: str, label: str | None
) -> None:
    """One report's smoothed curve where its predictions are (:data:`SPARSE_DENSITY`), with
    its pointwise 95% band when it has one; ids ``{name}-smooth`` and ``{name}-band``."""
    if smooth is None:
        return
    where = smooth.density >= SPARSE_DENSITY * max(float(smooth.density.max()), 1e-300)
    x = np.where(where, smooth.x, np.nan)
    if smooth.low is not None and smooth.high is not None:
        band = ax.fill_between(
            smooth.x, smooth.low, smooth.high, where=where, color=colour, alpha=0.2, lw=0
        )
        band.set_gid(f"{name}-band")
    (line,) = ax.plot(x, smooth.y, color=colour, lw=2, label=label or f"_{name} smooth")
    line.set_gid(f"{name}-smooth")


def draw_versions(ax: Axes, named: Sequence[tuple[str, Series]], curve: str) -> None:
    """The diagonal and each version's curve (binned points with Wilson intervals, smooth
    curve, or both), one colour each of :data:`VERSION_COLOURS`, with a legend."""
    _diagonal(ax)
    for i, (label, series) in enumerate(named):
        colour = VERSION_COLOURS[i % len(VERSION_COLOURS)]
        if curve in ("smooth", "both"):
            draw_smooth(ax, series.smooth, f"version-{i}", colour, label)
        if curve == "smooth":
            continue
        both = curve == "both"
        bars = _binned(
            ax,
            series,
            colour,
            marker="o",
            ms=4,
            lw=1.2 if both else 1.5,
            ls=":" if both else "-",
            capsize=2,
            elinewidth=0.8,
            label=f"_{label}" if both else label,
        )
        bars.lines[0].set_gid(f"version-{i}-curve")
    ax.set_xlabel("mean predicted value")
    _unit_square(ax, legend="small")


def _diagonal(ax: Axes) -> None:
    (diagonal,) = ax.plot([0, 1], [0, 1], "--", color="0.5", lw=1, label="perfectly calibrated")
    diagonal.set_gid("diagonal")


def _binned(ax: Axes, series: Series, colour: str, **style: Any) -> ErrorbarContainer:
    """The filled bins' fractions against their mean predictions, with Wilson intervals."""
    f = series.filled
    y = series.fraction[f]
    errors = np.vstack([y - series.ci_low[f], series.ci_high[f] - y]).clip(min=0.0)
    return ax.errorbar(series.mean[f], y, yerr=errors, color=colour, clip_on=False, **style)


def _unit_square(ax: Axes, *, legend: str) -> None:
    """The reliability panel's axes: [0, 1] both ways, grid, legend top left."""
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_ylabel("fraction of positives")
    ax.grid(True, color="0.92")
    ax.legend(loc="upper left", fontsize=legend)
    ax.set_gid("reliability")


def draw_histogram(ax: Axes, cal: Series, raw: Series) -> None:
    """A bar per bin over [lower, upper] with height count: calibrated filled, raw outlined."""
    counts = np.concatenate([cal.count, raw.count])
    positive = counts[counts > 0]
    log = positive.size > 0 and positive.max() / positive.min() > LOG_SCALE_SPAN
    base = 0.5 if log else 0.0  # counts are whole numbers: 0.5 sits below every bar on a log axis
    for series, name, face, edge in (
        (cal, "calibrated", to_rgba(CALIBRATED_COLOUR, 0.45), CALIBRATED_COLOUR),
        (raw, "raw", "none", RAW_COLOUR),
    ):
        bars = PolyCollection(rectangles(series, base), facecolors=face, edgecolors=edge)
        bars.set_gid(f"{name}-histogram")
        ax.add_collection(bars, autolim=False)
    top = positive.max() if positive.size else 1.0
    if log:
        ax.set_yscale("log")
        ax.set_ylim(base, top * 2.0)
    else:
        ax.set_ylim(0.0, top * 1.08)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("mean predicted value")
    ax.set_ylabel("count")
    ax.set_gid("histogram")


def rectangles(series: Series, base: float) -> list[FloatArray]:
    """The corners of each bin's bar; a bin of zero width gets MIN_BAR_WIDTH around its edge."""
    keep = (series.count > 0) & np.isfinite(series.lower) & np.isfinite(series.upper)
    lower, upper, count = series.lower[keep], series.upper[keep], series.count[keep]
    pad = np.maximum(MIN_BAR_WIDTH - (upper - lower), 0.0) / 2.0
    left, right = lower - pad, upper + pad
    return [
        np.array([[a, base], [a, c], [b, c], [b, base]], dtype=np.float64)
        for a, b, c in zip(left, right, count, strict=True)
    ]


def _metrics_text(reports: Mapping[str, Mapping[str, Any]]) -> str:
    """One line per report with its ECE, smooth ECE and Brier score, the ones it has; "" if
    none."""
    lines = []
    for name, metrics in reports.items():
        parts = [
            f"{label} {float(metrics[key]):.4f}"
            for key, label in (("ece", "ECE"), ("smooth_ece", "smECE"), ("brier", "Brier"))
            if isinstance(metrics.get(key), int | float) and math.isfinite(metrics[key])
        ]
        if parts:
            lines.append(f"{name:<10}  " + "  ".join(parts))
    return "\n".join(lines)
