"""GET and POST diagnostics against scikit-learn's calibration_curve and metrics."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

from app.main import create_app
from app.settings import Settings
from app.store import Database
from tests.client import TestClient

from .helpers import FEW_RESAMPLES, assert_problem, sigmoid_batch

BASE = "/v1/calibrators/churn"


@pytest.fixture
def fitted(client: TestClient) -> dict[str, object]:
    r = client.post(f"{BASE}/fit", json={**sigmoid_batch(600, seed=11), "method": "platt"})
    assert r.status_code == 201
    body: dict[str, object] = r.json()
    return body


def test_stored_diagnostics_always_have_n_bins_rows(
    client: TestClient, fitted: dict[str, object]
) -> None:
    for n_bins in (2, 10, 37, 100):
        for strategy in ("uniform", "quantile"):
            query = {"n_bins": n_bins, "strategy": strategy, "bootstrap": FEW_RESAMPLES}
            r = client.get(f"{BASE}/versions/latest/diagnostics", params=query)
            assert r.status_code == 200, r.text
            d = r.json()
            assert d["version"] == 1
            assert d["n_bins"] == n_bins
            assert d["strategy"] == strategy
            for part in ("calibrated", "raw"):
                bins = d[part]["bins"]
                assert len(bins) == n_bins
                assert sum(b["count"] for b in bins) == 600
                for b in bins:
                    if b["count"] == 0:
                        assert b["mean_predicted"] is None
                        assert b["fraction_positive"] is None
                    else:
                        assert b["ci_low"] <= b["fraction_positive"] <= b["ci_high"]
                assert {
                    "brier",
                    "log_loss",
                    "ece",
                    "mce",
                    "auc",
                    "reliability",
                    "resolution",
                    "uncertainty",
                } <= d[part]["metrics"].keys()


def test_posted_batch_diagnostics_match_scikit_learn(
    client: TestClient, fitted: dict[str, object]
) -> None:
    fresh = sigmoid_batch(1000, seed=99)
    # the default bootstrap, as a client asks: its report's numbers against the references
    r = client.post(f"{BASE}/versions/1/diagnostics", json={**fresh, "n_bins": 10})
    assert r.status_code == 200, r.text
    d = r.json()
    p = np.array(
        client.post(f"{BASE}/predict", json={"scores": fresh["scores"], "version": 1}).json()[
            "probabilities"
        ]
    )
    y = np.array(fresh["labels"])
    prob_true, prob_pred = calibration_curve(y, p, n_bins=10, strategy="uniform")
    bins = [b for b in d["calibrated"]["bins"] if b["count"] > 0]
    np.testing.assert_allclose([b["fraction_positive"] for b in bins], prob_true, atol=1e-12)
    np.testing.assert_allclose([b["mean_predicted"] for b in bins], prob_pred, atol=1e-12)
    m = d["calibrated"]["metrics"]
    assert abs(m["brier"] - brier_score_loss(y, p)) < 1e-12
    assert abs(m["log_loss"] - log_loss(y, p)) < 1e-9
    assert abs(m["auc"] - roc_auc_score(y, p)) < 1e-12
    # ECE by definition over the same bins.
    counts = np.array([b["count"] for b in bins])
    ece = np.sum(counts / counts.sum() * np.abs(prob_true - prob_pred))
    assert abs(m["ece"] - ece) < 1e-12
    # Nothing was stored by the POST.
    assert client.get(f"{BASE}").json()["n_versions"] == 1


def test_posted_diagnostics_bad_input(client: TestClient, fitted: dict[str, object]) -> None:
    url = f"{BASE}/versions/1/diagnostics"
    assert_problem(client.post(url, json={"scores": [0.1], "labels": [0, 1]}), 422, "labels")
    assert_problem(
        client.post(url, json={"scores": [0.1, 0.2], "labels": [0, 1], "n_bins": 1}), 422, "n_bins"
    )
    assert_problem(
        client.post(url, json={"scores": [0.1, 0.2], "labels": [0, 1], "strategy": "x"}),
        422,
        "strategy",
    )
    good = {"scores": [0.1, 0.2], "labels": [0, 1]}
    assert_problem(client.post(f"{BASE}/versions/7/diagnostics", json=good), 404, "7")


def test_posted_diagnostics_new_measures_match_their_references(
    client: TestClient, fitted: dict[str, object]
) -> None:
    """smooth ECE and its width against relplot, ICI against statsmodels' LOWESS, slope and
    intercept against statsmodels' GLM, Spiegelhalter's z by its closed form, all through the
    API on a fresh batch."""
    import relplot
    import statsmodels.api as sm
    from statsmodels.nonparametric.smoothers_lowess import lowess

    fresh = sigmoid_batch(1500, seed=5, a=3.0, b=1.0)  # miscalibrated for version 1
    r = client.post(f"{BASE}/versions/1/diagnostics?bootstrap=200", json=fresh)
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["bootstrap"] == 200
    p = np.array(
        client.post(f"{BASE}/predict", json={"scores": fresh["scores"], "version": 1}).json()[
            "probabilities"
        ]
    )
    y = np.array(fresh["labels"], dtype=float)
    m = d["calibrated"]["metrics"]
    value, width = relplot.smECE(p, y, eps=0.001, return_width=True)
    assert m["smooth_ece"] == pytest.approx(value, abs=1e-9)
    assert m["smooth_ece_sigma"] == width
    assert d["calibrated"]["smooth"]["sigma"] == width
    smoothed = lowess(y, p, frac=0.75, it=0, delta=0.0, return_sorted=False)
    assert m["ici"] == pytest.approx(np.abs(p - smoothed).mean(), abs=1e-6)
    assert m["ici_emax"] == pytest.approx(np.abs(p - smoothed).max(), abs=1e-4)
    z = np.log(p / (1 - p))
    glm = sm.GLM(y, sm.add_constant(z), family=sm.families.Binomial()).fit()
    assert m["calibration_slope"] == pytest.approx(glm.params[1], abs=1e-6)
    offset = sm.GLM(y, np.ones_like(z), family=sm.families.Binomial(), offset=z).fit()
    assert m["calibration_intercept"] == pytest.approx(offset.params[0], abs=1e-6)
    spiegelhalter = np.sum((y - p) * (1 - 2 * p)) / np.sqrt(np.sum((1 - 2 * p) ** 2 * p * (1 - p)))
    assert m["spiegelhalter_z"] == pytest.approx(spiegelhalter, abs=1e-9)
    # every headline measure has its interval, around its value (ECE's may end below it)
    intervals = m["intervals"]
    for name in ("log_loss", "brier", "auc", "calibration_slope", "calibration_intercept"):
        low, high = intervals[name]
        assert low <= m[name] <= high, name
    for name in ("ece", "smooth_ece"):
        low, high = intervals[name]
        assert 0 <= low <= high, name
    assert intervals["smooth_ece"][0] > 0  # this batch is visibly miscalibrated
    curve = d["calibrated"]["smooth"]
    assert len(curve["x"]) == len(curve["y"]) == len(curve["low"]) == len(curve["density"]) == 200
    inside = np.array(curve["density"]) > 0.5  # where the predictions are, the band holds y
    assert np.all(np.array(curve["low"])[inside] <= np.array(curve["y"])[inside] + 1e-3)
    assert np.all(np.array(curve["y"])[inside] <= np.array(curve["high"])[inside] + 1e-3)


def test_bootstrap_is_seeded_and_zero_turns_it_off(
    client: TestClient, fitted: dict[str, object], settings: Settings, database: Database
) -> None:
    """The same resamples on every computation: a second app on the same database (its
    report cache empty) computes the same intervals again."""
    url = f"{BASE}/versions/1/diagnostics"
    first = client.get(f"{url}?bootstrap=100").json()
    with TestClient(create_app(settings, database=database)) as other:
        again = other.get(f"{url}?bootstrap=100").json()
    assert {"log_loss", "ece", "smooth_ece"} <= first["calibrated"]["metrics"]["intervals"].keys()
    assert (
        first["calibrated"]["metrics"]["intervals"] == again["calibrated"]["metrics"]["intervals"]
    )
    off = client.get(f"{url}?bootstrap=0").json()
    assert off["bootstrap"] == 0
    assert "intervals" not in off["calibrated"]["metrics"]
    assert off["calibrated"]["smooth"]["low"] is None
    assert (
        off["calibrated"]["metrics"]["smooth_ece"] == first["calibrated"]["metrics"]["smooth_ece"]
    )
    assert_problem(client.get(f"{url}?bootstrap=10001"), 422, "bootstrap")
    assert_problem(client.get(f"{url}?bootstrap=-1"), 422, "bootstrap")


def test_n_bins_takes_ascii_digits_whole_numbers_and_auto(
    client: TestClient, fitted: dict[str, object]
) -> None:
    url = f"{BASE}/versions/1/diagnostics"
    for given in ("12", "+12", " 12 "):
        r = client.get(url, params={"n_bins": given, "bootstrap": 0})
        assert r.status_code == 200, (given, r.text)
        assert r.json()["n_bins"] == 12
    fresh = {**sigmoid_batch(200, seed=2), "n_bins": 12.0, "bootstrap": 0}  # as before
    assert client.post(url, json=fresh).json()["n_bins"] == 12
    for bad in ("²", "٣", "1.5", "1e1", "true", ""):
        assert_problem(client.get(url, params={"n_bins": bad}), 422, "n_bins")
    for bad_json in (12.5, True, [10], "AUTO"):
        assert_problem(client.post(url, json={**fresh, "n_bins": bad_json}), 422, "n_bins")


def test_curve_in_the_query_of_a_csv_body(client: TestClient, fitted: dict[str, object]) -> None:
    rows = sigmoid_batch(300, seed=6)
    csv = "score,label\n" + "\n".join(
        f"{s},{y}" for s, y in zip(rows["scores"], rows["labels"], strict=True)
    )
    r = client.post(
        f"{BASE}/versions/1/diagnostics?curve=smooth&bootstrap=30",
        content=csv,
        headers={"content-type": "text/csv", "accept": "image/svg+xml"},
    )
    assert r.status_code == 200, r.text
    assert b'id="calibrated-smooth"' in r.content
    assert b'id="calibrated-curve"' not in r.content


def test_n_bins_auto_is_the_cube_root_rule(client: TestClient, fitted: dict[str, object]) -> None:
    d = client.get(f"{BASE}/versions/1/diagnostics?n_bins=auto&bootstrap=0").json()
    assert d["n_bins"] == 9  # 600 rows: 8^3 = 512 < 600 <= 729 = 9^3
    assert len(d["calibrated"]["bins"]) == 9
    fresh = sigmoid_batch(1000, seed=3)
    posted = client.post(
        f"{BASE}/versions/1/diagnostics?bootstrap=0", json={**fresh, "n_bins": "auto"}
    )
    assert posted.status_code == 200, posted.text
    assert posted.json()["n_bins"] == 10  # 1000 = 10^3
    assert_problem(client.get(f"{BASE}/versions/1/diagnostics?n_bins=many"), 422, "n_bins")
