"""The ``source`` of a version adjusted to new class priors: written when
:mod:`app.service.adjustments` stores it, read wherever a version's priors are
(:func:`app.service.estimates.version_priors`)::

    {"adjusted": {"parent_version": 3, "prior_from": 0.25, "prior_to": 0.08,
                  "estimated_from": null}}

A binary version's priors are P(y = 1), as floats; a k-class version's, k-vectors.
``estimated_from`` is null for priors given, and for priors estimated from the parent's
logged traffic ``{"since", "until", "n_predictions", "interval"}`` (the EM estimate's 95%
interval, of P(y = 1) or of each class).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.store import VersionRecord

ADJUSTED = "adjusted"


def adjusted_source(
    parent_version: int,
    prior_from: NDArray[np.float64],
    prior_to: NDArray[np.float64],
    estimated_from: dict[str, Any] | None,
) -> dict[str, Any]:
    """The ``source`` of a version adjusted from ``prior_from`` to ``prior_to`` (k-vectors)."""
    return {
        ADJUSTED: {
            "parent_version": parent_version,
            "prior_from": as_given(prior_from),
            "prior_to": as_given(prior_to),
            "estimated_from": estimated_from,
        }
    }


def adjusted_to(record: VersionRecord) -> NDArray[np.float64] | None:
    """The priors a version was adjusted to, as a k-vector (binary: P(y = 0), P(y = 1));
    None for a version that was fitted."""
    source = record.source
    if not isinstance(source, dict) or not isinstance(source.get(ADJUSTED), dict):
        return None
    return as_vector(source[ADJUSTED]["prior_to"])


def as_vector(prior: float | list[float]) -> NDArray[np.float64]:
    """A prior as its k-vector: a binary P(y = 1) p as (1 - p, p); a list as it is."""
    if isinstance(prior, list):
        return np.asarray(prior, dtype=np.float64)
    return np.array([1.0 - prior, prior])


def as_given(priors: NDArray[np.float64]) -> float | list[float]:
    """A k-vector as a document gives it: P(y = 1) for two classes, else the list."""
    return float(priors[1]) if priors.size == 2 else [float(v) for v in priors]
