"""scikit-learn's view of the service: :class:`RemoteCalibrator`, an estimator over scores
whose fit creates a version on the service and whose predictions come from that version.

Needs the ``[sklearn]`` extra. Nothing here talks to the network before ``fit``, so the
estimator can be cloned, pickled and sent to joblib workers like any other."""

from __future__ import annotations

from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.sparse import issparse
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import Tags
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from calibration_client import Client, UnprocessableError

__all__ = ["RemoteCalibrator"]


class RemoteCalibrator(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """A calibrator fitted and served by a calibration service, as a scikit-learn classifier
    over scores.

    ``X`` holds a model's raw scores, not features: an ``(n,)`` or ``(n, 1)`` array for two
    classes, an ``(n, k)`` array (one column per class, in the order of ``classes_``) for
    ``k >= 3`` classes.

    Parameters
    ----------
    name : str
        The calibrator's name on the service.
    url : str
        The service's base URL, e.g. ``http://127.0.0.1:8000``.
    api_key : str or None
        A key with the ``write`` scope (``read`` is enough to predict with a fitted estimator).
    method : str
        The calibration method (``"auto"`` picks one by cross-validated log loss).
    params : dict or None
        The method's parameters.

    Attributes
    ----------
    version_ : int
        The version ``fit`` created; predictions always use it (pinned), whatever later fits
        or aliases do.
    classes_ : ndarray of shape (n_classes,)
        The labels seen in ``fit``, sorted; the service sees their indices.
    n_classes_ : int
    n_features_in_ : int
        The number of score columns (1 for a vector).

    Notes
    -----
    Every call of ``fit`` creates a new version of ``name``: ``cross_val_score`` with 5 folds
    creates 5 versions, a grid search one per candidate and fold. Use a name of its own for
    such experiments. Each fit sends an idempotency key, so a retried request never creates
    a second version.
    """

    def __init__(
        self,
        name: str,
        url: str,
        api_key: str | None = None,
        method: str = "auto",
        params: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.url = url
        self.api_key = api_key
        self.method = method
        self.params = params

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit a new version of ``name`` on scores ``X`` and labels ``y`` and pin it.

        Parameters
        ----------
        X : array-like of shape (n,), (n, 1) or (n, k)
            Raw scores.
        y : array-like of shape (n,)
            Labels of any kind (strings, -1/1, ...); sent as indices into ``classes_``.
        sample_weight : array-like of shape (n,) or None
            Non-negative weights.

        Returns
        -------
        self
        """
        scores, labels = validate_data(self, _as_2d(X), y, dtype=np.float64)
        check_classification_targets(labels)
        classes, indices = np.unique(labels, return_inverse=True)
        if classes.size < 2:
            raise ValueError(
                f"y has 1 class ({classes[0]!r}); a calibrator needs at least 2 classes"
            )
        weights = None if sample_weight is None else _weights(sample_weight, len(scores))
        sent = _layout(scores, classes.size)
        try:
            version = self._client().fit(
                self.name,
                sent,
                indices,
                method=self.method,
                params=self.params,
                sample_weight=weights,
            )  # under a key of its own (Client.fit makes one): a retry makes no second version
        except UnprocessableError as error:  # the batch is invalid: scikit-learn's ValueError
            raise ValueError(error.detail or error.message) from error
        self.version_: int = version.version
        self.classes_: NDArray[Any] = classes
        self.n_classes_: int = int(classes.size)
        return self

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Calibrated probabilities from the pinned version: shape (n, n_classes_), columns
        in the order of ``classes_``."""
        check_is_fitted(self)
        scores = validate_data(self, _as_2d(X), dtype=np.float64, reset=False)
        sent = _layout(scores, self.n_classes_)
        prediction = self._client().predict(self.name, sent, version=self.version_)
        probabilities = np.asarray(prediction.probabilities, dtype=np.float64)
        if self.n_classes_ == 2:
            return np.column_stack([1.0 - probabilities, probabilities])
        return probabilities

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """The most probable label of each row, from ``classes_``."""
        probabilities = self.predict_proba(X)
        labels: NDArray[Any] = self.classes_[np.argmax(probabilities, axis=1)]
        return labels

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        # X is scores: a vector or one column for two classes, k columns for k classes
        tags.input_tags.one_d_array = True
        tags.input_tags.two_d_array = True
        # one column of arbitrary numbers rarely separates the checks' classes well
        tags.classifier_tags.poor_score = True
        tags.input_tags.allow_nan = False
        tags.target_tags.required = True
        tags.requires_fit = True
        # a pinned version always answers the same probabilities for the same scores
        tags.non_deterministic = False
        return tags

    def __getstate__(self) -> dict[str, Any]:
        # the HTTP client holds sockets: a pickled or cloned estimator makes its own
        state = dict(super().__getstate__())
        state.pop("_connection", None)
        return state

    def _client(self) -> Client:
        """The service's client for the current ``url`` and ``api_key``, made on first use."""
        wanted = (self.url, self.api_key)
        connection: tuple[tuple[str, str | None], Client] | None = getattr(
            self, "_connection", None
        )
        if connection is None or connection[0] != wanted:
            if connection is not None:
                connection[1].close()
            connection = (wanted, Client(self.url, api_key=self.api_key))
            self._connection = connection
        return connection[1]


def _as_2d(X: ArrayLike) -> ArrayLike:
    """A vector of scores as one column; anything else as given (``validate_data`` judges
    it, and keeps a DataFrame's column names)."""
    if issparse(X):  # validate_data says that scores must be dense
        return X
    ndim = getattr(X, "ndim", None)
    if ndim is None:  # a list or another sequence
        X = np.asarray(X)
        ndim = X.ndim
    return np.asarray(X).reshape(-1, 1) if ndim == 1 else X


def _layout(scores: NDArray[np.float64], n_classes: int) -> NDArray[np.float64]:
    """The scores as the service takes them: a vector for two classes, (n, k) for k."""
    columns = scores.shape[1]
    if n_classes == 2:
        if columns != 1:
            raise ValueError(
                f"X has {columns} columns; with 2 classes X is one score per sample, "
                "shape (n,) or (n, 1)"
            )
        return scores[:, 0]
    if columns != n_classes:
        raise ValueError(
            f"X has {columns} columns for {n_classes} classes; with k classes X is "
            "an (n, k) array of scores, one column per class"
        )
    return scores


def _weights(sample_weight: ArrayLike, n_samples: int) -> NDArray[np.float64]:
    """``sample_weight`` as a float vector of one weight per sample (else ValueError)."""
    weights = np.asarray(sample_weight, dtype=np.float64)
    if weights.shape != (n_samples,):
        raise ValueError(
            f"sample_weight has shape {weights.shape}; expected ({n_samples},), "
            "one weight per sample"
        )
    return weights
