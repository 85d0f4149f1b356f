"""app.service.memo.Memo: one computation per key at a time, an LRU bound, a weak variant."""

from __future__ import annotations

import gc
import threading
import time

import pytest

from app.service.memo import Memo


class Value:
    """A result a weak memo can refer to (ints and strings cannot be weakly referred to)."""

    def __init__(self, n: int) -> None:
        self.n = n


def run_together(count: int, call: object) -> list[object]:
    """``call()`` in ``count`` threads released at once; what each returned or raised."""
    barrier = threading.Barrier(count)
    results: list[object] = [None] * count

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = call()  # type: ignore[operator]
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return results


def test_concurrent_callers_share_one_computation() -> None:
    memo: Memo[Value] = Memo(4)
    calls: list[int] = []

    def compute() -> Value:
        calls.append(1)
        time.sleep(0.05)
        return Value(7)

    results = run_together(8, lambda: memo.get_or_compute("k", compute))
    assert len(calls) == 1
    assert {id(r) for r in results} == {id(results[0])}
    assert (memo.misses, memo.hits) == (1, 7)


def test_after_a_failure_the_callers_compute_one_at_a_time() -> None:
    memo: Memo[Value] = Memo(4)
    running = most = calls = 0
    lock = threading.Lock()

    def compute() -> Value:
        nonlocal running, most, calls
        with lock:
            running, calls = running + 1, calls + 1
            most = max(most, running)
            first = calls == 1
        time.sleep(0.1)
        with lock:
            running -= 1
        if first:
            raise RuntimeError("the first try fails")
        return Value(1)

    def call() -> object:
        try:
            return memo.get_or_compute("k", compute)
        except RuntimeError as exc:
            return exc

    results: list[object] = []
    early = [threading.Thread(target=lambda: results.append(call())) for _ in range(2)]
    for thread in early:
        thread.start()
    time.sleep(0.15)  # the first has failed; the second is computing
    late = threading.Thread(target=lambda: results.append(call()))
    late.start()
    for thread in [*early, late]:
        thread.join(10)
    assert most == 1, "two computations of one key ran at once"
    assert calls == 2  # the failed one, then one that the late caller shares
    assert sum(isinstance(r, RuntimeError) for r in results) == 1
    assert sum(isinstance(r, Value) for r in results) == 2


def test_the_least_recently_used_leave_past_the_capacity() -> None:
    memo: Memo[Value] = Memo(2)
    for key in "abc":
        memo.put(key, Value(ord(key)))
    assert memo.get("a") is None
    assert memo.get("b") is not None  # now the most recently used
    memo.put("d", Value(0))
    assert memo.get("c") is None
    assert memo.get("b") is not None


def test_a_weak_memo_keeps_a_result_only_while_it_is_used() -> None:
    memo: Memo[Value] = Memo(0, weak=True)
    held = memo.get_or_compute("k", lambda: Value(3))
    assert memo.get("k") is held
    del held
    gc.collect()
    assert memo.get("k") is None


@pytest.mark.parametrize("capacity", [1, 3])
def test_a_memo_never_holds_more_than_its_capacity(capacity: int) -> None:
    memo: Memo[Value] = Memo(capacity)
    for i in range(10):
        memo.get_or_compute(i, lambda i=i: Value(i))  # type: ignore[misc]
    assert sum(memo.get(i) is not None for i in range(10)) == capacity
