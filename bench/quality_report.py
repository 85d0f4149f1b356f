"""The markdown that ``python -m bench.quality`` prints: means per family, per data set, and how
``auto`` and scikit-learn's CV choice fare case by case against always using Platt scaling."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from bench.datasets import DataSet
    from bench.quality import Case, Notes

MARGIN = 0.02
"""Issue 9's tolerance: no case may have ``auto`` worse than Platt by more than this (nats)."""


def grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def mean_row(cases: Sequence[Case], columns: Sequence[str], metric: str) -> list[str]:
    """Cells: the number of cases, then each column's mean over the cases where it ran.

    A mean over fewer cases than the row has says ``(k/n)`` (``beta`` runs only on scores in
    (0, 1)); the lowest mean among the columns that ran on every case is bold.
    """
    means: dict[str, tuple[float, int]] = {}
    for column in columns:
        values = [getattr(c, metric)[column] for c in cases if column in getattr(c, metric)]
        if values:
            means[column] = (float(np.mean(values)), len(values))
    best = min((m for m, k in means.values() if k == len(cases)), default=np.nan)
    cells = [str(len(cases))]
    for column in columns:
        if column not in means:
            cells.append("")
            continue
        value, count = means[column]
        cell = f"**{value:.4f}**" if value == best else f"{value:.4f}"
        cells.append(cell if count == len(cases) else f"{cell} ({count}/{len(cases)})")
    return cells


def means_table(
    cases: Sequence[Case], columns: Sequence[str], metric: str, key: Callable[[Case], str]
) -> str:
    """One row per value of ``key`` (in order of appearance) and a last row over all cases."""
    groups: dict[str, list[Case]] = {}
    for case in cases:
        groups.setdefault(key(case), []).append(case)
    rows = [[group, *mean_row(members, columns, metric)] for group, members in groups.items()]
    rows.append(["all", *mean_row(cases, columns, metric)])
    return grid(["", "cases", *columns], rows)


def versus_platt(cases: Sequence[Case], columns: Sequence[str]) -> str:
    """Per column, the paired test log-loss differences ``column - platt`` over the cases."""
    rows = []
    for column in columns:
        if column == "platt":
            continue
        paired = [c for c in cases if column in c.log_loss and "platt" in c.log_loss]
        if not paired:
            continue
        deltas = np.array([c.log_loss[column] - c.log_loss["platt"] for c in paired])
        worst = int(np.argmax(deltas))
        rows.append(
            [
                column,
                str(len(paired)),
                f"{deltas.mean():+.4f}",
                f"{deltas[worst]:+.4f} ({paired[worst].name})",
                str(int(np.sum(deltas > MARGIN))),
                str(int(np.sum(deltas < 0))),
            ]
        )
    header = ["method", "cases", "mean - platt", "worst - platt (case)"]
    return grid([*header, f"worse by > {MARGIN}", "better than platt"], rows)


def choices(cases: Sequence[Case], selector: str) -> str:
    """How often ``selector`` chose each method, per family and over all cases."""
    picks = [(c.family, c.chosen[selector]) for c in cases if selector in c.chosen]
    labels = sorted({label for _, label in picks})
    families = list(dict.fromkeys(family for family, _ in picks))
    rows = []
    for group in [*families, "all"]:
        count = Counter(label for family, label in picks if group in (family, "all"))
        rows.append([group, *(str(count[label]) for label in labels)])
    return grid([f"{selector} chose", *labels], rows)


def worst_cases(cases: Sequence[Case], count: int = 8) -> str:
    """The cases where ``auto`` lost most against Platt, with what it chose and its CV score."""
    paired = sorted(
        (c for c in cases if "auto" in c.log_loss and "platt" in c.log_loss),
        key=lambda c: c.log_loss["platt"] - c.log_loss["auto"],
    )
    rows = []
    for case in paired[:count]:
        chosen = case.chosen.get("auto", "")
        record = (case.selection or {}).get("candidates")
        cv = {
            label: entry.get("log_loss")
            for label, entry in (record.items() if isinstance(record, dict) else ())
            if isinstance(entry, dict)
        }
        rows.append(
            [
                case.name,
                str(case.n_calibration),
                chosen,
                f"{cv[chosen]:.4f}" if isinstance(cv.get(chosen), float) else "",
                f"{cv['platt']:.4f}" if isinstance(cv.get("platt"), float) else "",
                f"{case.log_loss['auto']:.4f}",
                f"{case.log_loss['platt']:.4f}",
            ]
        )
    header = ["case", "calibration rows", "auto chose", "its CV log loss", "platt's CV"]
    return grid([*header, "auto test", "platt test"], rows)


