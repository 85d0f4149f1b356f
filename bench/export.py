"""``python -m bench.export``: ONNX exports on real classifiers' scores, run in ONNX Runtime.

For each data set of :mod:`bench.datasets` and model family of :mod:`bench.models` (seed 0,
``bench.quality``'s split), every binary method is fitted on the calibration scores with the
service's numerics and exported (:func:`app.export.export_onnx`, DOUBLE and FLOAT); ONNX
Runtime then runs the graph on the test scores plus the exporter's own probes (every knot,
its neighbouring floats, the points between, far values), and the largest |graph - predict|
per method is reported, with the export's time and size. A k-class part does the same for
``digits``' ten classes scored by a multinomial logistic regression. ``--quick``: two data
sets, two families. The table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from typing import Any

import numpy as np
import onnxruntime as ort
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

from app.calibration import (
    BINARY_ONLY,
    CALIBRATOR_METHODS,
    MULTICLASS_ONLY,
    PROBABILITY_METHODS,
    fit_calibrator,
)
from app.export import FLOAT32_BOUND, PARITY_BOUND, export_onnx, largest_gap
from app.export.probes import probe_scores
from bench import datasets, models
from bench.protocol import split
from bench.table import progress

_BINARY = tuple(m for m in (*CALIBRATOR_METHODS, "auto") if m not in MULTICLASS_ONLY)
_MULTICLASS = tuple(m for m in (*CALIBRATOR_METHODS, "auto") if m not in BINARY_ONLY)


class Worst:
    """The largest differences and costs seen per method."""

    def __init__(self) -> None:
        self.double: dict[str, float] = defaultdict(float)
        self.single: dict[str, float] = defaultdict(float)
        self.ms: dict[str, float] = defaultdict(float)
        self.kb: dict[str, float] = defaultdict(float)
        self.cases: dict[str, int] = defaultdict(int)

    def check(self, label: str, calibrator: Any, k: int, scores: np.ndarray) -> None:
        """Export ``calibrator`` both ways and run each graph on ``scores`` and the probes."""
        grid = np.concatenate([scores, probe_scores(calibrator, k)])
        started = time.perf_counter()
        double = export_onnx(calibrator, k)
        self.ms[label] = max(self.ms[label], (time.perf_counter() - started) * 1000)
        self.kb[label] = max(self.kb[label], len(double.model) / 1024)
        self.double[label] = max(self.double[label], _gap(double.model, calibrator, grid))
        single = export_onnx(calibrator, k, dtype="float32")
        with np.errstate(over="ignore"):
            rounded = grid.astype(np.float32)
        same = np.isfinite(rounded) == np.isfinite(grid)  # 1e308 has no float32
        kept = same if k == 2 else same.all(axis=1)
        self.single[label] = max(self.single[label], _gap(single.model, calibrator, rounded[kept]))
        self.cases[label] += 1

    def table(self, title: str) -> str:
        """A markdown table, one row per method."""
        lines = [
            f"### {title}",
            "",
            f"| method | cases | worst DOUBLE | worst FLOAT | within {PARITY_BOUND:g} and "
            f"{FLOAT32_BOUND:.6g} | export ms (max) | model KB (max) |",
            "|---|---|---|---|---|---|---|",
        ]
        for label in sorted(self.cases):
            within = self.double[label] <= PARITY_BOUND and self.single[label] <= FLOAT32_BOUND
            lines.append(
                f"| {label} | {self.cases[label]} | {self.double[label]:.3g} "
                f"| {self.single[label]:.6g} | {'yes' if within else 'NO'} "
                f"| {self.ms[label]:.1f} | {self.kb[label]:.0f} |"
            )
        return "\n".join(lines)


def _gap(model: bytes, calibrator: Any, scores: np.ndarray) -> float:
    """The largest |ONNX Runtime - predict| over every output, on ``scores`` (NaN against
    NaN: none; NaN against a number: infinite)."""
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    answers = dict(zip(names, session.run(None, {"scores": scores}), strict=True))
    widened = scores.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        expected = {"probabilities": calibrator.predict(widened)}
    if "p0" in answers:
        expected["p0"], expected["p1"] = calibrator.predict_interval(widened)
    return max(largest_gap(answers[n].astype(np.float64), expected[n]) for n in names)


def binary(names: tuple[str, ...], families: tuple[models.Family, ...]) -> Worst:
    """Every binary method on every data set x family (seed 0)."""
    worst = Worst()
    for name in names:
        data = datasets.load(name)
        train, cal, test = split(data.labels.size, 0)
        y_cal = data.labels[cal].astype(np.float64)
        for family in families:
            X = data.features
            s_cal, s_test = family.scores(0, X[train], data.labels[train], X[cal], X[test])
            in_unit = bool(np.all((s_cal > 0.0) & (s_cal < 1.0)))
            for method in _BINARY:
                if method in PROBABILITY_METHODS and not in_unit:
                    continue
                outcome = fit_calibrator(method, {}, s_cal, y_cal, None)
                label = outcome.method if method != "auto" else f"auto → {outcome.method}"
                worst.check(label, outcome.calibrator, 2, s_test)
        progress(f"export parity: {name} done")
    return worst


def multiclass() -> Worst:
    """Every k-class method on digits' ten classes (logistic regression probabilities)."""
    X, y = load_digits(return_X_y=True)
    train, cal, test = split(y.size, 0)
    model = LogisticRegression(max_iter=2000).fit(X[train], y[train])
    p_cal, p_test = model.predict_proba(X[cal]), model.predict_proba(X[test])
    worst = Worst()
    for method in _MULTICLASS:
        for label, (s_cal, s_test) in {
            "probabilities": (p_cal, p_test),
            "logits": (np.log(p_cal), np.log(p_test)),
        }.items():
            if method in (*PROBABILITY_METHODS, "bostrom") and label == "logits":
                continue
            outcome = fit_calibrator(method, {}, s_cal, y[cal], None)
            worst.check(f"{outcome.method} ({label})", outcome.calibrator, 10, s_test)
    progress("export parity: digits, 10 classes, done")
    return worst


def main(argv: list[str] | None = None) -> None:
    """Run both parts and print their tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.export", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2 data sets, 2 families")
    quick = parser.parse_args(argv).quick
    names = datasets.QUICK if quick else tuple(datasets.LOADERS)
    families = tuple(f for f in models.FAMILIES if not quick or f.name in models.QUICK)
    started = time.monotonic()
    print(
        binary(names, families).table(f"Binary: {len(names)} data sets x {len(families)} families")
    )
    print()
    print(multiclass().table("k-class: digits, 10 classes"))
    progress(f"export bench done in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
