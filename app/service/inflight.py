"""Identical jobs in flight, run once: the requests that ask for the same immutable result
while it is being computed share its one job.

A stored version's report or diagram for a query never changes, and each server process
keeps it once computed (:class:`~app.service.memo.Memo`). Before it is kept, though, every
request for it started a job of its own: a dashboard opened by several people at once sent
several workers to compute one answer. :class:`InFlight` keys the jobs running in one server
process: a request whose key is running waits for that job's answer (or its error) instead of
starting another. The job is abandoned only once every request waiting for it has gone (each
client's disconnection is watched on its own), so one impatient client never takes the answer
away from the others; a client that leaves is answered at once, while the job goes on for
the rest. The job runs in the context of the request that started it: its logs carry that
request's id.

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
    """One shared job: its task, how many requests wait for it, and whether none does."""

    def __init__(self, start: Callable[[Gone], Awaitable[T]]) -> None:
        self.waiting = 0
        self.abandoned = asyncio.Event()
        self.task: asyncio.Future[T] = asyncio.ensure_future(start(self.everyone_gone))

    async def everyone_gone(self) -> None:
        await self.abandoned.wait()


class InFlight:
    """The shared jobs of one server process, by key (see the module docstring)."""

    def __init__(self) -> None:
        self._runs: dict[Hashable, _Run[Any]] = {}
        self._tasks: set[asyncio.Future[Any]] = set()  # every job not ended, abandoned included

    def __len__(self) -> int:
        """How many keys have a job that requests may join."""
        return len(self._runs)

    async def run(
        self,
        key: Hashable,
        gone: Gone | None,
        start: Callable[[Gone], Awaitable[T]],
    ) -> T:
        """The answer of the job for ``key``: the running one's, else that of ``start(gone)``,
        whose ``gone`` returns once every request waiting for it has gone. ``gone`` is this
        request's own (None: it never leaves). Nothing is awaited before the job is joined
        or started, so a caller that found no kept answer just before joins or starts one.

        Raises
        ------
        ClientGone
            When this request's client left before the answer (the job goes on for the
            others, if any).
        (and whatever the job raised, to every request that waited for it)
        """
        shared: _Run[T] = self._runs.get(key) or self._start(key, start)
        watcher: asyncio.Future[object] | None = None
        left = True
        try:
            shared.waiting += 1
            waited: set[asyncio.Future[Any]] = {shared.task}
            if gone is not None:
                watcher = asyncio.ensure_future(gone())
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
                watcher.add_done_callback(outcome_seen)

    def _start(self, key: Hashable, start: Callable[[Gone], Awaitable[T]]) -> _Run[T]:
        shared = _Run(start)
        self._runs[key] = shared
        self._tasks.add(shared.task)

        def ended(task: asyncio.Future[T]) -> None:
            self._tasks.discard(task)
            outcome_seen(task)  # its outcome is each waiter's; an abandoned job's is nobody's
            if self._runs.get(key) is shared:
                del self._runs[key]

        shared.task.add_done_callback(ended)
        return shared


def outcome_seen(task: asyncio.Future[Any]) -> None:
    """Mark a finished task's outcome as retrieved: asyncio logs an error nobody retrieved,
    and a watcher's or an abandoned job's is of no interest."""
    if not task.cancelled():
        task.exception()
