"""The reliability diagram of a version: calibrated and raw curves, and the histogram beneath.

The layout follows the figures of Niculescu-Mizil & Caruana, *Predicting Good Probabilities
With Supervised Learning*: mean predicted value against the fraction of positives per bin, with
the diagonal as perfect calibration, and the histogram of the predicted values on the same x
axis. The bins are the ``{"bins": [...], "metrics": {...}}`` reports of
:func:`app.calibration.metrics.summarize`; their counts *are* the histogram, for uniform and
quantile bins alike.

Drawn with matplotlib's object-oriented API on Agg (a ``Figure`` per call, never pyplot), so
concurrent requests share no figure. The output is deterministic: the same reports give the
same bytes.
"""

from __future__ import annotations

import io
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

FloatArray = np.ndarray[Any, np.dtype[np.float64]]

CALIBRATED_COLOUR = "#1f77b4"
RAW_COLOUR = "#ff7f0e"
LOG_SCALE_SPAN = 1000.0  # histogram on a log scale when max count / min positive count exceeds
MIN_BAR_WIDTH = 0.004  # quantile bins of tied predictions can have zero width; keep them visible

# The SVG backend reads these from the global rcParams while it writes: a fixed salt makes the
# ids of markers and clip paths reproducible (uuid4 otherwise) and fonttype "none" writes the
# text as <text> elements. rc_context is not thread-safe, so SVG writes take this lock.
_SVG_SALT = "app.diagrams"
_SVG_LOCK = threading.Lock()


@dataclass(frozen=True)
class _Series:
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


def render_reliability_diagram(
    calibrated: Mapping[str, Any],
    raw: Mapping[str, Any],
    *,
    title: str,
    image_format: Literal["png", "svg"],
    width_px: int = 800,
    height_px: int = 900,
    dpi: int = 100,
) -> bytes:
    """Draw the reliability diagram of two diagnostics reports as PNG or SVG bytes.

    Parameters
    ----------
    calibrated, raw
        ``{"bins": [...], "metrics": {...}}`` as :func:`~app.calibration.metrics.summarize`
        returns, for the calibrated probabilities and for the (scaled) raw scores. Empty bins
        (count 0, ``None`` statistics) are left out of the curves; no bins at all is fine.
    title
        The figure's title, drawn as given (no mathtext).
    image_format
        ``"png"``: exactly ``width_px`` x ``height_px`` pixels. ``"svg"``: the same size at
        72 points per inch, with ids ``diagonal``, ``calibrated-curve``, ``raw-curve``,
        ``calibrated-interval``, ``raw-interval``, ``histogram`` (the lower panel),
        ``calibrated-histogram``, ``raw-histogram`` and ``metrics``.
    width_px, height_px, dpi
        The size of the image and the pixels per inch that scale its text and lines.
    """
    if image_format not in ("png", "svg"):
        raise ValueError(f"image_format: must be png or svg, not {image_format!r}")
    for name, value in (("width_px", width_px), ("height_px", height_px), ("dpi", dpi)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: must be a positive integer, not {value!r}")
    cal_bins, raw_bins = _series(calibrated), _series(raw)

    width, height = _inches(width_px, dpi), _inches(height_px, dpi)
    fig = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(
        2, 1, sharex=True, height_ratios=[3, 1], gridspec_kw=_margins(width, height)
    )
    fig.suptitle(title, parse_math=False)
    _draw_reliability(top, cal_bins, raw_bins)
    _draw_histogram(bottom, cal_bins, raw_bins)

    buffer = io.BytesIO()
    if image_format == "png":
        fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    else:
        with _SVG_LOCK, matplotlib.rc_context({"svg.hashsalt": _SVG_SALT, "svg.fonttype": "none"}):
            fig.savefig(buffer, format="svg", dpi=dpi, metadata={"Date": None})
    return buffer.getvalue()


def _inches(pixels: int, dpi: int) -> float:
    """The size in inches whose product with dpi Agg truncates to exactly ``pixels``."""
    inches = pixels / dpi
    while int(inches * dpi) < pixels:  # 113 / 100 * 100 is 112.99999999999999
        inches = math.nextafter(inches, math.inf)
    return inches


def _margins(width: float, height: float) -> dict[str, float]:
    """Fixed margins in inches as figure fractions; constrained layout would add ~50 ms."""
    left, right, top, bottom, gap = 0.8, 0.25, 0.45, 0.6, 0.25
    panels = max(height - top - bottom - gap, 0.1)
    return {
        "left": min(left / width, 0.45),
        "right": max(1.0 - right / width, 0.55),
        "top": max(1.0 - top / height, 0.55),
        "bottom": min(bottom / height, 0.45),
        "hspace": gap / (panels / 2.0),  # the gap over the mean panel height
    }


def _series(report: Mapping[str, Any]) -> _Series:
    """The report's bins as arrays (one row per bin, at most 100)."""
    bins: Sequence[Mapping[str, Any]] = report.get("bins") or []
    filled = np.array(
        [
            (b.get("count") or 0) > 0
            and b.get("mean_predicted") is not None
            and b.get("fraction_positive") is not None
            for b in bins
        ],
        dtype=np.bool_,
    )

    def column(key: str, fallback: str | None = None) -> FloatArray:
        values = [b.get(key) if b.get(key) is not None else b.get(fallback or key) for b in bins]
        return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)

    return _Series(
        lower=column("lower"),
        upper=column("upper"),
        count=np.nan_to_num(column("count")),
        filled=filled,
        mean=column("mean_predicted"),
        fraction=column("fraction_positive"),
        ci_low=column("ci_low", "fraction_positive"),
        ci_high=column("ci_high", "fraction_positive"),
        metrics=report.get("metrics") or {},
    )


