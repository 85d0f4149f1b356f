"""Identical jobs in flight, run once: the requests that ask for the same immutable result
while it is being computed share its one job.

A stored version's report or diagram for a query never changes, and the serving process keeps
it once computed (:class:`~app.service.memo.Memo`). Before it is kept, though, every request
for it started a job of its own: a dashboard opened by a team at nine, or a client retrying a
slow report, sent eight workers to compute one answer eight times. :class:`InFlight` keys the
jobs running in this process: a request whose key is running waits for that job's answer (or
its error) instead of starting another. The job is cancelled only once every request that
waits for it has gone (each client's disconnection is watched on its own), so one impatient
client never takes the answer away from the others.

Keys must name what never changes: a version by its number, never by a selector that moves
(``latest``, an alias), so that a request that arrives after a new fit never shares a job
started before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

from app.errors import ClientGone

T = TypeVar("T")

Gone = Callable[[], Awaitable[object]]
"""Returns once a client (or every client of a shared job) has gone."""


class _Run(Generic[T]):
    """One shared job: its task, how many requests wait for it, and when none does."""

    def __init__(self) -> None:
        self.task: asyncio.Future[T] | None = None
        self.waiting = 0
        self.abandoned = asyncio.Event()

    async def everyone_gone(self) -> None:
        await self.abandoned.wait()


class InFlight:
    """The shared jobs of one server process, by key (see the module docstring)."""

    def __init__(self) -> None:
        self._runs: dict[Hashable, _Run[Any]] = {}

    def __len__(self) -> int:
        """How many keys have a job running."""
        return len(self._runs)

    async def run(
        self,
        key: Hashable,
        gone: Gone | None,
        start: Callable[[Gone], Awaitable[T]],
    ) -> T:
        """The answer of the job for ``key``: the running one's, else that of ``start(gone)``,
        whose ``gone`` returns once every request waiting for it has gone. ``gone`` is this
        request's own (None: it never leaves).

        Raises
        ------
        ClientGone
            When this request's client left before the answer (the job goes on for the
            others, if any).
        (and whatever the job raised, to every request that waited for it)
        """
        shared: _Run[T] | None = self._runs.get(key)
        if shared is None:
            shared = self._start(key, start)
        assert shared.task is not None
        shared.waiting += 1
        watcher = asyncio.ensure_future(gone()) if gone is not None else None
        left = True
        try:
            waited: set[asyncio.Future[Any]] = {shared.task}
            if watcher is not None:
                waited.add(watcher)
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
            if shared.task.done():
                left = False
                return shared.task.result()
            raise ClientGone("the client disconnected before its job ended")
        finally:  # answered, gone, or cancelled itself (the server stops)
            shared.waiting -= 1
            if left and shared.waiting == 0:
                shared.abandoned.set()  # nobody waits: the job stops at its next checkpoint
                if self._runs.get(key) is shared:
                    del self._runs[key]  # a request that comes now starts afresh
            if watcher is not None:
                watcher.cancel()
                watcher.add_done_callback(_seen)

    def _start(self, key: Hashable, start: Callable[[Gone], Awaitable[T]]) -> _Run[T]:
        shared: _Run[T] = _Run()
        shared.task = asyncio.ensure_future(start(shared.everyone_gone))
        self._runs[key] = shared

        def ended(task: asyncio.Future[T]) -> None:
            _seen(task)  # its outcome is each waiter's; an abandoned job's is nobody's
            if self._runs.get(key) is shared:
                del self._runs[key]

        shared.task.add_done_callback(ended)
        return shared


def _seen(task: asyncio.Future[Any]) -> None:
    """Mark a finished task's outcome as retrieved (asyncio logs one that never is)."""
    if not task.cancelled():
        task.exception()
