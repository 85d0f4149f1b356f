"""Figures, matplotlib only: a report in, PNG or SVG bytes out.

The renderers below are the package's face, and they load matplotlib on the first picture,
not when the service starts (PEP 562's module ``__getattr__``): importing it costs more than
a second, which every server process would otherwise pay at start-up and every process
start in the tests with it, though most processes never draw. Call them through the package
(``from app import figures``, then ``figures.render_monitoring(...)``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.figures.monitoring import render_monitoring
    from app.figures.reliability import render_comparison_diagram, render_reliability_diagram

__all__ = ["render_comparison_diagram", "render_monitoring", "render_reliability_diagram"]

_HOMES = {
    "render_comparison_diagram": "app.figures.reliability",
    "render_monitoring": "app.figures.monitoring",
    "render_reliability_diagram": "app.figures.reliability",
}


if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is its error

    def __getattr__(name: str) -> Any:
        """A renderer, its module (and matplotlib) imported on first use."""
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)
