"""RemoteCalibrator as scikit-learn sees it: parameters without network, Pipeline,
cross-validation, pickling, labels of any kind, and scikit-learn's own estimator
checks, all against the live service of ``service_url``."""

from __future__ import annotations

import pickle
import uuid
from typing import Any

import numpy as np
import pytest
from calibration_client import Client, RemoteCalibrator
from numpy.typing import NDArray
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import Tags
from sklearn.utils.estimator_checks import check_estimator
from sklearn.utils.validation import NotFittedError, check_is_fitted

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing answers there

_ONE_D = (
    "scikit-learn's check indexes X[:, 0] or X.shape[1] after making X 1-D for an "
    "estimator tagged one_d_array (its own IndexError)"
)
_WIDE = "feeds 2+ feature columns with 2 classes; a binary calibrator takes one score column"

NOT_APPLICABLE: dict[str, str] = {
    "check_dont_overwrite_parameters": _ONE_D,
    "check_dtype_object": _ONE_D,
    "check_f_contiguous_array_estimator": _ONE_D,
    "check_methods_sample_order_invariance": _ONE_D,
    "check_methods_subset_invariance": _ONE_D,
    "check_fit2d_1sample": _ONE_D,
    "check_fit2d_1feature": _ONE_D,
    "check_dict_unchanged": _ONE_D,
    "check_n_features_in": _ONE_D,
    "check_n_features_in_after_fitting": _ONE_D,
    "check_fit2d_predict1d": _ONE_D,
    "check_sample_weights_shape": _WIDE,
    "check_sample_weights_not_overwritten": _WIDE,
    "check_sample_weight_equivalence_on_dense_data": _WIDE + " (30 features)",
    "check_estimator_sparse_array": "scikit-learn cannot build its sparse formats (lil, dia) "
    "from the 1-D sparse array a one_d_array estimator is given",
    "check_classifiers_train": "predicts on X.T to provoke a feature-count mismatch, which for "
    "1-D scores is X itself",
}
"""Checks that do not apply to an estimator over scores, with why; skipped in both runs."""

MULTICLASS_ONE_COLUMN: dict[str, str] = dict.fromkeys(
    (
        "check_fit_score_takes_y",
        "check_estimators_overwrite_params",
        "check_estimators_fit_returns_self",
        "check_readonly_memmap_input",
        "check_positive_only_tag_during_fit",
        "check_sample_weights_list",
        "check_classifiers_classes",
        "check_supervised_y_2d",
    ),
    "feeds one score column with 3+ classes (k classes need k score columns): run again "
    "on two classes by test_estimator_checks_binary",
)
"""Checks whose data is multiclass with one feature: skipped in the first run only."""

BINARY_VIEW_ONLY: dict[str, str] = {
    "check_classifier_not_supporting_multiclass": "the binary view only hides multiclass from "
    "the checks' data; the estimator does take k score columns",
    "check_fit1d": "a 1-D vector of scores is this estimator's main input, not an error",
}


@pytest.fixture
def name() -> str:
    return f"sk-{uuid.uuid4().hex[:12]}"


def _batch(n: int = 400, seed: int = 0) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=n)
    labels = (rng.uniform(size=n) < 1 / (1 + np.exp(-2 * scores))).astype(np.int64)
    return scores, labels


def test_params_and_clone_need_no_network() -> None:
    estimator = RemoteCalibrator("churn", UNREACHABLE, api_key="k", method="platt")
    assert estimator.get_params() == {
        "name": "churn",
        "url": UNREACHABLE,
        "api_key": "k",
        "method": "platt",
        "params": None,
    }
    copy = clone(estimator.set_params(method="isotonic", params={"interpolation": "step"}))
    assert copy.get_params()["params"] == {"interpolation": "step"}
    assert copy.method == "isotonic"
    with pytest.raises(NotFittedError):
        check_is_fitted(copy)
    with pytest.raises(NotFittedError):
        copy.predict_proba([0.1, 0.2])
    tags = copy.__sklearn_tags__()
    assert isinstance(tags, Tags)
    assert tags.requires_fit
    assert not tags.non_deterministic


def test_fit_pins_a_version_and_predicts_as_the_client(service_url: str, name: str) -> None:
    scores, labels = _batch()
    estimator = RemoteCalibrator(name, service_url, method="platt").fit(scores, labels)
    check_is_fitted(estimator)
    assert estimator.version_ == 1
    assert estimator.n_features_in_ == 1
    assert estimator.n_classes_ == 2
    np.testing.assert_array_equal(estimator.classes_, [0, 1])
    RemoteCalibrator(name, service_url, method="isotonic").fit(scores, labels)  # version 2
    with Client(service_url) as client:
        pinned = client.predict(name, scores, version=1).probabilities
        assert client.version(name, "latest").version == 2
    probabilities = estimator.predict_proba(scores.reshape(-1, 1))
    np.testing.assert_array_equal(probabilities[:, 1], pinned)
    np.testing.assert_array_equal(probabilities[:, 0], 1.0 - pinned)
    np.testing.assert_array_equal(estimator.predict(scores), (pinned > 0.5).astype(int))


