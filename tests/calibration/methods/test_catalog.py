"""The documented parameters of every method are exactly the ones it accepts."""

from __future__ import annotations

import pytest

from app.calibration import METHODS, make_calibrator
from app.calibration.methods.candidates import AutoSpec
from app.calibration.methods.catalog import METHOD_DOCS, params_markdown
from app.calibration.methods.multiclass import make_multiclass
from app.calibration.methods.registry import CAPABILITIES, MULTICLASS_ONLY

TRIMMABLE = ("platt", "isotonic")
BOUNDED = ("platt", "isotonic", "beta", "histogram_binning", "temperature", "bostrom")


def test_the_bounded_methods_declare_it() -> None:
    assert tuple(m for m, c in CAPABILITIES.items() if c.bound) == BOUNDED


def test_every_method_is_documented() -> None:
    assert tuple(METHOD_DOCS) == METHODS


@pytest.mark.parametrize("method", METHODS)
def test_documented_params_are_the_accepted_ones(method: str) -> None:
    documented = set(METHOD_DOCS[method].params)
    # trimming and the bound list their keys only when on
    params = {"trim": "cv"} if method in TRIMMABLE else {}
    params |= {"bound": "laplace"} if method in BOUNDED else {}
    params |= {"mode": "cross"} if method == "venn_abers" else {}  # folds: only when crossing
    if method == "auto":
        accepted = set(AutoSpec.from_params({}).params)
    elif method in MULTICLASS_ONLY:
        accepted = set(make_multiclass(method, params).params)
    else:
        accepted = set(make_calibrator(method, params).params)
    assert documented == accepted


def test_markdown_has_one_row_per_method() -> None:
    rows = params_markdown().splitlines()[2:]
    assert len(rows) == len(METHODS)
    assert all(row.count(" | ") == 3 for row in rows)