def _draw_reliability(ax: Axes, cal: _Series, raw: _Series) -> None:
    """The diagonal, both curves with their Wilson intervals, the legend and the metrics."""
    (diagonal,) = ax.plot([0, 1], [0, 1], "--", color="0.5", lw=1, label="perfectly calibrated")
    diagonal.set_gid("diagonal")
    for series, name, colour, marker in (
        (raw, "raw", RAW_COLOUR, "s"),
        (cal, "calibrated", CALIBRATED_COLOUR, "o"),
    ):
        f = series.filled
        x, y = series.mean[f], series.fraction[f]
        errors = np.vstack([y - series.ci_low[f], series.ci_high[f] - y]).clip(min=0.0)
        label = "raw scores" if name == "raw" else "calibrated"
        bars = ax.errorbar(
            x,
            y,
            yerr=errors,
            color=colour,
            marker=marker,
            ms=5,
            lw=1.5,
            capsize=3,
            elinewidth=1,
            label=label if f.any() else f"_{label}",
            clip_on=False,
        )
        line, _, (interval,) = bars.lines
        line.set_gid(f"{name}-curve")
        interval.set_gid(f"{name}-interval")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_ylabel("fraction of positives")
    ax.grid(True, color="0.92")
    ax.legend(loc="upper left")
    ax.set_gid("reliability")
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


def _metrics_text(reports: Mapping[str, Mapping[str, Any]]) -> str:
    """One line per report with its ECE and Brier score, the ones it has; "" if none."""
    lines = []
    for name, metrics in reports.items():
        parts = [
            f"{label} {float(metrics[key]):.4f}"
            for key, label in (("ece", "ECE"), ("brier", "Brier"))
            if isinstance(metrics.get(key), int | float) and math.isfinite(metrics[key])
        ]
        if parts:
            lines.append(f"{name:<10}  " + "  ".join(parts))
    return "\n".join(lines)


def _draw_histogram(ax: Axes, cal: _Series, raw: _Series) -> None:
    """A bar per bin over [lower, upper] with height count: calibrated filled, raw outlined."""
    counts = np.concatenate([cal.count, raw.count])
    positive = counts[counts > 0]
    log = positive.size > 0 and positive.max() / positive.min() > LOG_SCALE_SPAN
    base = 0.5 if log else 0.0  # counts are whole numbers: 0.5 sits below every bar on a log axis
    for series, name, face, edge in (
        (cal, "calibrated", to_rgba(CALIBRATED_COLOUR, 0.45), "none"),
        (raw, "raw", "none", RAW_COLOUR),
    ):
        bars = PolyCollection(_rectangles(series, base), facecolors=face, edgecolors=edge)
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


def _rectangles(series: _Series, base: float) -> list[FloatArray]:
    """The corners of each bin's bar; a bin of zero width gets MIN_BAR_WIDTH around its edge."""
    keep = (series.count > 0) & np.isfinite(series.lower) & np.isfinite(series.upper)
    lower, upper, count = series.lower[keep], series.upper[keep], series.count[keep]
    pad = np.maximum(MIN_BAR_WIDTH - (upper - lower), 0.0) / 2.0
    left, right = lower - pad, upper + pad
    return [
        np.array([[a, base], [a, c], [b, c], [b, base]], dtype=np.float64)
        for a, b, c in zip(left, right, count, strict=True)
    ]
