"""Inputs and bodies without a service: what arrays are accepted, how a batch is encoded in
each media type (floats exact), and what importing the package costs."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import httpx
import numpy as np
import pytest
from calibration_client import ClientError, ServerError, ServiceUnavailableError
from calibration_client._arrays import as_ids, as_labels, as_scores, as_weights
from calibration_client._batches import ARROW_STREAM, Body, chosen_transport, labelled_body
from calibration_client._errors import error_from_response
from calibration_client._inference import infer_body, read_infer

AWKWARD = np.array([0.1, 1 / 3, 5e-324, 1.7976931348623157e308, -2.220446049250313e-16, 1e22])


def test_lists_arrays_and_booleans() -> None:
    assert as_scores([1, 2]).dtype == np.float64
    assert as_scores(np.ones((4, 3), dtype=np.float32)).shape == (4, 3)
    labels = as_labels([True, False, True], 3)
    assert labels.dtype == np.int64
    assert labels.tolist() == [1, 0, 1]
    assert as_labels(np.array([0.0, 1.0]), 2).dtype == np.int64
    assert as_labels([0.5, 1.0], 2).dtype == np.float64  # left for the service to refuse
    with pytest.raises(ValueError, match="must be numbers"):
        as_labels(["yes", "no"], 2)
    with pytest.raises(ValueError, match="1-D"):
        as_scores(np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match=r"scores\[1\]\[0\] is infinite"):
        as_scores([[0.0, 1.0], [np.inf, 0.0]])
    with pytest.raises(ValueError, match="sample_weight has 3 values but scores has 2"):
        as_weights([1, 1, 1], 2)


def test_pandas_series_and_frames() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [0.1, 0.2], "b": [0.9, 0.8], "y": pd.array([0, 1], dtype="Int64")})
    assert as_scores(frame["a"]).tolist() == [0.1, 0.2]
    assert as_scores(frame[["a", "b"]]).shape == (2, 2)
    assert as_labels(frame["y"], 2).tolist() == [0, 1]


def test_polars_series_and_frames() -> None:
    pl = pytest.importorskip("polars")
    assert as_scores(pl.Series([0.1, 0.2])).tolist() == [0.1, 0.2]
    assert as_labels(pl.Series([True, False]), 2).tolist() == [1, 0]
    frame = pl.DataFrame({"a": [0.1, 0.2], "b": [0.9, 0.8], "id": ["x", "y"]})
    assert as_scores(frame.select("a", "b")).shape == (2, 2)
    assert as_ids(frame["id"], 2) == ["x", "y"]
    with pytest.raises(ValueError, match=r"scores\[1\] is NaN"):
        as_scores(pl.Series([0.1, None]))


def test_pyarrow_arrays_and_table_columns() -> None:
    pa = pytest.importorskip("pyarrow")
    table = pa.table(
        {"score": [0.1, 0.2, 0.3], "label": [True, False, True], "id": ["a", "b", "c"]}
    )
    assert as_scores(table["score"]).tolist() == [0.1, 0.2, 0.3]  # a ChunkedArray
    assert as_scores(pa.array([0.5, 0.25])).tolist() == [0.5, 0.25]
    assert as_labels(table["label"], 3).tolist() == [1, 0, 1]
    assert as_labels(pa.array([0, 1, 1], pa.int8()), 3).dtype == np.int64
    assert as_weights(pa.chunked_array([[1.0], [2.0, 3.0]]), 3).tolist() == [1.0, 2.0, 3.0]
    assert as_ids(table["id"], 3) == ["a", "b", "c"]
    with pytest.raises(ValueError, match=r"scores\[1\] is NaN"):
        as_scores(pa.array([0.1, None]))


def test_transport_by_size() -> None:
    assert chosen_transport(9_999, "auto", 10_000) == "json"
    assert chosen_transport(10_000, "auto", 10_000) in ("arrow", "csv")
    assert chosen_transport(5, "csv", 10_000) == "csv"


def _bytes(body: Body) -> bytes:
    assert isinstance(body.content, bytes)  # a batch's body is encoded, not streamed
    return body.content


def test_json_and_csv_carry_each_float_exactly() -> None:
    labels = np.array([0, 1, 0, 1, 1, 0])
    document = json.loads(_bytes(labelled_body(AWKWARD, labels, None, {}, "json")))
    assert np.array_equal(np.array(document["scores"]), AWKWARD)
    body = labelled_body(AWKWARD, labels, AWKWARD, {"method": "platt"}, "csv")
    rows = list(csv.reader(io.StringIO(_bytes(body).decode())))
    assert rows[0] == ["score", "label", "weight"]
    assert np.array_equal(np.array([float(r[0]) for r in rows[1:]]), AWKWARD)
    assert np.array_equal(np.array([float(r[2]) for r in rows[1:]]), AWKWARD)
    assert [int(r[1]) for r in rows[1:]] == labels.tolist()
    assert body.content_type == "text/csv"
    assert body.params == {"method": "platt"}


def test_options_go_as_query_parameters_beside_a_non_json_body() -> None:
    pytest.importorskip("pyarrow")
    options = {"method": "isotonic", "params": {"trim": "none"}, "tags": {"a": "b"},
               "description": None, "versions": [1, "production"]}  # fmt: skip
    body = labelled_body(np.ones((3, 2)), np.array([0, 1, 1]), None, options, "arrow")
    assert body.content_type == ARROW_STREAM
    assert body.params == {
        "method": "isotonic",
        "params": '{"trim": "none"}',
        "tags": '{"a": "b"}',
        "versions": ["1", "production"],
    }
    import pyarrow as pa

    table = pa.ipc.open_stream(_bytes(body)).read_all()
    assert table.column_names == ["score_0", "score_1", "label"]


def test_infer_body_and_binary_answer_round_trip() -> None:
    content, headers = infer_body(AWKWARD)
    split = int(headers["Inference-Header-Content-Length"])
    header = json.loads(content[:split])
    assert header["inputs"][0]["shape"] == [6]
    assert np.array_equal(np.frombuffer(content[split:], "<f8"), AWKWARD)
    answer_header = json.dumps(
        {
            "model_name": "m",
            "model_version": "4",
            "outputs": [
                {
                    "name": "probabilities",
                    "datatype": "FP64",
                    "shape": [3, 2],
                    "parameters": {"binary_data_size": 48},
                }
            ],
        }
    ).encode()
    response = httpx.Response(
        200,
        content=answer_header + AWKWARD.tobytes(),
        headers={"Inference-Header-Content-Length": str(len(answer_header))},
    )
    prediction = read_infer("m", response)
    assert prediction.version == 4
    assert np.array_equal(prediction.probabilities, AWKWARD.reshape(3, 2))
    assert prediction.probabilities.flags.writeable


def test_error_bodies_of_every_shape() -> None:
    v2 = error_from_response(httpx.Response(400, json={"error": "inputs[0].shape is bad"}))
    assert v2.status == 400
    assert v2.detail == "inputs[0].shape is bad"
    html = error_from_response(httpx.Response(502, text="<html>bad gateway</html>"))
    assert isinstance(html, ServerError)
    assert html.detail == "<html>bad gateway</html>"
    busy = error_from_response(httpx.Response(503, headers={"X-Request-ID": "r1"}))
    assert isinstance(busy, ServiceUnavailableError)
    assert busy.request_id == "r1"
    teapot = error_from_response(httpx.Response(418))
    assert type(teapot) is ClientError
    assert "418" in str(teapot)
    problem = {"type": "/problems/x", "title": "X", "status": 422, "detail": "d", "errors": 3}
    odd = error_from_response(httpx.Response(422, json=problem))
    assert (odd.type, odd.title, odd.detail, odd.errors) == ("/problems/x", "X", "d", [])


def test_importing_the_package_imports_no_optional_library() -> None:
    code = (
        "import sys, calibration_client\n"
        "heavy = {'sklearn', 'pandas', 'polars', 'pyarrow', 'app'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_remote_calibrator_is_imported_on_first_use() -> None:
    pytest.importorskip("sklearn")
    import calibration_client

    assert calibration_client.RemoteCalibrator.__name__ == "RemoteCalibrator"
    with pytest.raises(AttributeError):
        _ = calibration_client.Nothing
