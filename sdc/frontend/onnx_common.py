"""What every part of the ONNX frontend shares: dtype tables, attribute and tensor readers, and the
tables that map simple ONNX ops to one sdc op each.

It imports no other ONNX frontend module, so the graph importer (onnx.py), the node importer
(onnx_ops.py) and its op mixins (onnx_ops_indexing.py, onnx_ops_nn.py) all import downward from
here and never from each other's back (test/py/test_import_graph.py checks it).
"""

from __future__ import annotations

import operator
from typing import Callable

import numpy as np
import onnx
import sympy
import torch
from onnx import helper, numpy_helper

from sdc.diagnostics import SdcError
from sdc.dialect.shapes import ShapeError
from sdc.frontend.values import V, const_value, is_int, sym_int

# ONNX TensorProto element types -> sdc element types
ONNX_DTYPES: dict[int, str] = {
    onnx.TensorProto.FLOAT: "f32",
    onnx.TensorProto.FLOAT16: "f16",
    onnx.TensorProto.BFLOAT16: "bf16",
    onnx.TensorProto.DOUBLE: "f64",
    onnx.TensorProto.BOOL: "i1",
    onnx.TensorProto.INT8: "i8",
    onnx.TensorProto.INT16: "i16",
    onnx.TensorProto.INT32: "i32",
    onnx.TensorProto.INT64: "i64",
    onnx.TensorProto.UINT8: "ui8",
    onnx.TensorProto.UINT16: "ui16",
    onnx.TensorProto.UINT32: "ui32",
    onnx.TensorProto.UINT64: "ui64",
}
SDC_TO_ONNX: dict[str, int] = {v: k for k, v in ONNX_DTYPES.items()}
# The float types that attributes such as `softmax_precision` and `precision` name.
ONNX_FLOAT_TYPES: dict[int, str] = {k: v for k, v in ONNX_DTYPES.items() if v in ("f32", "f16", "f64", "bf16")}
DEFAULT_DOMAINS = ("", "ai.onnx")
INT64_MAX = 2**63 - 1


def onnx_dtype(code: int, what: str) -> str:
    """The sdc element type of an ONNX type code; ShapeError naming `what` if sdc has none."""
    if code not in ONNX_DTYPES:
        raise ShapeError(f"{what} {onnx.TensorProto.DataType.Name(code)} is unsupported")
    return ONNX_DTYPES[code]


def node_attrs(node: onnx.NodeProto) -> dict:
    """A node's attributes as Python values (strings decoded)."""
    out = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8", "replace") for v in value]
        out[a.name] = value
    return out


def tensor_value(tensor: onnx.TensorProto, what: str) -> V:
    """An ONNX tensor (initializer, Constant value, subgraph initializer) as a compile-time value."""
    if tensor.data_type not in ONNX_DTYPES:
        name = onnx.TensorProto.DataType.Name(tensor.data_type) if tensor.data_type else "undefined"
        raise SdcError(f"{what} has unsupported element type {name}")
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as e:  # onnx raises several kinds for a malformed tensor
        raise SdcError(f"{what} cannot be read: {e}") from None
    if ONNX_DTYPES[tensor.data_type] == "bf16":
        t = torch.from_numpy(np.asarray(array, dtype=np.float32)).to(torch.bfloat16)
        return V("bf16", tuple(t.shape), torch_const=t)
    return const_value(np.asarray(array))


# ---------------------------------------------------------------- ops that map to one sdc op

UNARY: dict[str, str] = {
    "Neg": "neg", "Abs": "abs", "Sign": "sign", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
    "Reciprocal": "reciprocal", "Tanh": "tanh", "Sigmoid": "sigmoid", "Erf": "erf", "Sin": "sin",
    "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh",
    "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh", "Floor": "floor",
    "Ceil": "ceil", "Round": "round", "Relu": "relu", "Softplus": "softplus", "Softsign": "softsign",
    "Mish": "mish", "Not": "not", "IsNaN": "isnan", "BitwiseNot": "bitwise_not", "HardSwish": "hard_swish",
}
BINARY: dict[str, str] = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Equal": "eq", "Less": "lt",
    "LessOrEqual": "le", "Greater": "gt", "GreaterOrEqual": "ge", "And": "and", "Or": "or",
    "Xor": "xor", "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor",
}
VARIADIC: dict[str, str] = {"Sum": "add", "Max": "max", "Min": "min"}
REDUCE: dict[str, str] = {"ReduceSum": "reduce_sum", "ReduceMean": "reduce_mean", "ReduceMax": "reduce_max",
                          "ReduceMin": "reduce_min", "ReduceProd": "reduce_prod"}
# Reductions whose axes became an input at opset 18 (ReduceSum at 13).
AXES_INPUT_SINCE: dict[str, int] = {"ReduceSum": 13}


# ---------------------------------------------------------------- shape arithmetic over symbolic dims


def _sym_binary(fn):
    return np.frompyfunc(lambda a, b: sym_int(fn(a, b)), 2, 1)


def _floordiv(a, b):
    if is_int(a) and is_int(b):
        return int(a / b) if (a < 0) != (b < 0) else a // b  # ONNX integer Div truncates
    return sympy.floor(a / b)


def sym_eq(a, b) -> bool:
    return bool(sympy.simplify(a - b) == 0) if not (is_int(a) and is_int(b)) else a == b


# The binary ops that Shape -> ... -> Reshape chains compute with, evaluated elementwise over
# object arrays of ints and sympy dims.
SYM_BINARY: dict[str, Callable] = {
    "Add": _sym_binary(operator.add),
    "Sub": _sym_binary(operator.sub),
    "Mul": _sym_binary(operator.mul),
    "Div": _sym_binary(_floordiv),
    "Mod": _sym_binary(lambda a, b: sympy.Mod(a, b)),
    "Max": _sym_binary(lambda a, b: sympy.Max(a, b)),
    "Min": _sym_binary(lambda a, b: sympy.Min(a, b)),
}
