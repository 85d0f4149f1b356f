"""The artifact format: exact round trips, and refusals with a clear message."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest

from app.store import (
    ArtifactError,
    decode_artifact,
    encode_artifact,
    sha256_hex,
)


def _document(**fields: object) -> bytes:
    document: dict[str, object] = {
        "format": "calibration-service.artifact",
        "format_version": 1,
        "method": "platt",
        "params": {},
        "state": {"A": 1.0},
    }
    document.update(fields)
    return orjson.dumps(document)


def test_artifact_round_trips_floats_bit_exactly() -> None:
    rng = np.random.default_rng(0)
    floats = np.concatenate(
        [rng.normal(size=200) * 10.0 ** rng.integers(-300, 300, size=200), [5e-324, -0.0, 0.1]]
    )
    state = {"thresholds": floats, "values": floats.tolist(), "T": 1.0 / 3.0, "n": 7}
    params = {"interpolation": "linear", "bounds": [math.inf, -math.inf], "nan": math.nan}

    data = encode_artifact("isotonic", params, state)
    artifact = decode_artifact(data, sha256_hex(data))

    assert (artifact.method, artifact.format_version) == ("isotonic", 1)
    for key in ("thresholds", "values"):
        decoded = np.array(artifact.state[key], dtype=np.float64)
        assert decoded.view(np.int64).tolist() == floats.view(np.int64).tolist()
    assert artifact.state["T"] == 1.0 / 3.0
    assert artifact.state["n"] == 7
    assert artifact.params["bounds"] == [math.inf, -math.inf]
    assert math.isnan(artifact.params["nan"])
    assert encode_artifact("isotonic", params, state) == data  # deterministic


def test_non_finite_arrays_are_kept() -> None:
    edges = np.array([-np.inf, 0.5, np.inf])
    artifact = decode_artifact(encode_artifact("histogram_binning", {}, {"edges": edges}))
    assert artifact.state["edges"] == [-math.inf, 0.5, math.inf]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "artifact is not valid JSON"),
        (b"[1, 2]", "artifact must be a JSON object, not an array"),
        (_document(format="sklearn.pickle"), "unknown artifact format 'sklearn.pickle'"),
        (_document(format_version=2), "format_version 2 is newer than this release reads"),
        (_document(format_version=0), "unknown artifact format_version 0"),
        (_document(format_version="1"), "format_version must be an integer, not a string"),
        (_document(method=3), "artifact method must be a non-empty string"),
        (_document(params=[1]), "artifact params must be a JSON object, not an array"),
        (_document(state=None), "artifact state must be a JSON object, not null"),
        (_document(state={"A": {"$float": "Huge"}}), "unknown non-finite float 'Huge'"),
    ],
)
def test_unreadable_artifacts_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(ArtifactError, match=message):
        decode_artifact(data)


def test_a_tampered_artifact_fails_its_hash() -> None:
    data = encode_artifact("platt", {}, {"A": -1.0, "B": 0.0})
    digest = sha256_hex(data)
    tampered = data.replace(b"-1.0", b"-9.0")
    assert decode_artifact(data, digest.upper()).state["A"] == -1.0
    with pytest.raises(ArtifactError, match=r"sha256 mismatch.*altered or corrupted"):
        decode_artifact(tampered, digest)


def test_unserialisable_state_is_refused_when_written() -> None:
    with pytest.raises(ArtifactError, match="not JSON-serialisable"):
        encode_artifact("platt", {}, {"model": object()})
