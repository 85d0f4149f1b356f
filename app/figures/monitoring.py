"""The monitoring figure: a calibrator's live calibration over time, six panels on one time axis.

Drawn from the rows of :meth:`app.service.traffic.monitoring.Monitor.rows` (one per window and
version):

- calibration: the binned ECE (solid, left axis) and the log loss (dashed, right axis);
- rates: the mean predicted probability (solid) against the observed rate (dashed);
- shift: PSI (solid) and KS (dotted) of the raw scores against the fitting batch, with a
  dashed line at PSI 0.25, the usual mark of a major shift;
- expected: the accuracy expected of all the window's predictions (solid, its 95% band
  shaded) against the accuracy realized on the labelled ones (dashed);
- prior: the positive rate by EM from all the predictions (solid, its interval shaded)
  against the rate the version was trained under (dotted); binary versions;
- traffic: the predictions logged per window, and the labelled ones, as bars.

The time axis spans the windows with traffic, half a window beyond each end: a day of traffic
in a 30-day range fills the figure. One colour per version in every panel but the traffic's.
A window where a version has no number is a gap in its line, never a zero; a panel with
nothing to draw says so. Drawn and written as the reliability diagram is
(:mod:`app.figures.reliability`): the same rows give the same bytes. In SVG the lines have the
ids ``{measure}-v{n}`` (``ece``, ``log-loss``, ``mean-predicted``, ``observed-rate``, ``psi``,
``ks``, ``estimated-accuracy``, ``realized-accuracy``, ``estimated-prior``,
``training-prior``), the bands ``estimated-accuracy-band-v{n}`` and
``estimated-prior-band-v{n}``, the bars ``n-predictions`` and ``n-labelled``, and the panels
their names above.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import matplotlib.dates as mdates
import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba

from app.figures.panels import CALIBRATED_COLOUR, FloatArray
from app.figures.reliability import figure_bytes, margins, new_figure

PSI_MAJOR_SHIFT = 0.25
"""PSI above this is commonly read as a major shift of the population (Yurdakul, 2018)."""
METRICS = ("ece", "log_loss", "mean_predicted", "observed_rate", "psi", "ks")
NESTED = {
    "estimated_accuracy": ("estimated", "accuracy"),
    "estimated_accuracy_low": ("estimated", "intervals", "accuracy", 0),
    "estimated_accuracy_high": ("estimated", "intervals", "accuracy", 1),
    "realized_accuracy": ("realized", "accuracy"),
    "estimated_prior": ("prior", "estimated"),
    "estimated_prior_low": ("prior", "interval", 0),
    "estimated_prior_high": ("prior", "interval", 1),
    "training_prior": ("prior", "training"),
}
"""The figures drawn from a row's ``estimated``, ``realized`` and ``prior``: where each is."""


@dataclass(frozen=True)
class Timeline:
    """The rows as arrays over the windows: ``values[key]`` has a row per version and a column
    per window (NaN where the version has no number); the counts sum every version's."""

    starts: FloatArray  # matplotlib date numbers
    ends: FloatArray
    versions: list[int]
    values: Mapping[str, FloatArray]
    n_predictions: FloatArray
    n_labelled: FloatArray

    @property
    def middles(self) -> FloatArray:
        return (self.starts + self.ends) / 2.0


def timeline(rows: Sequence[Mapping[str, Any]]) -> Timeline:
    """The rows of :meth:`app.service.traffic.monitoring.Monitor.rows` as a :class:`Timeline`."""
    starts = sorted({row["start"] for row in rows})
    ends = sorted({row["end"] for row in rows})
    column = {start: j for j, start in enumerate(starts)}
    versions = sorted({row["version"] for row in rows if row["version"] is not None})
    line = {version: i for i, version in enumerate(versions)}
    values = {key: np.full((len(versions), len(starts)), np.nan) for key in (*METRICS, *NESTED)}
    n_predictions, n_labelled = np.zeros(len(starts)), np.zeros(len(starts))
    for row in rows:  # one per window and version: at most a few thousand
        j = column[row["start"]]
        n_predictions[j] += row["n_predictions"]
        n_labelled[j] += row["n_labelled"]
        if row["version"] is not None:
            for key in METRICS:
                if row[key] is not None:
                    values[key][line[row["version"]], j] = row[key]
            for key, path in NESTED.items():
                found = _nested(row, path)
                if isinstance(found, float | int):  # a k-class prior is a vector: not drawn
                    values[key][line[row["version"]], j] = found
    return Timeline(
        starts=_days(starts),
        ends=_days(ends),
        versions=versions,
        values=values,
        n_predictions=n_predictions,
        n_labelled=n_labelled,
    )


