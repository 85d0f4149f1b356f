"""Rows of ratios, the median timer, and the markdown table they print as."""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """A bound on a ratio: ``ratio <= bound`` (``at_least=False``) or ``ratio >= bound``."""

    bound: float
    at_least: bool = False

    def met(self, ratio: float) -> bool:
        """Whether ``ratio`` is within the bound."""
        return ratio >= self.bound if self.at_least else ratio <= self.bound

    def __str__(self) -> str:
        return f"{'>=' if self.at_least else '<='} {self.bound:g}"


@dataclass(frozen=True)
class Row:
    """One line of the table: ours and the reference in ``unit``, and their ratio."""

    group: str
    name: str
    size: str
    ours: float
    reference: float
    unit: str = "ms"
    target: Target | None = None
    absolute: bool = False
    """The target bounds ``ours`` itself (e.g. gigabytes), not the ratio."""

    @property
    def ratio(self) -> float:
        """ours / reference."""
        return self.ours / self.reference if self.reference > 0 else math.inf

    def cells(self) -> list[str]:
        """The row's cells, in the order of :data:`HEADER`."""
        if self.target is None:
            target, mark = "", ""
        else:
            value = self.ours if self.absolute else self.ratio
            target = f"{self.target} {self.unit}" if self.absolute else str(self.target)
            mark = "pass" if self.target.met(value) else "FAIL"
        return [
            self.group,
            self.name,
            self.size,
            f"{self.ours:.4g} {self.unit}",
            f"{self.reference:.4g} {self.unit}",
            f"{self.ratio:.3f}",
            target,
            mark,
        ]


HEADER = ["group", "benchmark", "n", "ours", "reference", "ratio", "target", "met"]


def markdown(rows: list[Row]) -> str:
    """The rows as one markdown table."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)


def median_seconds(run: Callable[[], object], repeat: int, warmup: int = 1) -> float:
    """The median wall time of ``repeat`` calls of ``run``, after ``warmup`` unmeasured calls."""
    return statistics.median(_times(run, repeat, warmup))


def best_seconds(run: Callable[[], object], repeat: int, warmup: int = 1) -> float:
    """The shortest wall time of ``repeat`` calls of ``run``, after ``warmup`` unmeasured."""
    return min(_times(run, repeat, warmup))


def _times(run: Callable[[], object], repeat: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def compare_ms(
    ours: Callable[[], object], reference: Callable[[], object], repeat: int, warmup: bool = True
) -> tuple[float, float]:
    """Median milliseconds of ``ours`` and ``reference``, their runs interleaved so that a
    busy machine slows both alike; one unmeasured call of each first unless ``warmup`` is off."""
    if warmup:
        ours()
        reference()
    a: list[float] = []
    b: list[float] = []
    for _ in range(repeat):
        a.append(median_seconds(ours, 1, warmup=0))
        b.append(median_seconds(reference, 1, warmup=0))
    return 1e3 * statistics.median(a), 1e3 * statistics.median(b)


def progress(message: str) -> None:
    """A line on stderr, so that stdout is the table only."""
    print(message, file=sys.stderr, flush=True)


def size_label(n: int) -> str:
    """1e6 for 1_000_000."""
    exponent = round(math.log10(n)) if n > 0 else 0
    return f"1e{exponent}" if 10**exponent == n else str(n)
