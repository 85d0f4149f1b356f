"""Where a long computation may stop: its time budget, and a cancellation from outside.

Whoever runs a computation as a job (the service's :mod:`app.service.work`) may give it a
:class:`Budget`: a number of seconds, and a flag it sets when the result is no longer wanted.
Threads cannot be killed, so the calibration code calls :func:`checkpoint` between its steps
(each fold, each candidate, each grid point, each block of a measure): free when no budget is
set, it raises :class:`Abandoned` once the budget is spent or the job was cancelled. The
budget travels in a context variable, which :func:`in_context` carries into joblib's helper
threads.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class Abandoned(Exception):
    """Raised by :func:`checkpoint` in a job whose budget is spent or that was cancelled."""


class Flag(Protocol):
    """What a job's cancellation is: a :class:`threading.Event`, or a process-shared one
    (``multiprocessing``'s) when the job runs in another process than the one that cancels."""

    def is_set(self) -> bool: ...

    def set(self) -> None: ...


@dataclass
class Budget:
    """When the running job must stop, and whether it was cancelled (``cancelled.set()``)."""

    seconds: float
    deadline: float = float("inf")
    cancelled: Flag = field(default_factory=threading.Event)

    def start(self) -> None:
        """Start the clock: the job has ``seconds`` from now."""
        self.deadline = time.monotonic() + self.seconds

    def check(self) -> None:
        """:class:`Abandoned` if the job was cancelled or is past its deadline."""
        if self.cancelled.is_set():
            raise Abandoned("the job was cancelled")
        if time.monotonic() > self.deadline:
            raise Abandoned(f"the job ran past its budget of {self.seconds:g} s")


_budget: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("budget", default=None)


def enter(budget: Budget) -> None:
    """Start ``budget``'s clock and make it the running job's (in this thread's context)."""
    budget.start()
    _budget.set(budget)


def current() -> Budget | None:
    """The running job's budget (None outside a job): what a job hands on to the process
    that computes it for it."""
    return _budget.get()


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
    see the job's budget, so :func:`checkpoint` works in them too. Call it in the job's own
    thread, never inside the generator of tasks handed to joblib: joblib draws that
    generator's later items from a thread of its own, whose context has no budget."""
    context = contextvars.copy_context()

    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return context.copy().run(function, *args, **kwargs)

    return run