def _nested(row: Mapping[str, Any], path: Sequence[str | int]) -> Any:
    """The value at ``path`` in ``row``, None where a step is missing or null."""
    found: Any = row
    for step in path:
        if found is None:
            return None
        found = found.get(step) if isinstance(step, str) else found[step]
    return found


def _days(moments: Sequence[datetime]) -> FloatArray:
    """Moments as matplotlib's date numbers, the x of every panel."""
    return np.asarray(mdates.date2num(moments), dtype=np.float64)  # type: ignore[no-untyped-call]


def render_monitoring(
    rows: Sequence[Mapping[str, Any]],
    *,
    title: str,
    image_format: Literal["png", "svg"],
    width_px: int = 1000,
    height_px: int = 1400,
    dpi: int = 100,
) -> bytes:
    """Draw the monitoring rows of one range as PNG or SVG bytes, ``width_px`` x ``height_px``
    pixels (SVG: the same size at 72 points per inch); ``title`` is drawn as given."""
    fig = new_figure(image_format, width_px, height_px, dpi)
    panels = fig.subplots(6, 1, sharex=True, gridspec_kw=margins(fig, rows=6, right=0.8))
    fig.suptitle(title, parse_math=False)
    line = timeline(rows)
    empty = "no traffic" if line.n_predictions.sum() == 0 else "no labelled traffic"
    _calibration(panels[0], line, empty)
    _rates(panels[1], line, empty)
    _shift(panels[2], line, "no traffic" if empty == "no traffic" else "no shift measured")
    quiet = empty == "no traffic"
    expected = ("expected", "expected (solid)\nrealized (dashed)", "accuracy")
    keys = ("estimated_accuracy", "realized_accuracy")
    _banded(panels[3], line, keys, "--", expected, empty if quiet else "no estimate")
    prior = ("prior", "by EM (solid)\ntraining (dotted)", "positive rate")
    keys = ("estimated_prior", "training_prior")
    _banded(panels[4], line, keys, ":", prior, empty if quiet else "no binary prior")
    _traffic(panels[5], line)
    panels[5].set_xlim(*_span(line))
    locator = mdates.AutoDateLocator(tz=UTC)  # type: ignore[no-untyped-call]
    panels[5].xaxis.set_major_locator(locator)
    concise = mdates.ConciseDateFormatter(locator, tz=UTC)  # type: ignore[no-untyped-call]
    panels[5].xaxis.set_major_formatter(concise)
    panels[5].set_xlabel("window (UTC)")
    return figure_bytes(fig, image_format)


def _calibration(ax: Axes, line: Timeline, empty: str) -> None:
    twin = ax.twinx()
    _lines(ax, line, "ece", "-", legend=True)
    _lines(twin, line, "log_loss", "--")
    ax.set_ylabel("ECE (solid)")
    twin.set_ylabel("log loss (dashed)")
    for axes in (ax, twin):  # headroom above the lines for the legend of versions
        axes.set_ylim(0.0, axes.get_ylim()[1] * 1.25)
    _finish(ax, "calibration", line, ("ece", "log_loss"), empty)


def _rates(ax: Axes, line: Timeline, empty: str) -> None:
    _lines(ax, line, "mean_predicted", "-")
    _lines(ax, line, "observed_rate", "--")
    ax.set_ylim(0.0, 1.0)
    ax.set_ylabel("predicted (solid)\nobserved (dashed)")
    _finish(ax, "rates", line, ("mean_predicted", "observed_rate"), empty)


def _shift(ax: Axes, line: Timeline, empty: str) -> None:
    _lines(ax, line, "psi", "-")
    _lines(ax, line, "ks", ":")
    threshold = ax.axhline(PSI_MAJOR_SHIFT, ls="--", lw=1, color="0.5")
    threshold.set_gid("psi-threshold")
    ax.set_ylim(bottom=0.0)
    ax.set_ylabel("PSI (solid)\nKS (dotted)")
    _finish(ax, "shift", line, ("psi", "ks"), empty)


