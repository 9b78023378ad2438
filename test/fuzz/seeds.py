"""The valid inputs the fuzzer mutates: small ONNX models built here, the IR files of test/lit,
and one compiled artifact. Everything is built deterministically (fixed weights)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[2]


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array, name)


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _mlp() -> onnx.ModelProto:
    r = _rng()
    nodes = [
        h.make_node("MatMul", ["x", "w1"], ["h0"], name="mm"),
        h.make_node("Add", ["h0", "b1"], ["h1"], name="bias"),
        h.make_node("Relu", ["h1"], ["h2"], name="relu"),
        h.make_node("Gemm", ["h2", "w2", "b2"], ["h3"], name="gemm", transB=1, alpha=0.5),
        h.make_node("Softmax", ["h3"], ["y"], name="softmax", axis=-1),
    ]
    inits = [_init("w1", r.standard_normal((8, 16)).astype(np.float32)),
             _init("b1", r.standard_normal(16).astype(np.float32)),
             _init("w2", r.standard_normal((4, 16)).astype(np.float32)),
             _init("b2", r.standard_normal(4).astype(np.float32))]
    g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", T.FLOAT, ["B", 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["B", 4])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=10)


def _conv() -> onnx.ModelProto:
    r = _rng()
    nodes = [
        h.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                    strides=[1, 1], dilations=[1, 1], group=1),
        h.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"], name="bn", epsilon=1e-5),
        h.make_node("MaxPool", ["n"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("AveragePool", ["p"], ["q"], name="avg", kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1]),
        h.make_node("GlobalAveragePool", ["q"], ["gp"], name="gap"),
        h.make_node("Flatten", ["gp"], ["y"], name="flat", axis=1),
    ]
    inits = [_init("w", r.standard_normal((4, 3, 3, 3)).astype(np.float32)),
             _init("b", r.standard_normal(4).astype(np.float32)),
             _init("s", r.random(4).astype(np.float32) + 0.5), _init("bb", r.standard_normal(4).astype(np.float32)),
             _init("m", r.standard_normal(4).astype(np.float32)), _init("v", r.random(4).astype(np.float32) + 0.5)]
    g = h.make_graph(nodes, "conv", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 15)], ir_version=10)


def _shapes() -> onnx.ModelProto:
    """Shape arithmetic over symbolic dims, the constructs exporters produce."""
    nodes = [
        h.make_node("Shape", ["x"], ["sh"], name="shape"),
        h.make_node("Gather", ["sh", "i0"], ["b"], name="gather_b", axis=0),
        h.make_node("Gather", ["sh", "i1"], ["t"], name="gather_t", axis=0),
        h.make_node("Unsqueeze", ["b", "ax0"], ["b1"], name="unsq_b"),
        h.make_node("Unsqueeze", ["t", "ax0"], ["t1"], name="unsq_t"),
        h.make_node("Concat", ["b1", "t1", "c2", "c4"], ["newshape"], name="concat", axis=0),
        h.make_node("Reshape", ["x", "newshape"], ["r"], name="reshape"),
        h.make_node("Transpose", ["r"], ["tr"], name="transpose", perm=[0, 2, 1, 3]),
        h.make_node("Cast", ["tr"], ["tc"], name="cast", to=T.FLOAT),
        h.make_node("Slice", ["tc", "st", "en", "axs"], ["sl"], name="slice"),
        h.make_node("ConstantOfShape", ["cshape"], ["ones"], name="cos",
                    value=h.make_tensor("v", T.FLOAT, [1], [1.0])),
        h.make_node("Range", ["r0", "r8", "r1"], ["ramp"], name="range"),
        h.make_node("Cast", ["ramp"], ["rampf"], name="cast_ramp", to=T.FLOAT),
        h.make_node("Mul", ["ones", "rampf"], ["scaled"], name="mul"),
        h.make_node("Add", ["x", "scaled"], ["y0"], name="add"),
        h.make_node("ReduceMean", ["y0"], ["y"], name="mean", axes=[-1], keepdims=1),
        h.make_node("Identity", ["sl"], ["z"], name="ident"),
    ]
    i64 = lambda name, v: _init(name, np.array(v, dtype=np.int64))  # noqa: E731
    inits = [i64("i0", 0), i64("i1", 1), i64("ax0", [0]), i64("c2", [2]), i64("c4", [4]), i64("st", [0]),
             i64("en", [1]), i64("axs", [1]), i64("cshape", [1, 1, 8]), i64("r0", 0), i64("r8", 8), i64("r1", 1)]
    g = h.make_graph(nodes, "shapes", [h.make_tensor_value_info("x", T.FLOAT, ["B", "T", 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["B", "T", 1]),
                      h.make_tensor_value_info("z", T.FLOAT, ["B", 1, "T", 4])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=10)


def _misc() -> onnx.ModelProto:
    r = _rng()
    nodes = [
        h.make_node("LayerNormalization", ["x", "g", "be"], ["ln"], name="ln", axis=-1, epsilon=1e-5),
        h.make_node("Split", ["ln", "sp"], ["a", "b"], name="split", axis=1),
        h.make_node("Concat", ["b", "a"], ["ba"], name="concat", axis=1),
        h.make_node("Clip", ["ba", "lo", "hi"], ["cl"], name="clip"),
        h.make_node("Greater", ["cl", "zero"], ["gt"], name="gt"),
        h.make_node("Where", ["gt", "cl", "ba"], ["wh"], name="where"),
        h.make_node("Pad", ["wh", "pads"], ["pd"], name="pad", mode="constant"),
        h.make_node("Tile", ["pd", "reps"], ["tl"], name="tile"),
        h.make_node("Squeeze", ["tl", "sq"], ["s1"], name="squeeze"),
        h.make_node("Unsqueeze", ["s1", "sq"], ["u1"], name="unsqueeze"),
        h.make_node("ReduceSum", ["u1", "rs"], ["y"], name="rsum", keepdims=0),
        h.make_node("Expand", ["x", "exp"], ["ex"], name="expand"),
        h.make_node("Tanh", ["ex"], ["z"], name="tanh"),
    ]
    i64 = lambda name, v: _init(name, np.array(v, dtype=np.int64))  # noqa: E731
    f32 = lambda name, v: _init(name, np.array(v, dtype=np.float32))  # noqa: E731
    inits = [_init("g", r.standard_normal(6).astype(np.float32)), _init("be", r.standard_normal(6).astype(np.float32)),
             i64("sp", [2, 4]), f32("lo", -1.0), f32("hi", 1.0), f32("zero", 0.0), i64("pads", [0, 1, 0, 1]),
             i64("reps", [1, 2]), i64("sq", [0]), i64("rs", [1]), i64("exp", [2, 1, 6])]
    g = h.make_graph(nodes, "misc", [h.make_tensor_value_info("x", T.FLOAT, [1, 6])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1]), h.make_tensor_value_info("z", T.FLOAT, [2, 1, 6])],
                     inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)], ir_version=10)


@functools.lru_cache(maxsize=None)
def onnx_models() -> tuple[bytes, ...]:
    """The serialized seed models (each passes onnx.checker)."""
    out = []
    for build in (_mlp, _conv, _shapes, _misc):
        model = build()
        onnx.checker.check_model(model, full_check=True)
        out.append(model.SerializeToString())
    return tuple(out)


@functools.lru_cache(maxsize=None)
def ir_texts() -> tuple[str, ...]:
    """Every split chunk of the test/lit IR files (valid and invalid IR alike)."""
    chunks = []
    for path in sorted((ROOT / "test" / "lit").rglob("*.mlir")):
        if "Output" in path.parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for chunk in text.split("// -----"):
            if "func.func" in chunk or "sdc." in chunk:
                chunks.append(chunk)
    return tuple(chunks)


ARTIFACT_PROGRAM = """
func.func @main(%x: tensor<?x16xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", 16]>},
                %s: tensor<16xf32> {sdc.name = "s"})
    -> (tensor<?x16xf32> {sdc.name = "y"}, tensor<16xf32> {sdc.name = "t"}) {
  %w = "sdc.parameter"() {name = "scale"} : () -> tensor<16xf32>
  %c = "sdc.iota"() {dimension = 0 : i64, dtype = f32, shape = [16]} : () -> tensor<16xf32>
  %0 = "sdc.mul"(%x, %w) : (tensor<?x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %1 = "sdc.add"(%0, %c) : (tensor<?x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %2 = "sdc.clip"(%1) {min = 0.0 : f64} : (tensor<?x16xf32>) -> tensor<?x16xf32>
  %3 = "sdc.exp"(%s) : (tensor<16xf32>) -> tensor<16xf32>
  return %2, %3 : tensor<?x16xf32>, tensor<16xf32>
}
"""


def build_artifact(path: Path) -> Path:
    """The seed artifact: a parameter, a folded constant, a symbolic batch and two outputs."""
    from sdc.compiler import compile_module
    from sdc.ir_text import parse_module

    scale = np.random.default_rng(3).standard_normal(16).astype(np.float32)
    compile_module(parse_module(ARTIFACT_PROGRAM), {"scale": scale}, output=path)
    return path
