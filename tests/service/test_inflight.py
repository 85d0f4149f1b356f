"""app.service.inflight.InFlight: requests for one key while its job runs share that job; the
job stops only once every one of them has gone."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from app.errors import ClientGone
from app.service.inflight import Gone, InFlight


class Jobs:
    """Jobs that run until released, counting how many started and which were told that
    everyone had gone (as :meth:`WorkPool.supervise` is, by its watcher)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.abandoned: list[str] = []
        self.release = asyncio.Event()

    def start(
        self, answer: str, error: Exception | None = None, *, stops: bool = True
    ) -> Callable[[Gone], Awaitable[str]]:
        """A job answering ``answer`` (or raising ``error``) once released; told that everyone
        has gone, it stops at once, or, with ``stops`` False, runs on until released (a job
        past its last checkpoint)."""

        async def job(gone: Gone) -> str:
            self.started.append(answer)
            watch = asyncio.ensure_future(gone())
            released = asyncio.ensure_future(self.release.wait())
            await asyncio.wait({watch, released}, return_when=asyncio.FIRST_COMPLETED)
            if watch.done():
                self.abandoned.append(answer)
                if stops:
                    released.cancel()
                    raise ClientGone("abandoned")
                await released
            watch.cancel()
            if error is not None:
                raise error
            return answer

        return job


def client() -> tuple[asyncio.Event, Gone]:
    """A client's disconnection: set the event to make it leave."""
    left = asyncio.Event()

    async def gone() -> None:
        await left.wait()

    return left, gone


async def settle() -> None:
    """Let every ready task run up to its next wait."""
    for _ in range(5):
        await asyncio.sleep(0)


def test_requests_for_one_key_share_one_job_and_other_keys_run_their_own() -> None:
    async def main() -> None:
        flight, jobs = InFlight(), Jobs()
        asks = [
            asyncio.ensure_future(flight.run(key, None, jobs.start(f"answer {key}")))
            for key in ("a", "a", "a", "b", "a")
        ]
        await settle()
        assert sorted(jobs.started) == ["answer a", "answer b"]
        assert len(flight) == 2
        jobs.release.set()
        assert await asyncio.gather(*asks) == ["answer a"] * 3 + ["answer b", "answer a"]
        assert len(flight) == 0
        # once answered, the key is free: the next request starts a job of its own
        assert await flight.run("a", None, jobs.start("again")) == "again"
        assert jobs.started == ["answer a", "answer b", "again"]

    asyncio.run(main())


def test_the_error_of_a_shared_job_reaches_every_request() -> None:
    async def main() -> None:
        flight, jobs = InFlight(), Jobs()
        failing = jobs.start("x", ValueError("the batch is corrupt"))
        asks = [asyncio.ensure_future(flight.run("k", None, failing)) for _ in range(3)]
        await settle()
        jobs.release.set()
        results = await asyncio.gather(*asks, return_exceptions=True)
        assert [type(r) for r in results] == [ValueError] * 3
        assert jobs.started == ["x"]

    asyncio.run(main())


def test_a_client_that_leaves_gets_client_gone_and_the_others_still_get_the_answer() -> None:
    async def main() -> None:
        flight, jobs = InFlight(), Jobs()
        clients = [client() for _ in range(3)]
        asks = [
            asyncio.ensure_future(flight.run("k", gone, jobs.start("answer")))
            for _, gone in clients
        ]
        await settle()
        clients[0][0].set()  # the first, whose request started the job, leaves
        clients[2][0].set()
        await settle()
        assert jobs.abandoned == []
        jobs.release.set()
        results = await asyncio.gather(*asks, return_exceptions=True)
        assert isinstance(results[0], ClientGone)
        assert results[1] == "answer"
        assert isinstance(results[2], ClientGone)
        assert jobs.started == ["answer"]

    asyncio.run(main())


def test_the_job_is_abandoned_once_every_client_has_left_and_the_next_request_starts_afresh() -> (
    None
):
    async def main() -> None:
        flight, jobs = InFlight(), Jobs()
        clients = [client() for _ in range(2)]
        asks = [
            asyncio.ensure_future(flight.run("k", gone, jobs.start("first"))) for _, gone in clients
        ]
        await settle()
        for left, _ in clients:
            left.set()
        results = await asyncio.gather(*asks, return_exceptions=True)
        assert all(isinstance(r, ClientGone) for r in results)
        await settle()
        assert jobs.abandoned == ["first"]
        assert len(flight) == 0
        later = asyncio.ensure_future(flight.run("k", None, jobs.start("second")))
        await settle()
        jobs.release.set()
        assert await later == "second"
        assert jobs.started == ["first", "second"]

    asyncio.run(main())


def test_a_request_cancelled_while_it_waits_counts_as_gone() -> None:
    async def main() -> None:
        flight, jobs = InFlight(), Jobs()
        ask = asyncio.ensure_future(flight.run("k", None, jobs.start("answer")))
        await settle()
        ask.cancel()
        with pytest.raises(asyncio.CancelledError):
            await ask
        await settle()
        assert jobs.abandoned == ["answer"]  # its only request was cancelled: the job stops
        assert len(flight) == 0

    asyncio.run(main())


def test_a_request_after_the_last_one_left_starts_afresh_while_the_old_job_runs_out() -> None:
    async def main() -> None:
        flight, jobs = InFlight(), Jobs()
        left, gone = client()
        first = asyncio.ensure_future(flight.run("k", gone, jobs.start("old", stops=False)))
        await settle()
        left.set()
        with pytest.raises(ClientGone):
            await first
        await settle()
        assert jobs.abandoned == ["old"]  # told, but past its last checkpoint: it runs on
        later = asyncio.ensure_future(flight.run("k", None, jobs.start("new")))
        await settle()
        assert jobs.started == ["old", "new"]  # the abandoned job was not joined
        jobs.release.set()
        assert await later == "new"
        await settle()
        assert len(flight) == 0

    asyncio.run(main())
