"""ONNX exports run in onnxruntime equal predict within 1e-12, for every method and its edges.

The grids here are built by the tests from each calibrator's fitted numbers, independently of
the probes the exporter measures its own parity figure on: every knot, the floats on either
side of it, points between knots, values outside the fitted range, +-1e6, and ties.
"""

from __future__ import annotations

import contextvars
import tracemalloc
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

import app.export.exporter
import app.export.multiclass
from app.calibration import (
    Abandoned,
    BetaCalibrator,
    Budget,
    HistogramBinning,
    IsotonicCalibrator,
    MinMaxScaling,
    PlattCalibrator,
    VennAbersCalibrator,
    enter,
    load_calibrator,
    make_calibrator,
)
from app.calibration.methods.multiclass import OneVsRest, make_multiclass
from app.calibration.methods.registry import BINARY
from app.export import FLOAT32_BOUND, ExportError, export_onnx
from app.export.binary import EMITTERS, binary_outputs
from app.export.probes import probe_scores
from tests.calibration.batches import random_weights, sigmoid_batch

PARITY = 1e-12


def run(model: bytes, scores: np.ndarray) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {"scores": scores}), strict=True))


def knots_of(calibrator: Any) -> np.ndarray:
    state = calibrator.state()
    for key in ("thresholds", "edges"):
        if key in state:
            return np.array(state[key], dtype=np.float64)
    if "min" in state:
        return np.array([state["min"], state["max"]])
    return np.zeros(0)


def grid(knots: np.ndarray, unit: bool = False) -> np.ndarray:
    """Knots, their neighbouring floats, midpoints, outside points, +-1e6, and ties."""
    parts = [knots, np.nextafter(knots, -np.inf), np.nextafter(knots, np.inf)]
    if knots.size > 1:
        parts.append(knots[:-1] / 2 + knots[1:] / 2)
        parts.append(knots[:-1] * (2 / 3) + knots[1:] / 3)
    if knots.size:
        parts += [knots[:1] - 2.5, knots[-1:] + 2.5]
    parts.append(np.array([-1e6, -17.0, -1.0, 0.0, 0.3, 1.0, 17.0, 1e6]))
    parts.append(np.linspace(1e-9, 1 - 1e-9, 97) if unit else np.linspace(-6, 6, 97))
    g = np.concatenate(parts)
    g = g[np.isfinite(g)]
    # ties; and +-inf, NaN, which a binary graph answers as predict does
    return np.concatenate([g, g[:25], g[:25], [-np.inf, np.inf, np.nan]])


