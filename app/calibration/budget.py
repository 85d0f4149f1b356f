"""Where a long computation may stop: the time budget and the client of the running job.

The service runs fits and diagnostics as jobs (:mod:`app.work`) with a time budget, and stops
a job whose client has gone. Threads cannot be killed, so the calibration code calls
:func:`checkpoint` between its steps (each fold, each candidate, each grid point): free when
no job is running, it raises :class:`Abandoned` once the job's budget is spent or its client
has gone. The budget travels in a context variable, which :func:`in_context` carries into
joblib's helper threads.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class Abandoned(Exception):
    """Raised by :func:`checkpoint` in a job whose budget is spent or whose client left."""


@dataclass
class Budget:
    """When the running job must stop, and whether its client has gone."""

    seconds: float
    deadline: float = float("inf")
    gone: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        self.deadline = time.monotonic() + self.seconds

    def check(self) -> None:
        if self.gone.is_set():
            raise Abandoned("the client disconnected")
        if time.monotonic() > self.deadline:
            raise Abandoned(f"the job ran past its budget of {self.seconds:g} s")


_budget: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("budget", default=None)


def enter(budget: Budget) -> None:
    """Start ``budget``'s clock and make it the running job's (in this thread's context)."""
    budget.start()
    _budget.set(budget)


def checkpoint() -> None:
    """Stop the current job here (:class:`Abandoned`) if it is over budget or unwanted.

    Free outside a pooled job; call it between steps of long computations, never inside a
    step (it is cheap, but a step is what is lost when it fires).
    """
    budget = _budget.get()
    if budget is not None:
        budget.check()


def in_context(function: Callable[P, T]) -> Callable[P, T]:
    """``function`` run in a copy of the caller's context: helper threads (joblib's) then
    see the job's budget, so :func:`checkpoint` works in them too."""
    context = contextvars.copy_context()

    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return context.copy().run(function, *args, **kwargs)

    return run