@pytest.mark.parametrize(
    "classes", [np.array(["no", "yes"]), np.array([-1, 1]), np.array([False, True])]
)
def test_labels_are_mapped_through_classes(
    service_url: str, name: str, classes: NDArray[Any]
) -> None:
    scores, labels = _batch()
    estimator = RemoteCalibrator(name, service_url, method="platt").fit(scores, classes[labels])
    np.testing.assert_array_equal(estimator.classes_, classes)
    with Client(service_url) as client:
        version = client.version(name, estimator.version_)
        indices = client.predict(name, scores, version=estimator.version_).probabilities
    assert version.n_samples == len(scores)
    assert version.document["n_positive"] == int(labels.sum())  # "yes", 1, True went as 1
    np.testing.assert_array_equal(estimator.predict(scores), classes[(indices > 0.5).astype(int)])


def test_multiclass_scores_take_one_column_per_class(service_url: str, name: str) -> None:
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(300, 3))
    labels = np.array(["a", "b", "c"])[np.argmax(scores + rng.normal(size=(300, 3)), axis=1)]
    estimator = RemoteCalibrator(name, service_url, method="platt").fit(scores, labels)
    assert estimator.n_classes_ == 3
    assert estimator.n_features_in_ == 3
    probabilities = estimator.predict_proba(scores)
    assert probabilities.shape == (300, 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    assert set(estimator.predict(scores)) <= {"a", "b", "c"}
    with pytest.raises(ValueError, match="X has 1 columns for 3 classes"):
        clone(estimator).fit(scores[:, 0], labels)


def test_invalid_batches_are_value_errors(service_url: str, name: str) -> None:
    scores, labels = _batch(50)
    with pytest.raises(ValueError, match="1 class"):
        RemoteCalibrator(name, service_url).fit(scores, np.ones(50))
    with pytest.raises(ValueError, match="one score per sample"):
        RemoteCalibrator(name, service_url).fit(np.c_[scores, scores], labels)
    with pytest.raises(ValueError, match="sample_weight"):  # the service's 422 detail
        RemoteCalibrator(name, service_url).fit(scores, labels, sample_weight=-np.ones(50))


def test_pipeline_picks_the_score_column(service_url: str, name: str) -> None:
    scores, labels = _batch()
    features = np.c_[np.arange(len(scores)), scores]  # an id column, then the score
    pipeline = make_pipeline(
        FunctionTransformer(lambda X: X[:, 1:2]), RemoteCalibrator(name, service_url, "platt")
    )
    pipeline.fit(features, labels)
    with Client(service_url) as client:
        expected = client.predict(name, scores, version=1).probabilities
    np.testing.assert_array_equal(pipeline.predict_proba(features)[:, 1], expected)


def test_cross_val_score_makes_one_version_per_fold(service_url: str, name: str) -> None:
    """In this process; in joblib's worker processes (``n_jobs=2``) the estimator goes by
    pickle, which test_pickle_drops_the_connection_and_keeps_the_version covers (loky's start
    would cost ~15 s of a suite on two cores)."""
    scores, labels = _batch(500)
    estimator = RemoteCalibrator(name, service_url, method="platt")
    result = cross_val_score(estimator, scores.reshape(-1, 1), labels, cv=5)
    assert result.shape == (5,)
    assert np.all(result > 0.6)
    with Client(service_url) as client:
        assert len(client.versions(name)) == 5
    assert not hasattr(estimator, "version_")  # cross_val_score fits clones


def test_pickle_drops_the_connection_and_keeps_the_version(service_url: str, name: str) -> None:
    scores, labels = _batch()
    estimator = RemoteCalibrator(name, service_url, method="platt").fit(scores, labels)
    before = estimator.predict_proba(scores)
    assert "_connection" in vars(estimator)
    state = estimator.__getstate__()
    assert "_connection" not in state
    assert "_connection" in vars(estimator)
    restored = pickle.loads(pickle.dumps(estimator))
    assert restored.version_ == estimator.version_
    np.testing.assert_array_equal(restored.predict_proba(scores), before)


class _BinaryView(RemoteCalibrator):
    """The same estimator, tagged two-class only, so that scikit-learn's checks give it two
    classes where they would give three (with one feature column, which cannot be scores
    for three classes)."""

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags


def _run_checks(estimator: RemoteCalibrator, skipped: dict[str, str]) -> None:
    results = check_estimator(estimator, expected_failed_checks=skipped, on_fail=None, on_skip=None)
    failed = [
        f"{result['check_name']}: {result['exception']!r}"
        for result in results
        if result["status"] == "failed"
    ]
    assert not failed, "\n".join(failed)
    passed = {result["check_name"] for result in results if result["status"] == "passed"}
    assert len(passed) > 20
    assert not passed & set(skipped), "a skipped check passes: take it off the list"


def test_estimator_checks(service_url: str, name: str) -> None:
    _run_checks(
        RemoteCalibrator(name, service_url, method="platt"),
        {**NOT_APPLICABLE, **MULTICLASS_ONE_COLUMN},
    )


def test_estimator_checks_binary(service_url: str, name: str) -> None:
    _run_checks(
        _BinaryView(name, service_url, method="platt"), {**NOT_APPLICABLE, **BINARY_VIEW_ONLY}
    )