def largest_gap(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want|; NaN where predict gives NaN is no gap, NaN elsewhere an infinite one."""
    same_nan = np.isnan(got) & np.isnan(want)
    if np.any(np.isnan(got) != np.isnan(want)):
        return float("inf")
    return float(np.max(np.abs(got[~same_nan] - want[~same_nan]), initial=0.0))


def expected(calibrator: Any, scores: np.ndarray) -> dict[str, np.ndarray]:
    with np.errstate(invalid="ignore", over="ignore"):
        answers = {"probabilities": calibrator.predict(scores)}
    if isinstance(calibrator, VennAbersCalibrator) or (
        isinstance(calibrator, OneVsRest) and calibrator.method == "venn_abers"
    ):
        answers["p0"], answers["p1"] = calibrator.predict_interval(scores)
    return answers


def assert_parity(calibrator: Any, n_classes: int, scores: np.ndarray) -> float:
    export = export_onnx(calibrator, n_classes)
    got = run(export.model, scores)
    want = expected(calibrator, scores)
    assert set(got) == set(want)
    worst = max(largest_gap(got[k], want[k]) for k in want)
    assert worst <= PARITY, worst
    assert export.parity <= PARITY  # the figure measured at export agrees
    return worst


BINARY_CASES = [
    ("platt", {}),
    ("platt", {"targets": "hard", "bound": "laplace"}),
    ("platt", {"trim": "trainset"}),
    ("isotonic", {}),
    ("isotonic", {"interpolation": "step"}),
    ("isotonic", {"bound": "laplace"}),
    ("isotonic", {"interpolation": "step", "bound": "laplace"}),
    ("logistic_correction", {}),
    ("beta", {}),
    ("beta", {"bound": "laplace"}),
    ("histogram_binning", {}),
    ("histogram_binning", {"n_bins": 3, "smoothing": "laplace", "bound": "laplace"}),
    ("minmax", {}),
    ("venn_abers", {}),
    ("venn_abers", {"mode": "cross", "folds": 3}),
]


@pytest.mark.parametrize(("method", "params"), BINARY_CASES)
@pytest.mark.parametrize("decimals", [-1, 1])  # distinct scores, and heavy ties
def test_binary_methods_match_predict(method: str, params: dict[str, Any], decimals: int) -> None:
    rng = np.random.default_rng(7)
    f, y, _ = sigmoid_batch(rng, 600, decimals=decimals)
    w = random_weights(rng, f.size)
    unit = method == "beta"
    if unit:
        f = 1.0 / (1.0 + np.exp(-f))
    calibrator = make_calibrator(method, params).fit(f, y, w)
    assert_parity(calibrator, 2, grid(knots_of(calibrator), unit=unit))


def test_isotonic_near_the_float_range_uses_the_clipped_interpolation() -> None:
    # thresholds at +-1e308: np.interp would overflow, so predict interpolates its own way
    calibrator = IsotonicCalibrator.from_state(
        {}, {"thresholds": [-1e308, -1.0, 0.0, 1e308], "values": [0.0, 0.25, 0.5, 1.0]}
    )
    assert not calibrator.interp_is_exact()
    scores = np.concatenate([grid(knots_of(calibrator)), [-1.7e308, 1.7e308, 5e307, -5e307]])
    assert_parity(calibrator, 2, scores)


@pytest.mark.parametrize(
    "state",
    [
        {"thresholds": [0.5], "values": [0.3]},  # one threshold: a constant
        {"thresholds": [0.0, 5e-324, 1e-300], "values": [0.1, 0.2, 0.9]},  # subnormal gaps
        {"thresholds": [-3.0, 2.0], "values": [0.0, 1.0]},
    ],
)
@pytest.mark.parametrize("interpolation", ["linear", "step"])
def test_isotonic_edge_maps(state: dict[str, Any], interpolation: str) -> None:
    calibrator = IsotonicCalibrator.from_state({"interpolation": interpolation}, state)
    assert_parity(calibrator, 2, grid(knots_of(calibrator)))


@pytest.mark.parametrize(
    ("cls", "state"),
    [
        (MinMaxScaling, {"min": 2.0, "max": 2.0}),  # constant batch: 0.5
        (MinMaxScaling, {"min": -1e308, "max": 1.5e308}),  # width overflows: halved
        (HistogramBinning, {"edges": [0.0, 1.0], "values": [0.4], "n_bins": 2}),  # one bin
        (PlattCalibrator, {"A": -1e300, "B": 3.0, "n_iter": 1}),  # saturates at once
        (PlattCalibrator, {"A": 0.0, "B": -2.0, "n_iter": 1}),
        (BetaCalibrator, {"a": 40.0, "b": 0.0, "c": -3.0}),
    ],
)
def test_other_edge_states(cls: Any, state: dict[str, Any]) -> None:
    calibrator = cls.from_state({}, state)
    unit = cls is BetaCalibrator
    assert_parity(calibrator, 2, grid(knots_of(calibrator), unit=unit))


@pytest.mark.parametrize(
    ("cls", "state"),
    [
        (MinMaxScaling, {"min": 1.3135331569108146e-08, "max": 1.0}),  # naive Bayes, hmda
        (MinMaxScaling, {"min": 1e-50, "max": 3e-50}),
        (PlattCalibrator, {"A": -(1.0 + 1e-9), "B": 1e-50, "n_iter": 1}),
        (BetaCalibrator, {"a": 1.0 + 1e-10, "b": 1.0 - 1e-10, "c": -1e-50}),
    ],
)
def test_constants_onnx_runtime_would_optimise_away(cls: Any, state: dict[str, Any]) -> None:
    # ONNX Runtime drops a Mul or Div by a constant that is 1 in float32 and a Sub of one
    # that is 0 in float32, also in DOUBLE graphs; the export must survive its optimiser
    calibrator = cls.from_state({}, state)
    low, high = (state["min"], state["max"]) if "min" in state else (0.0, 1.0)
    scores = np.concatenate([np.linspace(low, high, 101), grid(knots_of(calibrator), True)])
    assert_parity(calibrator, 2, scores)


@pytest.mark.parametrize(
    ("method", "params", "state"),
    [
        ("temperature", {}, {"T": 1.0 + 1e-9, "input": "logits"}),
        ("bostrom", {"r": "constant"}, {"mode": "constant", "r": 1e-9}),
        ("bostrom", {}, {"mode": "sigmoid", "a": 1.0 + 1e-9, "b": 1e-50}),
    ],
)
def test_k_class_constants_onnx_runtime_would_optimise_away(
    method: str, params: dict[str, Any], state: dict[str, Any]
) -> None:
    calibrator = load_calibrator(method, params, state, n_classes=3)
    rows = np.random.default_rng(2).dirichlet(np.ones(3), size=300)
    assert_parity(calibrator, 3, rows)


MULTICLASS_CASES = [
    ("temperature", {}, "logits"),
    ("temperature", {"bound": "laplace"}, "probabilities"),
    ("bostrom", {}, "probabilities"),
    ("bostrom", {"r": "constant", "bound": "laplace"}, "probabilities"),
    ("platt", {}, "logits"),
    ("isotonic", {"bound": "laplace"}, "logits"),
    ("isotonic", {"interpolation": "step"}, "probabilities"),
    ("beta", {}, "probabilities"),
    ("histogram_binning", {}, "logits"),
    ("venn_abers", {}, "logits"),
]


def multiclass_batch(rng: np.random.Generator, n: int, k: int, kind: str) -> Any:
    z = rng.normal(size=(n, k)) * 2.0
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    labels = np.array([rng.choice(k, p=row) for row in p])
    return (z if kind == "logits" else p), labels


def matrix_grid(calibrator: Any, scores: np.ndarray, kind: str) -> np.ndarray:
    """Fresh rows like the batch's, rows with ties, extreme rows, and for one-vs-rest each
    class's knot grid in its column."""
    rows = [scores[:200]]
    k = scores.shape[1]
    if kind == "logits":
        rows += [np.full((1, k), 3.0), np.resize([1e6, -1e6], (1, k)), np.eye(k) * 40.0]
    else:
        rows += [
            np.full((1, k), 1.0 / k),
            np.eye(k),
            np.resize([0.5, 0.5] + [0.0] * (k - 2), (1, k)),
        ]
    if isinstance(calibrator, OneVsRest):
        columns = [grid(knots_of(c), unit=kind == "probabilities") for c in calibrator.calibrators]
        size = max(c.size for c in columns)
        stacked = np.column_stack([np.resize(c, size) for c in columns])
        if kind == "probabilities":
            stacked = np.clip(stacked, 0.0, 1.0)
        rows.append(stacked)
    return np.vstack(rows)


@pytest.mark.parametrize(("method", "params", "kind"), MULTICLASS_CASES)
def test_multiclass_methods_match_predict(method: str, params: dict[str, Any], kind: str) -> None:
    rng = np.random.default_rng(11)
    scores, labels = multiclass_batch(rng, 500, 4, kind)
    calibrator = make_multiclass(method, params).fit(scores, labels, random_weights(rng, 500))
    assert_parity(calibrator, 4, matrix_grid(calibrator, scores, kind))


def test_one_vs_rest_rows_of_zeros_become_uniform() -> None:
    # unbounded isotonic maps whose left ends are 0: a row below every class's range
    binary = {"thresholds": [0.0, 1.0], "values": [0.0, 1.0]}
    calibrator = load_calibrator(
        "isotonic", {}, {"one_vs_rest": [binary, binary, binary]}, n_classes=3
    )
    rows = np.array([[-5.0, -4.0, -3.0], [0.5, -1.0, -1.0], [0.2, 0.2, 0.9]])
    got = run(export_onnx(calibrator, 3).model, rows)["probabilities"]
    np.testing.assert_array_equal(got[0], np.full(3, 1.0 / 3.0))
    assert np.max(np.abs(got - calibrator.predict(rows))) <= PARITY


@settings(max_examples=25, deadline=None)
@given(
    method=st.sampled_from(["isotonic", "venn_abers", "histogram_binning", "platt"]),
    interpolation=st.sampled_from(["linear", "step"]),
    n=st.integers(2, 300),
    decimals=st.integers(-1, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_fits_match_predict(
    method: str, interpolation: str, n: int, decimals: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    f, y, _ = sigmoid_batch(rng, n, decimals=decimals)
    params = {"interpolation": interpolation} if method == "isotonic" else {}
    calibrator = make_calibrator(method, params).fit(f, y, random_weights(rng, n))
    assert_parity(calibrator, 2, grid(knots_of(calibrator)))


@pytest.mark.parametrize(("method", "params"), BINARY_CASES[::2])
def test_float32_graphs_stay_within_their_bound(method: str, params: dict[str, Any]) -> None:
    rng = np.random.default_rng(3)
    f, y, w = sigmoid_batch(rng, 400)
    unit = method == "beta"
    if unit:
        f = 1.0 / (1.0 + np.exp(-f))
    calibrator = make_calibrator(method, params).fit(f, y, w)
    export = export_onnx(calibrator, 2, dtype="float32")
    scores = grid(knots_of(calibrator), unit=unit).astype(np.float32)
    got = run(export.model, scores)
    assert all(v.dtype == np.float32 for v in got.values())
    want = expected(calibrator, scores.astype(np.float64))
    worst = max(largest_gap(got[k].astype(np.float64), want[k]) for k in want)
    assert worst <= FLOAT32_BOUND
    assert export.parity <= FLOAT32_BOUND
    # the bound is tight enough to mean something: outputs are rounded, not exact
    assert worst > 0.0


def test_graphs_use_standard_operators_and_double_tensors() -> None:
    rng = np.random.default_rng(5)
    f, y, w = sigmoid_batch(rng, 300)
    scores, labels = multiclass_batch(rng, 300, 3, "probabilities")
    calibrators = [(make_calibrator(m, {}).fit(f, y, w), 2) for m in ("isotonic", "venn_abers")]
    calibrators.append((make_multiclass("bostrom", {}).fit(scores, labels, np.ones(300)), 3))
    for calibrator, k in calibrators:
        model = onnx.load_from_string(export_onnx(calibrator, k).model)
        onnx.checker.check_model(model, full_check=True)
        assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
        assert {node.domain for node in model.graph.node} == {""}
        declared = [*model.graph.input, *model.graph.output]
        assert {v.type.tensor_type.elem_type for v in declared} == {onnx.TensorProto.DOUBLE}
        shape = [
            d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim
        ]
        assert shape == (["n"] if k == 2 else ["n", k])


def test_every_binary_method_has_a_graph() -> None:
    assert set(EMITTERS) == set(BINARY.values())


def test_a_graph_that_disagrees_with_predict_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    f, y, w = sigmoid_batch(rng, 300)
    calibrator = make_calibrator("platt", {}).fit(f, y, w)

    def off_by_a_little(g: Any, c: PlattCalibrator, scores: str) -> dict[str, str]:
        shifted = PlattCalibrator.from_state({}, {"A": c.A, "B": c.B + 1e-9, "n_iter": 1})
        return platt_graph(g, shifted, scores)

    platt_graph = EMITTERS[PlattCalibrator]
    monkeypatch.setitem(EMITTERS, PlattCalibrator, off_by_a_little)
    with pytest.raises(ExportError, match="differs from predict"):
        export_onnx(calibrator, 2)


@pytest.mark.parametrize(
    ("method", "state", "k"),
    [
        # a beta fit on 50,000 separable scores near 1e-10: a = 1.7e5 amplifies ln f's last bit
        (
            "beta",
            {"a": 171446.24800837753, "b": 1.7166024670035215e-05, "c": 3947693.4357531364},
            2,
        ),
        ("beta", {"a": 6282.107, "b": 0.0, "c": 144640.882}, 2),
        # temperature at its lower bound on probability rows: the logs' last bits over T
        ("temperature", {"T": 4.53999377861744e-05, "input": "probabilities"}, 20),
    ],
)
def test_maps_that_magnify_a_runtimes_last_bits_are_refused(
    method: str, state: dict[str, Any], k: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    calibrator = load_calibrator(method, {}, state, n_classes=k)
    with pytest.raises(ExportError, match="differs from predict"):
        export_onnx(calibrator, k)
    # warranted: ONNX Runtime's own answer on the probes is past the bound
    monkeypatch.setattr(app.export.exporter, "PARITY_BOUND", float("inf"))
    export = export_onnx(calibrator, k)
    scores = probe_scores(calibrator, k)
    got = run(export.model, scores)["probabilities"]
    assert largest_gap(got, expected(calibrator, scores)["probabilities"]) > PARITY


def test_a_large_isotonic_export_stays_within_its_memory() -> None:
    # 2 x 10^5 thresholds: 1.1 x 10^6 probes through 19 search rounds, evaluated in chunks
    m = 200_000
    x = np.sort(np.random.default_rng(0).normal(size=m))
    state = {"thresholds": x.tolist(), "values": np.linspace(0.01, 0.99, m).tolist()}
    calibrator = load_calibrator("isotonic", {}, state)
    tracemalloc.start()
    try:
        export = export_onnx(calibrator, 2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert export.parity == 0.0
    assert peak < 40 * len(export.model), (peak >> 20, len(export.model) >> 20)


@pytest.mark.parametrize("given", ["probabilities", "logits"])
def test_many_classes_never_cost_a_k_by_k_probe_matrix(given: str) -> None:
    """Up to a thousand classes every class has its one-hot probe row (as a probability row,
    or its logs); at 60,000 the probes stay within a few times 2^22 entries (np.eye(60000)
    alone would be 29 GB), and the first and the last class keep theirs."""

    def probes(k: int) -> NDArray[np.float64]:
        state = {"T": 1.5, "input": given}
        return probe_scores(load_calibrator("temperature", {}, state, n_classes=k), k)

    top = 1.0 if given == "probabilities" else 0.0  # a one-hot row's logs: 0 and log(1e-300)
    small = probes(1000)
    assert small.shape[1] == 1000
    hot = small[(small == top).sum(axis=1) == 1]
    assert (hot == top).any(axis=0).all()  # every class has its one-hot row
    k = 60_000
    large = probes(k)
    assert large.shape[1] == k
    assert large.size <= 4 * (1 << 22), large.shape
    hot = large[(large == top).sum(axis=1) == 1]
    assert (hot[:, 0] == top).any()
    assert (hot[:, -1] == top).any()


def test_an_export_over_its_budget_stops_between_classes_and_between_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The graph's class branches and the probes' chunks each pass a checkpoint: a job whose
    client leaves stops at the next class or chunk."""
    budget = Budget(seconds=60.0)
    seen = 0

    def leaving_after_three(real: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            nonlocal seen
            seen += 1
            if seen == 3:
                budget.cancelled.set()
            return real(*args, **kwargs)

        return run

    def abandoned(run: Any) -> None:
        enter(budget)
        with pytest.raises(Abandoned):
            run()

    k = 20
    scores = np.random.default_rng(1).dirichlet(np.ones(k), size=200)
    labels = np.arange(200) % k
    one_vs_rest = OneVsRest(PlattCalibrator, {}).fit(scores, labels, np.ones(200))
    with monkeypatch.context() as patch:
        patch.setattr(app.export.multiclass, "binary_outputs", leaving_after_three(binary_outputs))
        contextvars.copy_context().run(abandoned, lambda: export_onnx(one_vs_rest, k))
    assert seen == 3  # the fourth class's branch was never built

    seen = 0
    budget.cancelled.clear()
    isotonic = make_calibrator("isotonic", {}).fit(*sigmoid_batch(np.random.default_rng(3), 2000))
    monkeypatch.setattr(app.export.exporter, "PROBE_ROWS", 100)  # many chunks
    monkeypatch.setattr(isotonic, "predict", leaving_after_three(isotonic.predict))
    contextvars.copy_context().run(abandoned, lambda: export_onnx(isotonic, 2))
    assert seen == 3  # predict runs once per chunk: the fourth chunk never started
