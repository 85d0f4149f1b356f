"""The reliability diagram of a version: calibrated and raw curves, and the histogram beneath.

The layout follows the figures of Niculescu-Mizil & Caruana, *Predicting Good Probabilities
With Supervised Learning*: mean predicted value against the fraction of positives per bin, with
the diagonal as perfect calibration, and the histogram of the predicted values on the same x
axis. The bins are the ``{"bins": [...], "metrics": {...}}`` reports of
:func:`app.calibration.measures.metrics.summarize`; their counts *are* the histogram, for uniform
and quantile bins alike.

Drawn with matplotlib's object-oriented API on Agg (a ``Figure`` per call, never pyplot), so
concurrent requests share no figure. The output is deterministic: the same reports give the
same bytes. :func:`new_figure`, :func:`margins` and :func:`figure_bytes` do the same for the
other figures (:mod:`app.figures.monitoring`).
"""

from __future__ import annotations

import io
import math
import threading
from collections.abc import Sequence
from typing import Literal

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from app.calibration import Report
from app.figures.panels import draw_histogram, draw_reliability, draw_versions, series

# The SVG backend reads these from the global rcParams while it writes: a fixed salt makes the
# ids of markers and clip paths reproducible (uuid4 otherwise) and fonttype "none" writes the
# text as <text> elements. rc_context is not thread-safe, so SVG writes take this lock.
_SVG_SALT = "app.figures.reliability"
_SVG_LOCK = threading.Lock()


def render_reliability_diagram(
    calibrated: Report,
    raw: Report,
    *,
    title: str,
    image_format: Literal["png", "svg"],
    width_px: int = 800,
    height_px: int = 900,
    dpi: int = 100,
    curve: Literal["binned", "smooth", "both"] = "binned",
) -> bytes:
    """Draw the reliability diagram of two diagnostics reports as PNG or SVG bytes.

    Parameters
    ----------
    calibrated, raw
        The reports (:class:`~app.calibration.measures.report.Report`) of the calibrated
        probabilities and of the (scaled) raw scores. Empty bins (count 0, NaN statistics) are left
        out of the curves.
    title
        The figure's title, drawn as given (no mathtext).
    image_format
        ``"png"``: exactly ``width_px`` x ``height_px`` pixels. ``"svg"``: the same size at
        72 points per inch, with ids ``diagonal``, ``calibrated-curve``, ``raw-curve``,
        ``calibrated-interval``, ``raw-interval``, ``histogram`` (the lower panel),
        ``calibrated-histogram``, ``raw-histogram`` and ``metrics``; with the smooth curves,
        ``calibrated-smooth``, ``raw-smooth`` and their bands ``calibrated-band``,
        ``raw-band``.
    width_px, height_px, dpi
        The size of the image and the pixels per inch that scale its text and lines.
    curve
        ``"binned"``: the bins' fractions with their Wilson intervals; ``"smooth"``: the
        kernel-smoothed curves (Błasiok & Nakkiran) with their bootstrap bands; ``"both"``.
    """
    cal_bins, raw_bins = series(calibrated), series(raw)
    fig = new_figure(image_format, width_px, height_px, dpi)
    top, bottom = fig.subplots(
        2, 1, sharex=True, height_ratios=[3, 1], gridspec_kw=margins(fig, rows=2)
    )
    fig.suptitle(title, parse_math=False)
    draw_reliability(top, cal_bins, raw_bins, curve)
    draw_histogram(bottom, cal_bins, raw_bins)
    return figure_bytes(fig, image_format)


def render_comparison_diagram(
    reports: Sequence[tuple[str, Report]],
    *,
    title: str,
    image_format: Literal["png", "svg"],
    curve: Literal["binned", "smooth", "both"] = "binned",
    width_px: int = 800,
    height_px: int = 700,
    dpi: int = 100,
) -> bytes:
    """Several versions' reliability curves on one batch, overlaid, best first: ``reports``
    are (legend label, report) pairs. SVG ids: ``diagonal``, ``version-{i}-curve``,
    ``version-{i}-smooth`` (i from 0, in the given order)."""
    fig = new_figure(image_format, width_px, height_px, dpi)
    ax = fig.subplots(1, 1, gridspec_kw=margins(fig, rows=1))
    fig.suptitle(title, parse_math=False)
    draw_versions(ax, [(label, series(report)) for label, report in reports], curve)
    return figure_bytes(fig, image_format)


def new_figure(image_format: str, width_px: int, height_px: int, dpi: int) -> Figure:
    """An empty figure on its own Agg canvas (never pyplot's), exactly ``width_px`` x
    ``height_px`` pixels at ``dpi``; ValueError naming the argument that is wrong."""
    if image_format not in ("png", "svg"):
        raise ValueError(f"image_format: must be png or svg, not {image_format!r}")
    for name, value in (("width_px", width_px), ("height_px", height_px), ("dpi", dpi)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: must be a positive integer, not {value!r}")
    fig = Figure(figsize=(_inches(width_px, dpi), _inches(height_px, dpi)), dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def figure_bytes(fig: Figure, image_format: Literal["png", "svg"]) -> bytes:
    """The figure as PNG or SVG, the same bytes for the same drawing (no dates, fixed ids)."""
    buffer = io.BytesIO()
    if image_format == "png":
        fig.savefig(buffer, format="png", dpi=fig.dpi, metadata={"Software": None})
    else:
        with _SVG_LOCK, matplotlib.rc_context({"svg.hashsalt": _SVG_SALT, "svg.fonttype": "none"}):
            fig.savefig(buffer, format="svg", dpi=fig.dpi, metadata={"Date": None})
    return buffer.getvalue()


def _inches(pixels: int, dpi: int) -> float:
    """The size in inches whose product with dpi Agg truncates to exactly ``pixels``."""
    inches = pixels / dpi
    while int(inches * dpi) < pixels:  # 113 / 100 * 100 is 112.99999999999999
        inches = math.nextafter(inches, math.inf)
    return inches


def margins(fig: Figure, *, rows: int, right: float = 0.25) -> dict[str, float]:
    """Fixed margins in inches (``right`` wider for a twin axis' labels) as fractions of the
    figure, for ``rows`` panels stacked; constrained layout would add ~50 ms."""
    width, height = fig.get_size_inches()
    left, top, bottom, gap = 0.8, 0.45, 0.6, 0.25
    panels = max(height - top - bottom - (rows - 1) * gap, 0.1)
    return {
        "left": min(left / width, 0.45),
        "right": max(1.0 - right / width, 0.55),
        "top": max(1.0 - top / height, 0.55),
        "bottom": min(bottom / height, 0.45),
        "hspace": gap / (panels / rows),  # the gap over the mean panel height
    }
