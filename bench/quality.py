"""``python -m bench.quality``: calibration quality on real data, the papers' protocol.

Niculescu-Mizil & Caruana, *Predicting Good Probabilities With Supervised Learning*
(sections 4-5): per data set (:mod:`bench.datasets`) and seed, shuffle; train each of six model
families (:mod:`bench.models`) on up to 4000 rows, take the raw scores of a calibration set of
up to 1000 other rows and of the test set (the rest). A data set too small for that gets
proportional splits (:func:`bench.protocol.split`).

Every calibration method of :data:`METHODS` is fitted on the calibration set with the service's
own numerics, in process (``fit_calibrator``), and scored on the test set by log loss and Brier
score. Beside them, two baselines (:mod:`bench.protocol`): ``raw``, the scores as they are
(margins min-max scaled), and ``sklearn_cv``, scikit-learn's sigmoid or isotonic, whichever
wins a 5-fold cross-validation on the calibration set.

A method this checkout does not know (CalibrationError "unknown method") or whose params it
rejects (ParamError) is skipped with a note; ``beta`` runs only where the calibration scores
lie in (0, 1). ``--json PATH`` writes every case's numbers; the tables go to stdout and
progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from app.calibration import PROBABILITY_METHODS, CalibrationError, ParamError, fit_calibrator
from bench import datasets, models
from bench.protocol import FloatArray, brier, log_loss, raw_probabilities, sklearn_cv_choice, split
from bench.quality_report import report
from bench.table import progress


@dataclass(frozen=True)
class MethodSpec:
    """A column of the tables: a label, the service's method and its params."""

    label: str
    method: str
    params: dict[str, object] = field(default_factory=dict)


METHODS: tuple[MethodSpec, ...] = (
    MethodSpec("platt", "platt"),
    MethodSpec("isotonic", "isotonic"),
    MethodSpec("beta", "beta"),
    MethodSpec("histogram_binning", "histogram_binning"),
    MethodSpec("isotonic_bounded", "isotonic", {"bound": "laplace"}),
    MethodSpec("histogram_binning_bounded", "histogram_binning", {"bound": "laplace"}),
    MethodSpec("venn_abers", "venn_abers"),
    MethodSpec("venn_abers_cross", "venn_abers", {"mode": "cross"}),
    MethodSpec("auto", "auto"),
)
"""The service's methods to compare; add a variant here and it gets a column."""
RAW = "raw"
SKLEARN_CV = "sklearn_cv"
COLUMNS: tuple[str, ...] = (RAW, *(m.label for m in METHODS), SKLEARN_CV)
NEEDS_PROBABILITIES = frozenset(PROBABILITY_METHODS)
"""Methods that fit only scores strictly inside (0, 1)."""


@dataclass
class Case:
    """One data set x family x seed: its split sizes and every method's test measures."""

    dataset: str
    family: str
    seed: int
    n_train: int
    n_calibration: int
    n_test: int
    log_loss: dict[str, float] = field(default_factory=dict)
    brier: dict[str, float] = field(default_factory=dict)
    chosen: dict[str, str] = field(default_factory=dict)
    """What a selecting method chose: ``auto``'s candidate label, ``sklearn_cv``'s method."""
    selection: dict[str, Any] | None = None
    """``auto``'s record (every candidate's CV score), as the service stores it."""

    @property
    def name(self) -> str:
        """``dataset/family/seed``."""
        return f"{self.dataset}/{self.family}/seed {self.seed}"


@dataclass
class Notes:
    """What did not run: methods skipped for the whole run, and failures of single cases."""

    skipped: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def calibrate_case(
    case: Case,
    margins: bool,
    scores: tuple[FloatArray, FloatArray],
    labels: tuple[FloatArray, FloatArray],
    columns: tuple[str, ...],
    notes: Notes,
) -> None:
    """Fit every method of ``columns`` on the calibration scores; score it on the test set."""
    (scores_cal, scores_test), (labels_cal, labels_test) = scores, labels
    predicted: dict[str, FloatArray] = {}
    if RAW in columns:
        predicted[RAW] = raw_probabilities(scores_cal, scores_test, margins)
    in_unit_interval = bool(np.all((scores_cal > 0.0) & (scores_cal < 1.0)))
    for spec in METHODS:
        if spec.label not in columns or spec.label in notes.skipped:
            continue
        if spec.method in NEEDS_PROBABILITIES and not in_unit_interval:
            continue
        try:
            outcome = fit_calibrator(spec.method, spec.params, scores_cal, labels_cal, None)
        except ParamError as error:
            notes.skipped[spec.label] = str(error)
            continue
        except CalibrationError as error:
            if "unknown method" in str(error):
                notes.skipped[spec.label] = str(error)
            else:
                notes.failures.append(f"{spec.label} on {case.name}: {error}")
            continue
        predicted[spec.label] = np.asarray(outcome.calibrator.predict(scores_test))
        if outcome.selection is not None:
            case.chosen[spec.label] = str(outcome.selection.get("chosen"))
            if spec.label == "auto":
                case.selection = outcome.selection
    if SKLEARN_CV in columns:
        chosen, predicted[SKLEARN_CV] = sklearn_cv_choice(
            scores_cal, labels_cal, scores_test, case.seed
        )
        case.chosen[SKLEARN_CV] = chosen
    for label, p in predicted.items():
        case.log_loss[label] = log_loss(labels_test, p)
        case.brier[label] = brier(labels_test, p)


