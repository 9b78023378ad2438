"""Tiny ONNX models for the lit tests of the ONNX importer: `onnx_models.py NAME OUT.onnx`.

Built here rather than committed as binaries, so a test's model reads next to its CHECK lines.
Weights are seeded, so the imported IR is the same on every run.
"""

from __future__ import annotations

import sys
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
RNG = np.random.default_rng(0)


def _weight(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def _ints(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def mlp() -> onnx.ModelProto:
    """x[batch, 16] -> Gemm(32) -> Relu -> Gemm(4): fc1.weight (512 values) becomes a parameter."""
    return _model(
        [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="fc1", transB=1),
         helper.make_node("Relu", ["h"], ["a"], name="relu"),
         helper.make_node("Gemm", ["a", "fc2.weight", "fc2.bias"], ["y"], name="fc2", transB=1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [_weight("fc1.weight", 32, 16), _weight("fc1.bias", 32), _weight("fc2.weight", 4, 32), _weight("fc2.bias", 4)])


def conv_bn() -> onnx.ModelProto:
    """Conv (3x3, pad 1, stride 2) with a bias, then inference-mode BatchNormalization."""
    return _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                          strides=[2, 2]),
         helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"], name="bn",
                          epsilon=1e-3)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])],
        [_weight("w", 4, 3, 3, 3), _weight("b", 4), _weight("scale", 4), _weight("shift", 4), _weight("mean", 4),
         numpy_helper.from_array(np.abs(RNG.standard_normal(4)).astype(np.float32) + 0.5, "var")])


def symbolic_batch() -> onnx.ModelProto:
    """A named batch dim (`N`) and an unnamed one; ReduceSum over the last axis keeps N."""
    return _model(
        [helper.make_node("Add", ["x", "x"], ["s"], name="double"),
         helper.make_node("ReduceSum", ["s", "axes"], ["y"], name="sum", keepdims=0)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", None, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", None])],
        [_ints("axes", [-1])])


def reshape_arith() -> onnx.ModelProto:
    """The exporters' Shape -> Gather -> Mul -> Concat -> Reshape chain: [batch, seq, 64] to
    [batch*seq, 64], and Shape[0:2] ++ [4, 16] to split the heads. It folds into attributes."""
    return _model(
        [helper.make_node("Shape", ["x"], ["shape"], name="shape"),
         helper.make_node("Gather", ["shape", "zero"], ["b"], name="take_batch", axis=0),
         helper.make_node("Gather", ["shape", "one"], ["s"], name="take_seq", axis=0),
         helper.make_node("Mul", ["b", "s"], ["bs"], name="rows"),
         helper.make_node("Concat", ["bs", "width"], ["flat_shape"], name="flat_shape", axis=0),
         helper.make_node("Reshape", ["x", "flat_shape"], ["flat"], name="flatten"),
         helper.make_node("Slice", ["shape", "zero", "two"], ["lead"], name="lead"),
         helper.make_node("Concat", ["lead", "heads"], ["head_shape"], name="head_shape", axis=0),
         helper.make_node("Reshape", ["x", "head_shape"], ["split"], name="split_heads")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 64])],
        [helper.make_tensor_value_info("flat", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("split", TensorProto.FLOAT, None)],
        [_ints("zero", [0]), _ints("one", [1]), _ints("two", [2]), _ints("width", [64]), _ints("heads", [4, 16])])


def unsupported_one() -> onnx.ModelProto:
    """One op sdc has no importer for (GlobalLpPool), in the node `lp_pool`, after a supported one."""
    return _model(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("GlobalLpPool", ["r"], ["y"], name="lp_pool")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


def unsupported_many() -> onnx.ModelProto:
    """Three unsupported nodes (two ops of the default domain, one of another domain) among supported ones."""
    model = _model(
        [helper.make_node("RandomNormalLike", ["x"], ["noise"], name="noise"),
         helper.make_node("Add", ["x", "noise"], ["n"], name="add"),
         helper.make_node("GlobalLpPool", ["n"], ["p"], name="lp_pool"),
         helper.make_node("FancyOp", ["p"], ["y"], name="fancy", domain="com.example")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    return model


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    f.__name__: f for f in (mlp, conv_bn, symbolic_batch, reshape_arith, unsupported_one, unsupported_many)
}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in MODELS:
        sys.exit(f"usage: onnx_models.py {{{'|'.join(MODELS)}}} OUT.onnx")
    onnx.save(MODELS[sys.argv[1]](), sys.argv[2])
