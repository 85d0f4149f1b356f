"""Reliability diagrams of stored versions, rendered once per (version, query) and cached.

A version never changes, so its picture for a given bin count, strategy, class and format
never does either: the cache key includes the version's row id (never reused), and entries
only leave the bounded LRU when it is full.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Literal

from app.batch import Batch
from app.diagrams import render_reliability_diagram
from app.resolver import Selector
from app.service import CalibrationService, Strategy

ImageFormat = Literal["png", "svg"]
MEDIA_TYPES: dict[ImageFormat, str] = {"png": "image/png", "svg": "image/svg+xml"}


class PictureCache:
    """A bounded, thread-safe LRU of rendered diagrams."""

    def __init__(self, capacity: int = 128) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[Any, ...], bytes] = OrderedDict()
        self.hits = 0

    def get(self, key: tuple[Any, ...]) -> bytes | None:
        with self._lock:
            image = self._entries.get(key)
            if image is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            return image

    def put(self, key: tuple[Any, ...], image: bytes) -> None:
        with self._lock:
            self._entries[key] = image
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)


def _title(name: str, version: int, method: str, n: int, class_index: int | None) -> str:
    which = "" if class_index is None else f" · class {class_index}"
    return f"{name} v{version} · {method} · n = {n}{which}"


def stored_diagram(
    service: CalibrationService,
    cache: PictureCache,
    name: str,
    selector: Selector,
    *,
    n_bins: int,
    strategy: Strategy,
    class_index: int | None,
    image_format: ImageFormat,
) -> bytes:
    """The diagram of a version's out-of-fold predictions on its fitting batch."""
    with service.database.transaction() as repo:
        record = repo.get_version(name, selector)
    key = (record.id, n_bins, strategy, class_index, image_format)
    image = cache.get(key)
    if image is None:
        _, calibrated, raw = service.diagnose_stored(
            name, record.version, n_bins=n_bins, strategy=strategy, class_index=class_index
        )
        image = render_reliability_diagram(
            calibrated,
            raw,
            title=_title(name, record.version, record.method, record.n_samples, class_index),
            image_format=image_format,
        )
        cache.put(key, image)
    return image


def batch_diagram(
    service: CalibrationService,
    name: str,
    selector: Selector,
    batch: Batch,
    *,
    n_bins: int,
    strategy: Strategy,
    class_index: int | None,
    image_format: ImageFormat,
) -> bytes:
    """The diagram of a version on a fresh labelled batch (not cached: nothing is stored)."""
    version, calibrated, raw = service.diagnose_batch(
        name, selector, batch, n_bins=n_bins, strategy=strategy, class_index=class_index
    )
    method = service.resolve(name, version).method
    return render_reliability_diagram(
        calibrated,
        raw,
        title=_title(name, version, method, batch.n_samples, class_index),
        image_format=image_format,
    )
