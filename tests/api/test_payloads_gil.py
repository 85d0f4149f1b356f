"""Parsing a big body leaves the GIL to other threads, and reads what reading it whole read.

A thread that sleeps a millisecond at a time stands in for the event loop: the longest gap
between its ticks while a body is parsed is how long the loop would have waited. A million
CSV rows and a ~25 MB JSON body must leave no gap over :data:`GAP_BOUND` (whole they held the
GIL 120 to 360 ms); a responsiveness property, with room for a slow machine, not a benchmark.
The numbers must equal ``np.loadtxt`` and ``orjson.loads`` + ``np.asarray`` of the same
bodies, and an error deep in a big body must name the row or index it named before.
"""

from __future__ import annotations

import gc
import io
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.context import ForkServerContext, ForkServerProcess
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.api.bodies import csv_batches, payloads
from app.api.bodies.csv_batches import parse_csv
from app.api.bodies.json_process import IN_PROCESS_BYTES, JsonProcess, parse_json_body
from app.api.bodies.payloads import BATCH_ARRAYS, ParsedArray, number_array, read_json_arrays
from app.errors import FieldError, InvalidInput, MalformedBody, ServiceError

T = TypeVar("T")

GAP_BOUND = 0.050
"""Seconds a ticking thread may wait for the GIL while a big body is parsed."""
JSON_GAP_BOUND = 0.120
"""The same for a big JSON body, whose bytes are copied to and from the worker process
(in the calling thread the body of this test holds the GIL for some 200 ms)."""
QUOTED_GAP_BOUND = 0.300
"""The same, while the csv module reads quoted cells (see the test that uses it)."""


def longest_gap(
    parse: Callable[[], T], attempts: int = 5, bound: float = GAP_BOUND
) -> tuple[T, float]:
    """``parse()`` and the longest wait, in seconds, of a thread ticking every millisecond;
    the least of up to ``attempts`` runs, as another process may take the CPU during one run,
    while holding the GIL shows in every run."""
    result, gap = _longest_gap(parse)
    for _ in range(attempts - 1):
        if gap < bound:
            break
        result, again = _longest_gap(parse)
        gap = min(gap, again)
    return result, gap


def _longest_gap(parse: Callable[[], T]) -> tuple[T, float]:
    # The garbage collector is off meanwhile: a full collection of the test process's heap
    # takes longer than the bound on a slow machine, and it is not what is measured here.
    gaps: list[float] = []
    ticking, stop = threading.Event(), threading.Event()

    def tick() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now
            ticking.set()

    ticker = threading.Thread(target=tick, daemon=True)
    gc.collect()
    gc.disable()
    try:
        ticker.start()
        ticking.wait(5)
        result = parse()
    finally:
        stop.set()
        ticker.join(5)
        gc.enable()
    return result, max(gaps)


def outcome(parse: Callable[[], T]) -> T | tuple[type, str, tuple[FieldError, ...]]:
    """The result, or the error as (type, detail, errors): what a client would see."""
    try:
        return parse()
    except ServiceError as exc:
        return type(exc), exc.detail, tuple(exc.errors)


def assert_same_outcome(got: Any, expected: Any) -> None:
    if isinstance(expected, tuple) and expected and isinstance(expected[0], type):
        assert got == expected
        return
    assert not (isinstance(got, tuple) and got and isinstance(got[0], type)), got
    for g, e in zip(got, expected, strict=True):
        if e is None:
            assert g is None
        else:
            np.testing.assert_array_equal(g, e)


# -- CSV -------------------------------------------------------------------------------------
def csv_body(n: int, seed: int = 0) -> tuple[bytes, np.ndarray]:
    """A score,label,weight CSV of ``n`` rows with full-precision scores, and its table."""
    rng = np.random.default_rng(seed)
    table = np.column_stack(
        [rng.normal(0, 2, n), rng.random(n) < 0.4, rng.integers(1, 5, n) / 4]
    ).astype(np.float64)
    # Column by column, the few labels and weights looked up: ~2 s less than a row at a time.
    scores, labels, weights = table.T.tolist()
    label_text = {0.0: "0", 1.0: "1"}
    weight_text = {w: str(w) for w in (0.25, 0.5, 0.75, 1.0)}
    cells = zip(
        map(repr, scores),
        map(label_text.__getitem__, labels),
        map(weight_text.__getitem__, weights),
        strict=True,
    )
    rows = "".join([f"{s},{y},{w}\n" for s, y, w in cells])
    return ("score,label,weight\n" + rows).encode(), table


@pytest.fixture(scope="module")
def million_rows() -> tuple[bytes, np.ndarray]:
    return csv_body(1_000_000)


