"""10^6-pair fits over HTTP against what a user would otherwise run in process (issue 25).

``auto``, ``isotonic`` and ``platt`` fits, the stored cross-validated diagnostics included,
each posted as JSON (the method in the body) and as a Parquet file (the method in the query),
against the library each replaces, in this process, on the same pairs: scikit-learn's 5-fold
``cross_val_predict`` plus the final fit of ``IsotonicRegression`` for ``isotonic``, of its
sigmoid (``_SigmoidCalibration``, what ``CalibratedClassifierCV(method="sigmoid")`` fits) for
``platt``, and of both for ``auto``, refitting the one of lower cross-validated log loss
(:func:`bench.protocol.sklearn_cv_choice`). The targets apply to those; each method against
the isotonic reference (the only one before) is listed too, without a target. Each time is
the median of three after one unmeasured run; ours the client's, upload to answer.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import numpy as np
import orjson
from sklearn.base import BaseEstimator
from sklearn.calibration import _SigmoidCalibration
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import cross_val_predict

from bench.columnar import PARQUET, parquet
from bench.fits import batch
from bench.protocol import sklearn_cv_choice
from bench.table import Row, Target, median_seconds, progress, size_label

AUTO_VS_SKLEARN = Target(1.0)
SINGLE_VS_SKLEARN = Target(0.5)
METHODS = (("auto", AUTO_VS_SKLEARN), ("isotonic", SINGLE_VS_SKLEARN), ("platt", SINGLE_VS_SKLEARN))
N = 10**6
TIMEOUT_SECONDS = 600.0
"""The longest one fit may take."""


def fits_over_http_rows(client: httpx.Client, n: int = N) -> list[Row]:
    """The fits of n pairs over ``client``'s service, JSON then Parquet, against the
    scikit-learn references; the targets apply at 10^6 pairs."""
    f, y, _ = batch(n, tied=False, seed=6)
    labels = y.astype(np.int64)
    X = f.reshape(-1, 1)

    def cv_and_fit(make: Callable[[], BaseEstimator]) -> Callable[[], None]:
        def run() -> None:
            cross_val_predict(make(), X, labels, cv=5)
            make().fit(X, labels)

        return run

    def either() -> None:
        sklearn_cv_choice(f, y, f[:1], seed=0)  # one test score: the fit's cost alone

    library = {
        "isotonic": ("isotonic", cv_and_fit(lambda: IsotonicRegression(out_of_bounds="clip"))),
        "platt": ("sigmoid", cv_and_fit(_SigmoidCalibration)),
        "auto": ("sigmoid or isotonic", either),
    }
    references = {}
    for method, (name, run) in library.items():
        progress(f"fits over HTTP: scikit-learn's 5-fold CV + fit of {name}, n={n}")
        references[method] = (name, 1e3 * median_seconds(run, 3, warmup=0))
    as_parquet = parquet(f, labels.astype(np.int8))
    rows = []
    for media in ("JSON", "Parquet"):
        for method, target in METHODS:
            progress(f"fits over HTTP: {size_label(n)}-pair {method} fit as {media}")
            if media == "JSON":
                body = orjson.dumps(
                    {"scores": f, "labels": labels, "method": method},
                    option=orjson.OPT_SERIALIZE_NUMPY,
                )
                url, media_type = "/v1/calibrators/versus/fit", "application/json"
            else:
                body = as_parquet
                url, media_type = f"/v1/calibrators/versus/fit?method={method}", PARQUET

            def over_http(url: str = url, body: bytes = body, media_type: str = media_type) -> None:
                answer = client.post(
                    url,
                    content=body,
                    headers={"content-type": media_type},
                    timeout=TIMEOUT_SECONDS,
                )
                answer.raise_for_status()

            ours = 1e3 * median_seconds(over_http, 3, warmup=1)
            name, reference = references[method]
            rows.append(
                Row(
                    "load",
                    f"{method} fit ({media}) / sklearn {name} 5-fold CV + fit",
                    size_label(n),
                    ours,
                    reference,
                    target=target if n == N else None,
                )
            )
            if method != "isotonic":
                rows.append(
                    Row(
                        "load",
                        f"{method} fit ({media}) / sklearn isotonic 5-fold CV + fit",
                        size_label(n),
                        ours,
                        references["isotonic"][1],
                    )
                )
    return rows