def _span(line: Timeline) -> tuple[float, float]:
    """The time axis: the windows with traffic, half a window beyond each end (an hour of
    traffic in a 30-day range is not one dot at the edge), or the whole range without any."""
    if not line.starts.size:
        return (0.0, 1.0)
    busy = np.flatnonzero(line.n_predictions > 0)
    if not busy.size:
        return (float(line.starts[0]), float(line.ends[-1]))
    first, last = line.starts[busy[0]], line.ends[busy[-1]]
    margin = (line.ends[busy[0]] - first) / 2.0
    return (float(max(first - margin, line.starts[0])), float(min(last + margin, line.ends[-1])))


def _banded(
    ax: Axes,
    line: Timeline,
    keys: tuple[str, str],
    style: str,
    what: tuple[str, str, str],
    empty: str,
) -> None:
    """``keys[0]`` with its 95% band against ``keys[1]`` drawn in ``style``; ``what`` is the
    panel's id, its y label and its caption; ``empty`` its note when it has no number."""
    gid, label, caption = what
    _bands(ax, line, keys[0])
    _lines(ax, line, keys[0], "-")
    _lines(ax, line, keys[1], style)
    ax.set_ylim(bottom=0.0)  # the top fits the data: a base rate of 0.2% is not flattened
    if not any(np.isfinite(line.values[key]).any() for key in keys):
        ax.set_ylim(0.0, 1.0)
    ax.set_ylabel(label)
    _caption(ax, caption)
    _finish(ax, gid, line, keys, empty)


def _caption(ax: Axes, text: str) -> None:
    """What a panel's lines measure, at its lower left."""
    ax.text(0.01, 0.04, text, transform=ax.transAxes, fontsize="small", color="0.35")


def _bands(ax: Axes, line: Timeline, key: str) -> None:
    """Each version's 95% band of ``key`` (``{key}_low`` to ``{key}_high``), shaded."""
    for i, version in enumerate(line.versions):
        band = ax.fill_between(
            line.middles,
            line.values[f"{key}_low"][i],
            line.values[f"{key}_high"][i],
            color=f"C{i % 10}",
            alpha=0.15,
            lw=0,
        )
        band.set_gid(f"{key.replace('_', '-')}-band-v{version}")


def _traffic(ax: Axes, line: Timeline) -> None:
    """A bar per window over [start, end): every prediction grey, the labelled ones blue."""
    ax.set_gid("traffic")
    for key, counts, face in (
        ("n-predictions", line.n_predictions, "0.8"),
        ("n-labelled", line.n_labelled, to_rgba(CALIBRATED_COLOUR, 0.7)),
    ):
        kept = counts > 0
        bars = PolyCollection(
            [
                np.array([[a, 0.0], [a, c], [b, c], [b, 0.0]])
                for a, b, c in zip(line.starts[kept], line.ends[kept], counts[kept], strict=True)
            ],
            facecolors=face,
            edgecolors="none",
            label="predictions" if key == "n-predictions" else "labelled",
        )
        bars.set_gid(key)
        ax.add_collection(bars, autolim=False)
    top = line.n_predictions.max() if line.n_predictions.size else 0.0
    ax.set_ylim(0.0, top * 1.08 if top > 0 else 1.0)
    ax.set_ylabel("predictions")
    if top > 0:
        ax.legend(loc="upper left", fontsize="small")
    else:
        _note(ax, "no traffic")


def _lines(ax: Axes, line: Timeline, key: str, style: str, *, legend: bool = False) -> None:
    """One line per version, broken where it has no number (NaN), with a marker per window so
    that a window alone between gaps still shows."""
    for i, version in enumerate(line.versions):
        (drawn,) = ax.plot(
            line.middles,
            line.values[key][i],
            style,
            color=f"C{i % 10}",
            marker="o",
            ms=3,
            lw=1.5,
            label=f"v{version}" if legend else "_",
        )
        drawn.set_gid(f"{key.replace('_', '-')}-v{version}")


def _finish(ax: Axes, gid: str, line: Timeline, keys: Sequence[str], empty: str) -> None:
    """The panel's grid, legend (versions, in the first panel) and note when it is empty."""
    ax.grid(True, color="0.92")
    ax.set_gid(gid)
    if gid == "calibration" and line.versions:
        ax.legend(loc="upper left", fontsize="small", ncols=min(len(line.versions), 8))
    if not any(np.isfinite(line.values[key]).any() for key in keys):
        _note(ax, empty)


def _note(ax: Axes, text: str) -> None:
    """``text`` in the middle of an empty panel, with the id ``{panel}-empty``."""
    note = ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4")
    note.set_gid(f"{ax.get_gid()}-empty")
