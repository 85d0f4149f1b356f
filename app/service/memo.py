"""A bounded, thread-safe memo of immutable results, computed once per key.

What a stored version yields (its reliability report for a query, its diagram, its decoded
fitting batch) never changes: its name and number are never given out again, so a key that
starts with them names one result forever. :class:`Memo` keeps the most recently used
results up to a capacity, and computes a missing one once however many requests ask for it
at the same time (the others wait for it), so eight concurrent requests for one diagram cost
one computation, not eight.

A memo made with ``weak=True`` keeps a result only while someone still uses it: large
intermediate results (a decoded 10^7-row batch) are shared by the computations running at
the same time, and freed with the last of them.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, MutableMapping
from typing import Generic, TypeVar

from app.calibration import checkpoint

V = TypeVar("V")

WAIT_STEP_SECONDS = 0.05
"""How often a caller waiting for another's computation checks its own budget."""


class _Gate:
    """The lock one key's computations take in turn, and how many callers hold it or wait."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


class Memo(Generic[V]):
    """An LRU of at most ``capacity`` results (a weak memo: whatever is in use), with one
    computation at a time per missing key."""

    def __init__(self, capacity: int, *, weak: bool = False) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._entries: MutableMapping[Hashable, V] = (
            weakref.WeakValueDictionary() if weak else OrderedDict()
        )
        self._computing: dict[Hashable, _Gate] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> V | None:
        """The result for ``key`` if present (and now the most recently used)."""
        with self._lock:
            return self._hit(key)

    def get_or_compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The result for ``key``, computing it if missing; concurrent callers with the same
        key wait for one computation (if it raises, the next waiter tries its own, while
        callers that come meanwhile wait behind it)."""
        with self._lock:
            found = self._hit(key)
            if found is not None:
                return found
            gate = self._computing.setdefault(key, _Gate())
            gate.users += 1
        try:
            while not gate.lock.acquire(timeout=WAIT_STEP_SECONDS):
                checkpoint()  # a waiter's own job may be over its budget, or its client gone
            try:
                with self._lock:
                    found = self._hit(key)
                    if found is not None:
                        return found
                    self.misses += 1
                value = compute()
                self.put(key, value)
                return value
            finally:
                gate.lock.release()
        finally:
            with self._lock:
                gate.users -= 1
                if gate.users == 0:
                    del self._computing[key]

    def put(self, key: Hashable, value: V) -> None:
        """Keep ``value`` for ``key`` (the least recently used leave past the capacity)."""
        with self._lock:
            self._entries[key] = value
            if isinstance(self._entries, OrderedDict):
                self._entries.move_to_end(key)
                while len(self._entries) > self._capacity:
                    self._entries.popitem(last=False)

    def _hit(self, key: Hashable) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            if isinstance(self._entries, OrderedDict):
                self._entries.move_to_end(key)
            self.hits += 1
        return value
