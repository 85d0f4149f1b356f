"""Helpers for the store tests: a factory of complete, valid new versions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from app.store import NewVersion, encode_artifact, encode_batch

MakeVersion = Callable[..., NewVersion]


@pytest.fixture
def make_version() -> MakeVersion:
    """``make_version(method="platt", **overrides)``: a NewVersion with real blobs."""

    def make(method: str = "platt", **overrides: Any) -> NewVersion:
        scores = np.linspace(0.05, 0.95, 20)
        labels = (scores > 0.5).astype(np.int64)
        state = {"A": -1.25, "B": 0.5}
        fields: dict[str, Any] = {
            "method": method,
            "params": {"prior_correction": True},
            "n_samples": 20,
            "n_positive": int(labels.sum()),
            "n_classes": 2,
            "class_counts": [20 - int(labels.sum()), int(labels.sum())],
            "description": "",
            "tags": {},
            "metrics": {"cv": {"brier": 0.1}, "raw": {"brier": 0.2}},
            "selection": None,
            "artifact": encode_artifact(method, {"prior_correction": True}, state),
            "batch": encode_batch(scores, labels, np.ones(20), scores),
        }
        fields.update(overrides)
        return NewVersion(**fields)

    return make