@pytest.mark.serial  # the longest wait for the GIL, against GAP_BOUND
def test_a_million_csv_rows_are_read_in_pieces_that_leave_the_gil_to_others(
    million_rows: tuple[bytes, np.ndarray],
) -> None:
    body, _ = million_rows
    reference = np.loadtxt(io.BytesIO(body), delimiter=",", skiprows=1, ndmin=2)
    (scores, labels, weights), gap = longest_gap(lambda: parse_csv(body, field="body"))
    assert gap < GAP_BOUND, f"a thread waited {gap * 1000:.0f} ms for the GIL"
    np.testing.assert_array_equal(scores, reference[:, 0])
    np.testing.assert_array_equal(labels, reference[:, 1])
    assert weights is not None
    np.testing.assert_array_equal(weights, reference[:, 2])


@pytest.mark.serial  # the longest wait for the GIL, against QUOTED_GAP_BOUND
def test_quoted_cells_deep_in_a_big_csv_are_read_by_the_csv_module_as_they_were(
    million_rows: tuple[bytes, np.ndarray],
) -> None:
    # Plain pieces first (np.loadtxt), then quoted cells from row 600,001 on (the csv module).
    body, table = million_rows
    head, _, tail = body.partition(b"\n")
    lines = tail.split(b"\n")
    quoted = [
        b'"' + line.replace(b",", b'","') + b'"' if line else line for line in lines[600_000:]
    ]
    body = b"\n".join([head, *lines[:600_000], *quoted])
    (scores, labels, weights), gap = longest_gap(
        lambda: parse_csv(body, field="body"), bound=QUOTED_GAP_BOUND
    )
    # The csv module's rows still hold the GIL in stretches of 40-190 ms here (the cause is
    # not found yet, see issue 10's note): bounded, far below the seconds it was.
    assert gap < QUOTED_GAP_BOUND, f"a thread waited {gap * 1000:.0f} ms for the GIL"
    assert weights is not None
    np.testing.assert_array_equal(np.column_stack([scores, labels, weights]), table)


@pytest.mark.serial  # the longest wait for the GIL, against GAP_BOUND
def test_a_million_boolean_labels_are_read_in_pieces_that_leave_the_gil_to_others(
    million_rows: tuple[bytes, np.ndarray],
) -> None:
    # pandas writes a boolean label column as True/False: np.loadtxt reads it, with a
    # converter for the label's column, not the csv module (issue 29)
    body, table = million_rows
    booleans = body.replace(b",1,", b",True,").replace(b",0,", b",False,")
    assert booleans.count(b"True") + booleans.count(b"False") == len(table)
    (scores, labels, weights), gap = longest_gap(lambda: parse_csv(booleans, field="body"))
    assert gap < GAP_BOUND, f"a thread waited {gap * 1000:.0f} ms for the GIL"
    assert weights is not None
    np.testing.assert_array_equal(np.column_stack([scores, labels, weights]), table)


@pytest.mark.parametrize(
    ("row", "line", "loc", "msg"),
    [
        (987_654, b"0.5,x,1", ("row", 987_654, "label"), "is 'x', not a number"),
        (700_000, b"0.5,1,1,9", ("row", 700_000), "has 4 fields; the header has 3"),
    ],
)
def test_a_bad_row_deep_in_a_big_csv_is_named_by_its_number(
    million_rows: tuple[bytes, np.ndarray],
    row: int,
    line: bytes,
    loc: tuple[str | int, ...],
    msg: str,
) -> None:
    body, _ = million_rows
    lines = body.split(b"\n")
    lines[row] = line
    # A blank line and a line of spaces before it are not rows: the number does not move.
    lines[10:10] = [b"", b"   "]
    with pytest.raises(InvalidInput) as caught:
        parse_csv(b"\n".join(lines), field="body")
    assert caught.value.errors == (FieldError(("body", "body", *loc), msg),)


def test_a_field_past_the_csv_limit_is_the_error_even_after_a_bad_cell(
    million_rows: tuple[bytes, np.ndarray],
) -> None:
    body, _ = million_rows
    lines = body.split(b"\n")
    lines[5] = b'"0.5",x,1'  # a word in row 5: the csv module reads on from its piece
    lines[900_000] = b'"' + b"9" * 140_000 + b'",0,1'
    with pytest.raises(InvalidInput) as caught:
        parse_csv(b"\n".join(lines), field="file")
    (error,) = caught.value.errors
    assert error.loc == ("body", "file", "row", 900_000)
    assert error.msg.startswith("cannot be read as CSV: field larger than field limit")


