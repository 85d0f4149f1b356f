"""The command line's human-readable output: plain-text tables with aligned columns (and
JSON for ``--json``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from calibration_client import Decision, Diagnostics, Estimate, Performance, Prior
from calibration_client._traffic_types import PERFORMANCE_MEASURES

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


def print_estimate(found: Estimate) -> None:
    """The expected measures with their 95% bands, then the prior, a row per class."""
    cut = "" if found.threshold is None else f", threshold {found.threshold:g}"
    print(f"{found.name} version {found.version}: {found.n_predictions} predictions{cut}")
    print("\nestimated (if calibrated)")
    _print_table(("measure", "estimate", "95% low", "95% high"), _measure_rows(found.estimated))
    print("\nprior")
    columns = ("class", "training", "estimated", "95% low", "95% high")
    _print_table(columns, _prior_rows(found.prior))


def _measure_rows(performance: Performance) -> list[list[str]]:
    rows = []
    for name in PERFORMANCE_MEASURES:
        value = getattr(performance, name)
        if value is None:
            continue
        low, high = performance.intervals.get(name, (None, None))
        rows.append([name, _number(value), _number(low), _number(high)])
    return rows


def _prior_rows(prior: Prior) -> list[list[str]]:
    """One row per class: P(y = 1) of a binary version is class 1's."""
    training = np.atleast_1d(np.asarray(prior.training, dtype=np.float64))
    k = training.size
    estimated = np.full(k, np.nan) if prior.estimated is None else prior.estimated
    interval = np.full((k, 2), np.nan) if prior.interval is None else prior.interval
    columns = np.column_stack([training, estimated, np.reshape(interval, (k, 2))])
    classes = ["1"] if isinstance(prior.training, float) else [str(c) for c in range(k)]
    return [[c, *map(_number, row)] for c, row in zip(classes, columns.tolist(), strict=True)]


def print_decision(found: Decision) -> None:
    """Deciding at the cost-optimal threshold beside deciding at 0.5."""
    print(f"{found.name} version {found.version}: decide 1 above {found.threshold:.4f}")
    half = found.at_half
    _print_table(
        ("decide", "threshold", "expected cost", "95% low", "95% high"),
        [
            ["optimal", *map(_number, (found.threshold, found.expected_cost, *found.interval))],
            ["at 0.5", *map(_number, (half.threshold, half.expected_cost, *half.interval))],
        ],
    )


def print_adjusted(document: dict[str, Any]) -> None:
    """The new version's row, then the priors it was corrected from and to."""
    print_versions([document])
    adjusted = (document.get("source") or {}).get("adjusted") or {}
    if adjusted:
        print(
            f"\nversion {adjusted.get('parent_version')} corrected from prior "
            f"{_priors(adjusted.get('prior_from'))} to {_priors(adjusted.get('prior_to'))}"
        )


def _priors(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_number(v) for v in value) + "]"
    return _number(value)
