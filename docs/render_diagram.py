"""Render docs/api.md's reliability diagrams from a real fit: ``python docs/render_diagram.py``
(the binned diagram, and the smooth curves with their bands over the bins).

Scores are a naive-Bayes-like distortion of the true probability (pushed towards 0 and 1), the
case Predicting Good Probabilities With Supervised Learning shows isotonic regression fixing.
The fit goes through the HTTP API on a throwaway SQLite database.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from app.store.migrate import upgrade


def main() -> None:
    rng = np.random.default_rng(7)
    q = rng.beta(2, 2, 5000)  # true probabilities
    y = (rng.random(q.size) < q).astype(int)
    a = 3.0  # naive Bayes' overconfidence: odds raised to the power a
    scores = q**a / (q**a + (1 - q) ** a)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/docs.db"
        upgrade(url)
        with TestClient(create_app(Settings(database_url=url))) as client:
            body = {"scores": scores.tolist(), "labels": y.tolist(), "method": "isotonic"}
            assert client.post("/v1/calibrators/naive-bayes/fit", json=body).status_code == 201
            url = "/v1/calibrators/naive-bayes/versions/1/diagnostics.png"
            images = {
                "reliability-diagram.png": client.get(url),
                "smooth-diagram.png": client.get(f"{url}?curve=both"),
            }
    for name, image in images.items():
        image.raise_for_status()
        target = Path(__file__).with_name(name)
        target.write_bytes(image.content)
        print(f"wrote {target} ({len(image.content)} bytes)")


if __name__ == "__main__":
    main()