def test_bytes_that_are_not_utf8_anywhere_are_the_400_before_any_422(
    million_rows: tuple[bytes, np.ndarray],
) -> None:
    body, _ = million_rows
    bad = body.replace(b"score,label,weight", b"score,label,wait", 1) + b"0.5,1,\xff\n"
    with pytest.raises(MalformedBody, match=r"not UTF-8 \(invalid start byte\)"):
        parse_csv(bad, field="body")


CELLS = ["0.5", "1", "0", "-2.5e3", "nan", " 0.25 ", '"0.75"', "x", "", '"0.5\n"', '"a', "1_0"]
LINE_ENDS = ["\n", "\r\n", "\r", "\n\n", "\n \n", "\x0b", "\u2028", "\x85"]
HEADERS = ["score,label", "label,score,weight", "score_0,score_1,score_2,label", "\ufeffscore,x"]


@st.composite
def csv_texts(draw: st.DrawFn) -> bytes:
    header = draw(st.sampled_from(HEADERS))
    width = header.count(",") + 1
    cell = st.one_of(st.sampled_from(["0.1", "0.9", "1", "0", "2"]), st.sampled_from(CELLS))
    rows = draw(st.lists(st.lists(cell, min_size=width - 1, max_size=width + 1), max_size=12))
    text = "".join(
        line + draw(st.sampled_from(LINE_ENDS)) for line in [header, *map(",".join, rows)]
    )
    data = text.encode()
    if draw(st.booleans()) and data:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xe2\x82"])) + data[at:]
    return data


@settings(max_examples=400, deadline=None)
@given(data=csv_texts(), piece=st.integers(1, 16), step=st.integers(1, 16))
def test_reading_a_csv_in_pieces_reads_what_reading_it_whole_reads(
    data: bytes, piece: int, step: int
) -> None:
    # Odd line ends, blank lines, quoted cells across lines, words, bad UTF-8 at any place:
    # with pieces of a few bytes, every cut falls somewhere awkward.
    whole = outcome(lambda: parse_csv(data, field="body"))
    with (
        mock.patch.object(csv_batches, "CSV_PIECE_BYTES", piece),
        mock.patch.object(csv_batches, "COUNT_STEP", step),
    ):
        pieces = outcome(lambda: parse_csv(data, field="body"))
    assert_same_outcome(pieces, whole)


# -- JSON arrays -----------------------------------------------------------------------------
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.sampled_from([None, "x", 0, 1, 0.5]),
)


@settings(max_examples=300, deadline=None)
@given(
    items=st.one_of(
        st.lists(NUMBERS, max_size=40),
        st.lists(st.lists(NUMBERS, min_size=2, max_size=3), max_size=20),
    ),
    matrix=st.booleans(),
)
def test_converting_a_list_in_slices_gives_what_converting_it_whole_gives(
    items: list[Any], matrix: bool
) -> None:
    def convert() -> Any:
        return (number_array(items, "scores", matrix=matrix), None, None)

    whole = outcome(convert)
    with mock.patch.object(payloads, "LIST_SLICE", 3):
        sliced = outcome(convert)
    assert_same_outcome(sliced, whole)