def target_lines(cases: Sequence[Case], columns: Sequence[str]) -> list[str]:
    """Issue 9's quality targets, as met or not on this run."""
    if "auto" not in columns or "platt" not in columns:
        return ["- issue 9's targets: need both the auto and platt columns"]
    paired = [c for c in cases if "auto" in c.log_loss]
    auto = float(np.mean([c.log_loss["auto"] for c in paired]))
    rivals = [
        c for c in columns if c not in ("raw", "auto") and all(c in k.log_loss for k in paired)
    ]
    beaten = [
        f"{column} {mean:.4f}"
        for column in rivals
        if (mean := float(np.mean([c.log_loss[column] for c in paired]))) <= auto
    ]
    worse = sum(c.log_loss["auto"] - c.log_loss["platt"] > MARGIN for c in paired)
    return [
        f"- auto's mean test log loss ({auto:.4f}) is below that of every fixed method and of "
        "sklearn_cv that ran on every case: "
        + ("met" if not beaten else "NOT met; as low or lower: " + ", ".join(beaten)),
        f"- cases with auto - platt > {MARGIN} nats: {worse} of {len(paired)} "
        + ("(met)" if worse == 0 else "(NOT met: target 0)"),
    ]


def data_table(loaded: Sequence[DataSet], cases: Sequence[Case]) -> str:
    """The data sets: source, target, size, share of positives and the split sizes."""
    splits = {c.dataset: f"{c.n_train} / {c.n_calibration} / {c.n_test}" for c in cases}
    rows = [
        [
            d.name,
            d.source,
            d.target,
            str(d.labels.size),
            str(d.features.shape[1]),
            f"{100 * d.positive_rate:.1f}%",
            splits.get(d.name, ""),
        ]
        for d in loaded
    ]
    header = ["data set", "package: source", "positive", "rows", "features", "positives"]
    return grid([*header, "train / calibrate / test"], rows)


def report(
    cases: Sequence[Case], loaded: Sequence[DataSet], columns: Sequence[str], notes: Notes
) -> str:
    """Everything printed on stdout, as markdown sections."""
    seeds = len({c.seed for c in cases})
    sections = [
        f"## Mean test log loss ({len(cases)} cases: data set x family x {seeds} "
        + ("seed)" if seeds == 1 else "seeds)"),
        means_table(cases, columns, "log_loss", lambda c: c.family),
        "## Mean test Brier score",
        means_table(cases, columns, "brier", lambda c: c.family),
        "## Mean test log loss per data set",
        means_table(cases, columns, "log_loss", lambda c: c.dataset),
    ]
    if "platt" in columns:
        sections += [
            "## Test log loss against always-Platt, case by case",
            versus_platt(cases, columns),
        ]
    selectors = [s for s in ("auto", "sklearn_cv") if any(s in c.chosen for c in cases)]
    if selectors:
        sections.append("## What the selectors chose")
        sections += [choices(cases, selector) for selector in selectors]
    if any("auto" in c.log_loss and "platt" in c.log_loss for c in cases):
        sections += ["## auto's worst cases against Platt", worst_cases(cases)]
    sections += ["## Issue 9's quality targets", "\n".join(target_lines(cases, columns))]
    sections += ["## Data sets", data_table(loaded, cases)]
    lines = [f"- {label} skipped: {why}" for label, why in notes.skipped.items()]
    lines += [f"- failed: {failure}" for failure in notes.failures]
    if lines:
        sections += ["## Notes", "\n".join(lines)]
    return "\n\n".join(sections)
