"""A stored version's measures that no bins change (smooth ECE, calibration line,
Spiegelhalter, ICI) are computed once per class asked and kept: another ``n_bins``,
``strategy`` or ``bootstrap`` reads them again (issue 25: eight dashboards asking a
6 x 10^6-row version for 10 to 17 bins computed them eight times, 17 s of each 28 s report).
The reports are those an app that keeps nothing computes, bit for bit (and
``tests/calibration/measures/test_bin_free.py``: those of one pass)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from app.main import create_app
from app.service import diagnosis
from app.settings import Settings
from app.store import Database
from tests.client import TestClient

from .helpers import FEW_RESAMPLES, sigmoid_batch
from .test_multiclass import logits_batch

BASE = "/v1/calibrators/churn"

pytestmark = pytest.mark.in_threads  # the spy is on code the report jobs run


def count_calls(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The class index of each computation of a version's bin-free measures."""
    calls: list[int | None] = []
    real: Callable[..., Any] = diagnosis.reliability_bin_free

    def counted(*args: Any, class_index: int | None = None, **kwargs: Any) -> Any:
        calls.append(class_index)
        return real(*args, class_index=class_index, **kwargs)

    monkeypatch.setattr(diagnosis, "reliability_bin_free", counted)
    return calls


@pytest.mark.parametrize("multiclass", [False, True])
def test_other_bins_strategies_and_resamples_reuse_the_measures_no_bins_change(
    monkeypatch: pytest.MonkeyPatch,
    client: TestClient,
    settings: Settings,
    database: Database,
    multiclass: bool,
) -> None:
    body = {**(logits_batch(300) if multiclass else sigmoid_batch(300)), "method": "platt"}
    if multiclass:
        body["method"] = "temperature"
    assert client.post(f"{BASE}/fit", json=body).status_code == 201, body
    calls = count_calls(monkeypatch)
    queries: list[dict[str, Any]] = [
        {"n_bins": 10},
        {"n_bins": 13},
        {"n_bins": 13, "strategy": "quantile"},
        {"n_bins": "auto", "bootstrap": FEW_RESAMPLES},
        {"n_bins": 13, "class_index": 1},
        {"n_bins": 5, "class_index": 1},
    ]
    answers = []
    for query in queries:
        answer = client.get(f"{BASE}/versions/1/diagnostics", params=query)
        assert answer.status_code == 200, answer.text
        answers.append(answer.json())
    assert calls == [None, 1]  # once per class asked, whatever the bins
    for query, kept in zip(queries, answers, strict=True):
        # each query first, in an app that keeps nothing yet: the reports of one pass
        with TestClient(create_app(settings, database=database)) as fresh:
            assert fresh.get(f"{BASE}/versions/1/diagnostics", params=query).json() == kept
    assert calls == [None, 1, *(query.get("class_index") for query in queries)]