# -- JSON in another process ----------------------------------------------------------------
def _json_batch(n: int) -> tuple[bytes, dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    arrays = {
        "scores": rng.normal(0, 2, n),
        "labels": (rng.random(n) < 0.4).astype(np.int64),
        "sample_weight": rng.integers(1, 5, n) / 4,
    }
    body = orjson.dumps(
        {**arrays, "method": "platt", "tags": {"team": "risk"}},
        option=orjson.OPT_SERIALIZE_NUMPY,
    )
    return body, arrays


@pytest.fixture(scope="module")
def json_batch() -> tuple[bytes, dict[str, np.ndarray]]:
    """A ~60 MB fit body (near the default limit): 2.5 million full-precision scores, labels
    and weights. Parsed in the calling thread, it holds the GIL for some 200 ms."""
    body, arrays = _json_batch(2_500_000)
    assert len(body) > 50_000_000
    return body, arrays


@pytest.fixture(scope="module")
def process_batch() -> tuple[bytes, dict[str, np.ndarray]]:
    """A fit body large enough to be parsed in the worker process (~2.4 MB, 100,000 rows):
    what the process answers does not depend on the size past that."""
    body, arrays = _json_batch(100_000)
    assert len(body) > 2 * IN_PROCESS_BYTES
    return body, arrays


def test_a_big_json_body_is_parsed_in_another_process(
    json_batch: tuple[bytes, dict[str, np.ndarray]],
) -> None:
    body, arrays = json_batch
    parsed = orjson.loads(body)
    reference = {name: np.asarray(parsed[name], dtype=np.float64) for name in arrays}
    del parsed
    data = parse_json_body(body, BATCH_ARRAYS)
    assert {k: v for k, v in data.items() if k not in arrays} == {
        "method": "platt",
        "tags": {"team": "risk"},
    }
    for name, matrix in BATCH_ARRAYS.items():
        assert isinstance(data[name], ParsedArray)
        np.testing.assert_array_equal(
            number_array(data[name], name, matrix=matrix), reference[name]
        )


_MEASURE = """
import sys
import numpy as np
import orjson
from app.api.bodies import json_process
from app.api.bodies.payloads import BATCH_ARRAYS
from tests.api.test_payloads_gil import JSON_GAP_BOUND, longest_gap

rng = np.random.default_rng(1)
n = 2_500_000
body = orjson.dumps(
    {"scores": rng.normal(0, 2, n), "labels": (rng.random(n) < 0.4).astype(np.int64)},
    option=orjson.OPT_SERIALIZE_NUMPY,
)
json_process.parse_json_body(body[:2_000_000].rpartition(b",")[0] + b"]}", {})  # starts it
_, gap = longest_gap(lambda: json_process.parse_json_body(body, BATCH_ARRAYS), bound=JSON_GAP_BOUND)
json_process.close()
print(gap)
"""


@pytest.mark.serial  # the longest wait for the GIL, against JSON_GAP_BOUND
def test_a_big_json_body_leaves_the_gil_to_other_threads() -> None:
    # Measured in a fresh interpreter: the test process's own threads and heap (hundreds of
    # tests' worth) would be measured too.
    root = Path(__file__).parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    gap = float(done.stdout.split()[-1])
    assert gap < JSON_GAP_BOUND, f"a thread waited {gap * 1000:.0f} ms for the GIL"


def test_a_small_json_body_is_parsed_in_the_calling_thread_as_before() -> None:
    body = b'{"scores": [0.5, 1], "version": "latest"}'
    assert parse_json_body(body, {"scores": True}) == {
        "scores": [0.5, 1],
        "version": "latest",
    }


def deep_json_errors(body: bytes) -> list[tuple[bytes, str, tuple[str | int, ...], str]]:
    """Bodies with one error deep inside (field asked for, location, message)."""
    start = body.index(b"[") + 1
    scores_end = body.index(b"]", start)
    scores = body[start:scores_end].split(b",")
    labels_at = body.index(b'"labels":[') + len(b'"labels":[')
    labels = body[labels_at : body.index(b"]", labels_at)].split(b",")

    def with_score(i: int, raw: bytes) -> bytes:
        return body[:start] + b",".join([*scores[:i], raw, *scores[i + 1 :]]) + body[scores_end:]

    def with_label(i: int, raw: bytes) -> bytes:
        end = labels_at + len(b",".join(labels))
        return body[:labels_at] + b",".join([*labels[:i], raw, *labels[i + 1 :]]) + body[end:]

    string, obj, null, array = (
        "is a string ('x'); expected a number",
        "is an object; expected a number",
        "is null; expected a number",
        "is an array; expected a number",
    )
    deep, last, other = len(scores) * 3 // 4 + 7, len(scores) - 1, len(labels) * 7 // 8 + 3
    return [
        (with_score(deep, b'"x"'), "scores", ("body", "scores", deep), string),
        (with_score(last, b"{}"), "scores", ("body", "scores", last), obj),
        (with_label(other, b"null"), "labels", ("body", "labels", other), null),
        (with_label(5, b"[0]"), "labels", ("body", "labels", 5), array),
    ]


def test_an_error_deep_in_a_big_json_body_names_its_index(
    process_batch: tuple[bytes, dict[str, np.ndarray]],
) -> None:
    body, _ = process_batch
    for bad, field, loc, msg in deep_json_errors(body):
        data = parse_json_body(bad, BATCH_ARRAYS)
        # The error waits for its field: the others convert, in the order the caller asks.
        for other, matrix in BATCH_ARRAYS.items():
            if other != field:
                number_array(data[other], other, matrix=matrix)
        with pytest.raises(InvalidInput) as caught:
            number_array(data[field], field, matrix=BATCH_ARRAYS[field])
        assert caught.value.errors == (FieldError(loc, msg),)
        in_thread = read_json_arrays(bad, BATCH_ARRAYS)[field].error
        assert (caught.value.detail, caught.value.errors) == (in_thread.detail, in_thread.errors)


@pytest.mark.parametrize(
    ("edit", "error", "fragment"),
    [
        (lambda body: body[:-1] + b', "method": "\\u0000"}', InvalidInput, r"U\+0000 \(NUL\)"),
        (lambda body: body[:-1] + b', "method": }', MalformedBody, "not valid JSON"),
        (lambda body: b"[" + body + b"]", MalformedBody, "must be a JSON object, not list"),
    ],
)
def test_a_big_body_that_is_refused_whole_gives_the_same_error_from_the_process(
    process_batch: tuple[bytes, dict[str, np.ndarray]],
    edit: Callable[[bytes], bytes],
    error: type[ServiceError],
    fragment: str,
) -> None:
    body = edit(process_batch[0])
    with pytest.raises(error, match=fragment) as caught:
        parse_json_body(body, BATCH_ARRAYS)
    expected = outcome(lambda: read_json_arrays(body, BATCH_ARRAYS))
    assert (type(caught.value), caught.value.detail, tuple(caught.value.errors)) == expected


def test_nan_in_a_big_body_is_read_by_the_process_as_in_a_thread(
    process_batch: tuple[bytes, dict[str, np.ndarray]],
) -> None:
    # NaN is not JSON, yet Python writes it: the process falls back to json.loads as well.
    body = process_batch[0].replace(b'"scores":[', b'"scores":[NaN,', 1)
    scores = number_array(parse_json_body(body, BATCH_ARRAYS)["scores"], "scores", matrix=True)
    in_thread = read_json_arrays(body, BATCH_ARRAYS)["scores"].array
    assert np.isnan(scores[0])
    np.testing.assert_array_equal(scores, in_thread)


def test_parsed_arrays_and_their_errors_survive_pickling() -> None:
    converted = ParsedArray(2, True, np.array([[0.5, 1.0, 2.0], [3.0, -0.0, 1e308]]))
    error = InvalidInput("scores[1] is null", errors=(FieldError(("body", "scores", 1), "null"),))
    for value in (converted, ParsedArray(3, False, error=error)):
        copy = pickle.loads(pickle.dumps(value))
        assert (copy.rows, copy.matrix) == (value.rows, value.matrix)
        if value.array is not None:
            np.testing.assert_array_equal(copy.array, value.array)
            assert copy.array.flags.writeable
        else:
            assert isinstance(copy.error, InvalidInput)
            assert copy.error.errors == error.errors
            assert copy.error.detail == error.detail


# -- the worker process's life -------------------------------------------------------------
@contextmanager
def own_worker() -> Iterator[JsonProcess]:
    worker = JsonProcess(lambda: multiprocessing.get_context("forkserver"))
    try:
        yield worker
    finally:
        worker.close()


def gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def test_a_worker_killed_mid_parse_is_replaced_and_the_body_sent_again(
    json_batch: tuple[bytes, dict[str, np.ndarray]],
) -> None:
    body, arrays = json_batch
    with own_worker() as worker:
        worker.parse(b'{"scores": [1]}', BATCH_ARRAYS)
        (first,) = worker.pids()
        killer = threading.Timer(0.05, os.kill, (first, signal.SIGKILL))
        killer.start()
        data = worker.parse(body, BATCH_ARRAYS)
        killer.join()
        (second,) = worker.pids()
        assert second != first
        np.testing.assert_array_equal(number_array(data["labels"], "labels"), arrays["labels"])


def test_without_a_worker_process_big_bodies_are_parsed_in_the_calling_thread() -> None:
    starts: list[object] = []

    class Unstartable(ForkServerProcess):
        def start(self) -> None:
            starts.append(self)
            raise OSError("no processes here")

    class NoProcesses(ForkServerContext):
        Process = Unstartable

    body = orjson.dumps({"scores": [0.5] * 300_000, "labels": [1] * 300_000})
    worker = JsonProcess(NoProcesses)
    try:
        for _ in range(2):
            data = worker.parse(body, BATCH_ARRAYS)
            assert number_array(data["scores"], "scores", matrix=True).shape == (300_000,)
    finally:
        worker.close()
    assert len(starts) == 1, "a second start was tried within RETRY_SECONDS"


def test_closing_ends_even_a_stopped_worker_at_once_and_later_bodies_parse_in_thread() -> None:
    body = orjson.dumps({"scores": [0.25] * 300_000})
    with own_worker() as worker:
        worker.parse(body, BATCH_ARRAYS)
        (pid,) = worker.pids()
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        worker.close()
        assert time.monotonic() - started < 3
        assert gone(pid)
        data = worker.parse(body, BATCH_ARRAYS)
        assert worker.pids() == []
        assert number_array(data["scores"], "scores", matrix=True).shape == (300_000,)
