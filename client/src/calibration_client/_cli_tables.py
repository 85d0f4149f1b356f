"""The command line's human-readable output: plain-text tables with aligned columns (and
JSON for ``--json``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from calibration_client import Diagnostics

_VERSION_COLUMNS = ("version", "method", "n_samples", "log loss cv", "ece cv", "aliases", "created")


def _version_row(document: dict[str, Any]) -> list[str]:
    cv = (document.get("metrics") or {}).get("cv") or {}
    return [
        str(document["version"]),
        str(document["method"]),
        str(document["n_samples"]),
        _number(cv.get("log_loss")),
        _number(cv.get("ece")),
        ",".join(document.get("aliases") or []),
        str(document.get("created_at", ""))[:19].replace("T", " "),
    ]


def _number(value: object) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float | np.floating):
        return f"{float(value):.4f}"
    return str(value)


def _print_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Plain text, columns aligned: left for words, right for numbers."""
    widths = [max([len(c), *(len(row[i]) for row in rows)]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in rows:
        cells = [
            cell.rjust(w) if _numeric(cell) else cell.ljust(w)
            for cell, w in zip(row, widths, strict=True)
        ]
        print("  ".join(cells).rstrip())


def _numeric(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return cell == "-"
    return True


def print_json(document: object) -> None:
    """``document`` as indented JSON, as the service answered it."""
    print(json.dumps(document, indent=2))


def print_versions(documents: Sequence[dict[str, Any]]) -> None:
    """One row per version document."""
    _print_table(_VERSION_COLUMNS, [_version_row(document) for document in documents])


def print_diagnostics(report: Diagnostics) -> None:
    """The bins of the calibrated and the raw curve, then their metrics side by side."""
    print(f"{report.name} version {report.version}: {report.n_bins} {report.strategy} bins")
    for label, curve in (("calibrated", report.calibrated), ("raw scores", report.raw)):
        print(f"\n{label}")
        columns = ("lower", "upper", "count", "mean_predicted", "fraction_positive")
        rows = [
            [_number(getattr(curve, column)[i]) for column in columns]
            for i in range(len(curve.count))
        ]
        _print_table(columns, rows)
    names = sorted(key for key in report.calibrated.metrics if key != "intervals")
    print("\nmetrics")
    _print_table(
        ("metric", "calibrated", "raw"),
        [
            [n, _number(report.calibrated.metrics.get(n)), _number(report.raw.metrics.get(n))]
            for n in names
        ],
    )
