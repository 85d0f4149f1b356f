"""A sparkline: a small line of daily values drawn as inline SVG, written here in a few lines
rather than by matplotlib (a 100 x 20 polyline needs no figure, and a list page draws fifty).

Days without a value are gaps: the line is cut there, and a day alone between gaps is a dot.
The vertical axis spans the values present (a flat line when they are all equal); the numbers
themselves are in the figure's title and label, which a reader (or a test) reads instead of
pixels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import Markup, escape

WIDTH, HEIGHT = 100.0, 20.0
PAD = 2.0
"""Room at the top and bottom for the line's width and the dots."""


def sparkline(values: Sequence[float | None], *, label: str, title: str) -> Markup:
    """``values`` (oldest first, None for a day without one) as an inline SVG ``role="img"``
    described by ``label``, with ``title`` as its tooltip; an empty string when no value
    is present."""
    present = [v for v in values if v is not None and math.isfinite(v)]
    if not present:
        return Markup("")
    low, high = min(present), max(present)
    step = WIDTH / max(len(values) - 1, 1)

    def y(value: float) -> float:
        if high == low:
            return HEIGHT / 2
        return PAD + (high - value) / (high - low) * (HEIGHT - 2 * PAD)

    parts = []
    for run in _runs(values):
        points = [(i * step, y(v)) for i, v in run]
        if len(points) == 1:
            ((cx, cy),) = points
            parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="1.6"/>')
        else:
            xy = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
            parts.append(f'<polyline points="{xy}"/>')
    described = escape(label)
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH:g} {HEIGHT:g}" '
        f'width="{WIDTH:g}" height="{HEIGHT:g}" class="sparkline" role="img" '
        f'aria-label="{described}" focusable="false"><title>{escape(title)}</title>'
        + "".join(parts)
        + "</svg>"
    )


def _runs(values: Sequence[float | None]) -> list[list[tuple[int, float]]]:
    """The runs of consecutive days with a value, each as (day index, value) pairs."""
    runs: list[list[tuple[int, float]]] = []
    current: list[tuple[int, float]] = []
    for i, value in enumerate(values):
        if value is None or not math.isfinite(value):
            if current:
                runs.append(current)
            current = []
        else:
            current.append((i, value))
    if current:
        runs.append(current)
    return runs
