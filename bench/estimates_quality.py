"""``python -m bench.estimates_quality``: how far the monitoring windows' ``estimated`` and
``prior``, and ``adjust``, can be trusted on real data.

Every case of :mod:`bench.replay` (data set x model x method x seed) whose model reaches a
test ROC AUC of :data:`DISCRIMINATES` is replayed as traffic through the service in
process, and beside them the weak models of :data:`WEAK` (one poor column). The tables:

1. *Bands without shift, and under a label flip*: the share of windows whose realized
   accuracy, ROC AUC and log loss (scikit-learn on the window's labels) fall in the band of
   their estimate, for the versions calibrated on the test distribution (neither
   Spiegelhalter's nor Hosmer-Lemeshow's test rejects at 5% on the test split) and the
   others; then the same windows with 30% of their labels flipped.
2. *Label shift*: per shift factor, EM's (the window's ``prior.estimated``) error against the
   true rate, BBSE's, how often EM's interval holds the true rate and how often the
   estimand (the likelihood's maximum on the whole test split weighted to the window's rate,
   what EM tends to as the window grows), the estimand's own distance from the true rate
   (the part of EM's error that calibration, not sampling, makes) and EM's largest distance
   from the estimand (the part sampling makes).
3. *Adjusted versions*: the log loss of version 1 on each shifted window, and how much a
   version adjusted to the true rate, and one adjusted to the window's own traffic
   (``"prior": "traffic"``), lower it.
4. Every case, one line each.

Progress goes to stderr; the tables to stdout.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from bench import datasets
from bench.estimate_references import MEASURES
from bench.replay import Case, InProcess, Plan, Replayed, Window, first_hour, replay, score
from bench.table import progress

DISCRIMINATES = 0.85
"""The test ROC AUC from which a model counts as discriminating (the issue's)."""
DATASETS = ("breast_cancer", "digits", "email", "churn", "mnist", "default")
"""The data sets of :mod:`bench.datasets` on which some cheap family reaches
:data:`DISCRIMINATES` (the others: hmda, credit, caravan, fair, telco, lending, below 0.85)."""
FAMILIES = ("logistic_regression", "naive_bayes", "random_forest")
"""The families replayed by default: boosted trees take a minute on mnist here."""
METHODS = ("platt", "auto")
WEAK: tuple[Case, ...] = tuple(Case("churn", "feature:2", method) for method in METHODS)
"""Logistic regression on churn's day minutes alone: a test ROC AUC of about 0.65."""
SHIFTS = ("up", "down")


def is_weak(case: Case) -> bool:
    """Whether the case's model is one of the deliberately weak ones (one column)."""
    return case.model.startswith("feature:")


def share(flags: Iterable[bool | None]) -> tuple[int, int]:
    """How many of ``flags`` are True, and how many are not None."""
    known = [flag for flag in flags if flag is not None]
    return sum(known), len(known)


def coverage(windows: Sequence[Window], measure: str) -> tuple[int, int]:
    """Windows whose realized ``measure`` lies in its estimate's band, and windows with both."""
    return share(window.covered(measure) for window in windows)


def em_error(window: Window) -> float:
    """The window's EM estimate minus its true positive rate."""
    return float(window.row["prior"]["estimated"]) - window.true_rate


def interval_holds(window: Window, value: float) -> bool:
    """Whether the window's prior interval holds ``value``."""
    low, high = window.row["prior"]["interval"]
    return bool(low <= value <= high)


def interval_width(window: Window) -> float:
    low, high = window.row["prior"]["interval"]
    return float(high - low)


def _fraction(counts: tuple[int, int]) -> str:
    hit, total = counts
    return f"{hit / total:.0%} ({hit}/{total})" if total else "-"


def _mean(values: Sequence[float], digits: int = 4) -> str:
    return f"{np.mean(values):.{digits}f}" if values else "-"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _groups(runs: Sequence[Replayed]) -> list[tuple[str, list[Replayed]]]:
    strong = [run for run in runs if not is_weak(run.case)]
    weak = [run for run in runs if is_weak(run.case)]
    return [
        ("AUC >= 0.85, calibrated", [run for run in strong if run.calibrated]),
        ("AUC >= 0.85, not calibrated", [run for run in strong if not run.calibrated]),
        ("AUC >= 0.85, all", strong),
        ("weak: one column", weak),
    ]


def bands_table(runs: Sequence[Replayed]) -> str:
    """Coverage of the bands without shift and under the label flip, per group."""
    rows = []
    for label, group in _groups(runs):
        for kind in ("plain", "flipped"):
            windows = [w for run in group for w in run.of_kind(kind)]
            cells = [_fraction(coverage(windows, measure)) for measure in MEASURES]
            rows.append([label, kind, str(len(group)), str(len(windows)), *cells])
    header = ["versions", "windows", "cases", "n", "accuracy in band", "ROC AUC", "log loss"]
    return _table(header, rows)


def shift_table(runs: Sequence[Replayed]) -> str:
    """EM against BBSE and the true rate, per group and shift."""
    rows = []
    for label, group in _groups(runs):
        for kind in SHIFTS:
            windows = [w for run in group for w in run.of_kind(kind)]
            if not windows:
                continue
            errors = [abs(em_error(w)) for w in windows]
            bbse = [abs(w.bbse - w.true_rate) for w in windows if w.bbse is not None]
            bias = [abs((w.estimand or 0.0) - w.true_rate) for w in windows]
            sampled = [abs(em_error(w) + w.true_rate - (w.estimand or 0.0)) for w in windows]
            rows.append(
                [
                    label,
                    kind,
                    str(len(windows)),
                    _mean(errors),
                    f"{max(errors):.4f}",
                    _fraction(share(e <= 0.02 for e in errors)),
                    _mean(bbse) + ("" if len(bbse) == len(windows) else f" ({len(bbse)})"),
                    _fraction(share(interval_holds(w, w.true_rate) for w in windows)),
                    _fraction(share(interval_holds(w, w.estimand or -1.0) for w in windows)),
                    _mean([interval_width(w) for w in windows]),
                    _mean(bias),
                    f"{max(sampled):.4f}",
                ]
            )
    header = [
        "versions",
        "shift",
        "windows",
        "EM mean abs error",
        "EM max",
        "EM within 0.02",
        "BBSE mean abs error (windows it is defined)",
        "interval holds true rate",
        "interval holds estimand",
        "interval width",
        "estimand - true rate",
        "max EM - estimand",
    ]
    return _table(header, rows)


def adjust_table(runs: Sequence[Replayed]) -> str:
    """Log loss of version 1 on the shifted windows against the adjusted versions'."""
    rows = []
    for label, group in _groups(runs):
        for kind in SHIFTS:
            windows = [w for run in group for w in run.of_kind(kind) if w.log_losses]
            if not windows:
                continue
            parent = [w.log_losses["parent"] for w in windows]
            cells = [label, kind, str(len(windows)), _mean(parent)]
            for to in ("true", "traffic"):
                gains = [w.log_losses["parent"] - w.log_losses[to] for w in windows]
                cells += [_mean(gains), _fraction(share(g > 0 for g in gains))]
            rows.append(cells)
    header = [
        "versions",
        "shift",
        "windows",
        "v1 log loss",
        "gain, adjusted to true rate",
        "lower",
        "gain, adjusted to traffic",
        "lower",
    ]
    return _table(header, rows)


def cases_table(runs: Sequence[Replayed]) -> str:
    """One line per case."""
    rows = []
    for run in runs:
        plain, flipped = run.of_kind("plain"), run.of_kind("flipped")
        cells = [
            run.case.name,
            f"{run.auc:.3f}",
            f"{run.training:.3f}",
            f"{run.spiegelhalter:.3f}",
            f"{run.hosmer_lemeshow:.3f}",
            "/".join(f"{coverage(plain, m)[0]}" for m in MEASURES) + f" of {len(plain)}",
            "/".join(f"{coverage(flipped, m)[0]}" for m in MEASURES),
        ]
        for kind in SHIFTS:
            windows = run.of_kind(kind)
            errors = [em_error(w) for w in windows]
            bbse = [w.bbse - w.true_rate for w in windows if w.bbse is not None]
            widths = [interval_width(w) for w in windows]
            cells.append(
                f"{_mean(errors, 3)} / {_mean(bbse, 3)} / {_mean(widths, 3)}" if windows else "-"
            )
        shifted = run.of_kind(*SHIFTS)
        for to in ("true", "traffic"):
            lower, total = share(
                w.log_losses[to] < w.log_losses["parent"] for w in shifted if w.log_losses
            )
            cells.append(f"{lower}/{total}")
        cells.append(f"{run.seconds:.1f}")
        rows.append(cells)
    header = [
        "case",
        "AUC",
        "prior",
        "Spiegelhalter p",
        "HL p",
        "in band acc/AUC/LL",
        "flipped in band",
        "x2: EM err / BBSE err / width",
        "x0.5: EM err / BBSE err / width",
        "adjusted to true rate: lower log loss",
        "to traffic",
        "s",
    ]
    return _table(header, rows)


def run(cases: Iterable[Case], plan: Plan, keep: Callable[[Case, float], bool]) -> list[Replayed]:
    """Score each case, replay those ``keep`` accepts (given the model's test AUC)."""
    from sklearn.metrics import roc_auc_score

    runs = []
    start = first_hour()
    with InProcess.on_sqlite() as service:
        for case in cases:
            scored = score(case)
            auc = float(roc_auc_score(scored.labels_test, scored.scores_test))
            if not keep(case, auc):
                continue
            replayed = replay(service, scored, plan, start)
            progress(
                f"{case.name}: AUC {replayed.auc:.3f}, calibrated {replayed.calibrated}, "
                f"{len(replayed.windows)} windows in {replayed.seconds:.1f} s"
            )
            runs.append(replayed)
    return runs


def main(argv: list[str] | None = None) -> None:
    """Parse the flags, replay every case, print the tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.estimates_quality", description=__doc__)
    parser.add_argument("--seeds", type=int, default=3, help="splits per data set (default 3)")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--methods", default=",".join(METHODS))
    args = parser.parse_args(argv)
    names = [n for n in args.datasets.split(",") if n]
    unknown = [n for n in names if n not in datasets.LOADERS]
    if unknown:
        raise SystemExit(f"--datasets: unknown {unknown}")
    began = time.monotonic()
    strong = [
        Case(name, family, method, seed)
        for name in names
        for seed in range(args.seeds)
        for family in args.families.split(",")
        for method in args.methods.split(",")
    ]
    weak = [Case(c.dataset, c.model, c.method, seed) for c in WEAK for seed in range(args.seeds)]
    runs = run(
        [*strong, *weak],
        Plan(),
        lambda case, auc: is_weak(case) or auc >= DISCRIMINATES,
    )
    print("## Bands of the estimates: realized value in the band, per window\n")
    print(bands_table(runs))
    print("\n## Label shift: the window's EM prior against the true rate (windows of 5000)\n")
    print(shift_table(runs))
    print("\n## Adjusted versions: log loss on the shifted windows\n")
    print(adjust_table(runs))
    print("\n## Every case\n")
    print(cases_table(runs))
    progress(f"{len(runs)} cases in {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