def run(
    names: tuple[str, ...],
    families: tuple[models.Family, ...],
    seeds: int,
    columns: tuple[str, ...],
) -> tuple[list[Case], list[datasets.DataSet], Notes]:
    """Every case of the protocol over ``names`` x ``families`` x ``range(seeds)``."""
    cases: list[Case] = []
    loaded: list[datasets.DataSet] = []
    notes = Notes()
    for name in names:
        data = datasets.load(name)
        loaded.append(data)
        X, y = data.features, data.labels
        for seed in range(seeds):
            start = time.monotonic()
            train, cal, test = split(y.size, seed)
            for part in (train, cal, test):
                if np.unique(y[part]).size < 2:
                    raise RuntimeError(f"{name}, seed {seed}: a split holds only one class")
            labels = (y[cal].astype(np.float64), y[test].astype(np.float64))
            for family in families:
                scores_cal, scores_test = family.scores(seed, X[train], y[train], X[cal], X[test])
                case = Case(name, family.name, seed, train.size, cal.size, test.size)
                calibrate_case(
                    case, family.margins, (scores_cal, scores_test), labels, columns, notes
                )
                cases.append(case)
            progress(
                f"{name} (n={y.size}), seed {seed}: {len(families)} families calibrated "
                f"in {time.monotonic() - start:.1f} s"
            )
    return cases, loaded, notes


def _names(text: str, known: tuple[str, ...], flag: str) -> tuple[str, ...]:
    """The comma-separated names of ``text``, each one of ``known``; exit naming any other."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise SystemExit(
            f"{flag}: unknown {unknown or text!r}; expected some of {', '.join(known)}"
        )
    return names


def main(argv: list[str] | None = None) -> None:
    """Parse the flags, run the protocol, print the tables; ``--json`` writes every case."""
    parser = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2 data sets, 2 families, 1 seed")
    parser.add_argument("--seeds", type=int, help="shuffles per data set (default 5; quick 1)")
    parser.add_argument("--methods", help=f"columns, comma-separated, of: {', '.join(COLUMNS)}")
    parser.add_argument("--datasets", help=f"of: {', '.join(datasets.LOADERS)}")
    parser.add_argument("--families", help=f"of: {', '.join(f.name for f in models.FAMILIES)}")
    parser.add_argument("--json", metavar="PATH", help="write every case's numbers here")
    args = parser.parse_args(argv)
    family_names = tuple(f.name for f in models.FAMILIES)
    names = datasets.QUICK if args.quick else tuple(datasets.LOADERS)
    chosen_families = models.QUICK if args.quick else family_names
    if args.datasets:
        names = _names(args.datasets, tuple(datasets.LOADERS), "--datasets")
    if args.families:
        chosen_families = _names(args.families, family_names, "--families")
    columns = _names(args.methods, COLUMNS, "--methods") if args.methods else COLUMNS
    seeds = args.seeds if args.seeds is not None else (1 if args.quick else 5)
    if seeds < 1:
        parser.error("--seeds: at least 1")
    families = tuple(f for f in models.FAMILIES if f.name in chosen_families)

    start = time.monotonic()
    cases, loaded, notes = run(names, families, seeds, columns)
    elapsed = time.monotonic() - start
    print(report(cases, loaded, [c for c in columns if any(c in k.log_loss for k in cases)], notes))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(
                {
                    "seeds": seeds,
                    "columns": columns,
                    "datasets": [
                        {
                            "name": d.name,
                            "source": d.source,
                            "target": d.target,
                            "rows": int(d.labels.size),
                            "features": int(d.features.shape[1]),
                            "positive_rate": d.positive_rate,
                        }
                        for d in loaded
                    ],
                    "skipped": notes.skipped,
                    "failures": notes.failures,
                    "cases": [asdict(case) for case in cases],
                },
                out,
                indent=1,
                default=lambda value: value.item() if hasattr(value, "item") else str(value),
            )
    progress(f"bench.quality: {len(cases)} cases in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
