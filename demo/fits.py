"""The demo's calibrators: two classifiers on scikit-learn's breast cancer data set (569
tumours, 30 features; bundled with scikit-learn, nothing is downloaded), scored on a held-out
calibration split and calibrated through the HTTP API with ``platt``, ``isotonic`` and
``auto``.

- Gaussian naive Bayes: its independence assumption pushes probabilities to 0 and 1, the
  classic over-confident model (Niculescu-Mizil & Caruana, 2005); its log-odds are the score.
- Boosted stumps (AdaBoost on depth-1 trees): margins squeezed towards the middle, the
  sigmoid-shaped distortion Platt scaling was made for; its decision function is the score.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import AdaBoostClassifier
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.tree import DecisionTreeClassifier

METHODS = ("platt", "isotonic", "auto")
ALIAS = "production"
SEED = 0


def scored_batches() -> dict[str, dict[str, Any]]:
    """Each model's scores and labels on the calibration half, by calibrator name."""
    features, labels = load_breast_cancer(return_X_y=True)
    x_train, x_calibration, y_train, y_calibration = train_test_split(
        features, labels, test_size=0.5, stratify=labels, random_state=SEED
    )
    bayes = GaussianNB().fit(x_train, y_train)
    log_proba = bayes.predict_log_proba(x_calibration)
    stumps = AdaBoostClassifier(
        DecisionTreeClassifier(max_depth=1), n_estimators=200, random_state=SEED
    ).fit(x_train, y_train)
    scores = {
        "breast-cancer-naive-bayes": log_proba[:, 1] - log_proba[:, 0],
        "breast-cancer-boosted-stumps": stumps.decision_function(x_calibration),
    }
    return {
        name: {"scores": np.round(s, 6).tolist(), "labels": y_calibration.tolist()}
        for name, s in scores.items()
    }


@dataclass
class Fitted:
    """What the demo stored: each calibrator's version number per method."""

    versions: dict[str, dict[str, int]] = field(default_factory=dict)


def fit_all(client: httpx.Client, batches: dict[str, dict[str, Any]] | None = None) -> Fitted:
    """Post every model's batch (``batches``, by default :func:`scored_batches`) with each
    method, then point :data:`ALIAS` at its ``auto`` version; raises httpx.HTTPStatusError on
    any refusal."""
    fitted = Fitted()
    for name, batch in (batches or scored_batches()).items():
        model = name.removeprefix("breast-cancer-")
        for method in METHODS:
            answer = client.post(
                f"/v1/calibrators/{name}/fit",
                json={
                    **batch,
                    "method": method,
                    "description": f"{model} scores on the breast cancer calibration split",
                    "tags": {"dataset": "breast_cancer", "model": model, "demo": "true"},
                },
            )
            answer.raise_for_status()
            fitted.versions.setdefault(name, {})[method] = answer.json()["version"]
        chosen = fitted.versions[name]["auto"]
        moved = client.put(f"/v1/calibrators/{name}/aliases/{ALIAS}", json={"version": chosen})
        moved.raise_for_status()
    return fitted


def links(base_url: str, fitted: Fitted) -> dict[str, str]:
    """The pages to open: the web view, a calibrator's page, its ``production`` version's
    reliability diagram (the API's picture) and the compare of its platt and isotonic
    versions."""
    name = next(iter(fitted.versions))
    versions = fitted.versions[name]
    return {
        "web view": f"{base_url}/ui",
        "calibrator": f"{base_url}/ui/calibrators/{name}",
        "diagram": f"{base_url}/v1/calibrators/{name}/versions/{ALIAS}/diagnostics.svg",
        "compare": f"{base_url}/ui/calibrators/{name}/compare"
        f"?a={versions['platt']}&b={versions['isotonic']}",
    }
