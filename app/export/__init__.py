"""Fitted calibrators as ONNX models, their parity to ``predict`` measured at export
(:mod:`app.export.exporter` says how).

This face names what the service uses; all but :data:`Dtype` come from their modules on first
use (PEP 562's module ``__getattr__``), and the ``onnx`` package with them: it costs more than
half a second to import, which a server process that never exports need not pay at start-up.
Use them through the package (``from app import export``, then ``export.export_onnx(...)``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from app.export.exporter import (
        FLOAT32_BOUND,
        PARITY_BOUND,
        OnnxExport,
        export_onnx,
        largest_gap,
    )
    from app.export.graph import ExportError

__all__ = [
    "FLOAT32_BOUND",
    "PARITY_BOUND",
    "Dtype",
    "ExportError",
    "OnnxExport",
    "export_onnx",
    "largest_gap",
]

Dtype = Literal["float64", "float32"]
"""The element type of an exported model's inputs and outputs."""

_HOMES = {
    "FLOAT32_BOUND": "app.export.exporter",
    "PARITY_BOUND": "app.export.exporter",
    "ExportError": "app.export.graph",
    "OnnxExport": "app.export.exporter",
    "export_onnx": "app.export.exporter",
    "largest_gap": "app.export.exporter",
}


if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is its error

    def __getattr__(name: str) -> Any:
        """A name of the face, its module (and ``onnx``) imported on first use."""
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)
