"""A small builder of ONNX graphs: named constants, nodes, and the model around them.

Every node is a standard ``ai.onnx`` operator of :data:`OPSET` (ONNX Runtime 1.13 and later,
Triton's and KServe's ONNX backends); nothing from ``ai.onnx.ml``, no custom domain. The
builder only names things: each call returns the name of the tensor it produces, so the
exporters read as the formulas they implement.
"""

from __future__ import annotations

from itertools import count
from typing import Any

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
"""The ``ai.onnx`` opset of every exported model (ReduceMax still takes ``axes`` as an
attribute; ReduceSum takes them as an input, as since opset 13)."""

IR_VERSION = 8
"""The IR version that goes with opset 17, so older runtimes load the model."""

DOUBLE = TensorProto.DOUBLE
FLOAT = TensorProto.FLOAT


class ExportError(ValueError):
    """A calibrator that has no ONNX graph, or whose graph does not match its predict."""


class GraphBuilder:
    """The nodes and constants of one graph, in the order they are added."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._ids = count()

    def _name(self, hint: str) -> str:
        return f"{hint}_{next(self._ids)}"

    def const(self, value: float | int | NDArray[np.generic], hint: str = "c") -> str:
        """A constant tensor: a Python float becomes a DOUBLE scalar, an int an INT64 scalar,
        an array keeps its dtype and shape."""
        if isinstance(value, np.ndarray):
            array = value
        elif isinstance(value, bool | int | np.integer):
            array = np.array(value, dtype=np.int64)
        else:
            array = np.array(value, dtype=np.float64)
        name = self._name(hint)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        """A node of ``op_type`` on ``inputs`` (tensor names); the name of its one output."""
        output = self._name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [output], **attributes))
        return output

    def times(self, x: str, c: float) -> str:
        """x * c for a constant c, computed as x * c wherever the runtime keeps it: ONNX
        Runtime's optimiser drops a Mul by a constant that is 1 *in float32*, also for DOUBLE
        (1 - 1.3e-8 went missing from a naive Bayes min-max scaling). Such a c is applied as
        (x * 0.5) * (2 c), the same double unless x * 0.5 is subnormal."""
        if _float32_one(c):
            return self.op("Mul", self.op("Mul", x, self.const(0.5)), self.const(2.0 * c))
        return self.op("Mul", x, self.const(c))

    def divided(self, x: str, c: float) -> str:
        """x / c for a constant c, kept from ONNX Runtime's optimiser as :meth:`times` is:
        (x * 0.5) / (c * 0.5) when c is 1 in float32."""
        if _float32_one(c):
            return self.op("Div", self.op("Mul", x, self.const(0.5)), self.const(0.5 * c))
        return self.op("Div", x, self.const(c))

    def minus(self, x: str, c: float) -> str:
        """x - c for a constant c. The optimiser also drops a Sub of a constant that is 0 in
        float32 (|c| < 1.4e-45), which divided by a tiny width is no longer negligible; such a
        c is applied as -(c - x), the same double."""
        if c != 0.0 and abs(c) < float(np.finfo(np.float32).smallest_subnormal) / 2:
            return self.op("Neg", self.op("Sub", self.const(c), x))
        return self.op("Sub", x, self.const(c))

    def full_like(self, like: str, value: float | int) -> str:
        """A tensor shaped like ``like`` filled with ``value`` (DOUBLE for a float, INT64 for
        an int)."""
        dtype = np.int64 if isinstance(value, int) else np.float64
        filler = numpy_helper.from_array(np.array([value], dtype=dtype))
        return self.op("ConstantOfShape", self.op("Shape", like), value=filler)

    def rename(self, tensor: str, name: str) -> None:
        """Give ``tensor`` the graph output name ``name`` (an Identity node)."""
        self.nodes.append(helper.make_node("Identity", [tensor], [name]))

    def model(
        self,
        inputs: list[onnx.ValueInfoProto],
        outputs: list[onnx.ValueInfoProto],
        *,
        name: str,
        doc: str,
    ) -> onnx.ModelProto:
        """The checked model of this graph (``onnx.checker`` with shape inference)."""
        graph = helper.make_graph(
            self.nodes, name, inputs, outputs, initializer=self.initializers, doc_string=doc
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="calibration-service",
            ir_version=IR_VERSION,
        )
        onnx.checker.check_model(model, full_check=True)
        return model


def _float32_one(c: float) -> bool:
    with np.errstate(over="ignore"):  # 1e300 is inf in float32: not 1
        return c != 1.0 and bool(np.float32(c) == np.float32(1.0))


def tensor(name: str, element_type: int, shape: list[str | int]) -> onnx.ValueInfoProto:
    """An input or output declaration: ``shape`` lists sizes and symbolic dimensions."""
    return helper.make_tensor_value_info(name, element_type, shape)
