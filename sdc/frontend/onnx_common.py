"""What every part of the ONNX frontend shares: dtype tables, attribute and tensor readers, and the
tables that map simple ONNX ops to one sdc op each.

It imports no other ONNX frontend module, so the graph importer (onnx.py), the node importer
(onnx_ops.py) and its op mixins (onnx_ops_indexing.py, onnx_ops_nn.py) all import downward from
here and never from each other's back (test/py/test_import_graph.py checks it).
"""

from __future__ import annotations

import functools
import operator
from typing import Callable

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

from sdc.diagnostics import SdcError
from sdc.dialect import symbolic
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


def dtype_name(code: int) -> str:
    """ONNX's name of an element type code, or the number itself for a code ONNX does not know
    (building an error message must not raise)."""
    if not code:
        return "undefined"
    try:
        return onnx.TensorProto.DataType.Name(code)
    except ValueError:
        return f"{code} (not an ONNX element type)"


def onnx_dtype(code: int, what: str) -> str:
    """The sdc element type of an ONNX type code; ShapeError naming `what` if sdc has none."""
    if not isinstance(code, int) or code not in ONNX_DTYPES:
        raise ShapeError(f"{what} {dtype_name(code) if isinstance(code, int) else repr(code)} is unsupported")
    return ONNX_DTYPES[code]


# ---------------------------------------------------------------- node schema, checked at dispatch
#
# ONNX's own operator schemas (onnx.defs) are the table: for the node's op at the model's opset
# they say which attributes are required and of which type, how many inputs an op takes and
# which may be omitted (''). `check_node` holds every node to them before its op method runs, so
# no method meets a missing attribute, an INT where it reads a list, or a missing input. The few
# value rules that schemas cannot express (sizes that must be positive) are one table below.

_ATTR_TYPE_NAMES = {v: k for k, v in onnx.AttributeProto.AttributeType.items()}
# Attribute values that ops divide by or step with: every entry must be positive.
POSITIVE_ATTRS: frozenset[str] = frozenset({"strides", "dilations", "kernel_shape", "group", "blocksize",
                                            "block_size", "num_heads", "q_num_heads", "kv_num_heads"})
# Attributes ONNX leaves optional that sdc's importer needs (it does not infer them).
SDC_REQUIRED_ATTRS: dict[str, tuple[str, ...]] = {"RNN": ("hidden_size",), "GRU": ("hidden_size",),
                                                  "LSTM": ("hidden_size",)}
_ATTR_FIELDS = (("f", 1), ("i", 2), ("s", 3), ("t", 4), ("g", 5), ("sparse_tensor", 11), ("tp", 13))
_ATTR_LISTS = (("floats", 6), ("ints", 7), ("strings", 8), ("tensors", 9), ("graphs", 10),
               ("sparse_tensors", 12), ("type_protos", 14))


@functools.lru_cache(maxsize=None)
def _schema(op_type: str, opset: int):
    """The schema of `op_type` in effect at `opset`; None when ONNX has no such op at all
    (ShapeError when the op exists, but only from a later opset)."""
    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        pass
    try:
        first = onnx.defs.get_schema(op_type, "").since_version
    except onnx.defs.SchemaError:
        return None
    for version in range(1, onnx.defs.onnx_opset_version() + 1):
        try:
            first = onnx.defs.get_schema(op_type, version, "").since_version
            break
        except onnx.defs.SchemaError:
            continue
    raise ShapeError(f"{op_type} is not in ONNX opset {opset} (it was added in opset {first})")


def attribute_type(a: onnx.AttributeProto) -> int:
    """The attribute's type, inferred from the field that holds its value when the (optional in
    old IR versions) type field is unset; 0 when neither says."""
    if a.type:
        return a.type
    for name, code in _ATTR_FIELDS:
        if a.HasField(name):
            return code
    for name, code in _ATTR_LISTS:
        if len(getattr(a, name)):
            return code
    return 0


_ONNX_TYPE_STRINGS: dict[str, str] = {
    "f32": "tensor(float)", "f16": "tensor(float16)", "bf16": "tensor(bfloat16)", "f64": "tensor(double)",
    "i1": "tensor(bool)", "i8": "tensor(int8)", "i16": "tensor(int16)", "i32": "tensor(int32)", "i64": "tensor(int64)",
    "ui8": "tensor(uint8)", "ui16": "tensor(uint16)", "ui32": "tensor(uint32)", "ui64": "tensor(uint64)",
}


def _check_input_types(node: onnx.NodeProto, schema, input_dtypes: list[str | None]) -> None:
    """Each input's element type is one its formal parameter allows, and inputs that share a
    type variable (`T`) share the type: a float shape for Expand or an int64 operand of a float
    Add is refused here rather than deep in a shape rule."""
    constraints = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    formal = list(schema.inputs)
    bound: dict[str, tuple[int, str]] = {}
    for i, dtype in enumerate(input_dtypes):
        if dtype is None or not formal or dtype not in _ONNX_TYPE_STRINGS:
            continue
        param = formal[min(i, len(formal) - 1)]
        allowed = constraints.get(param.type_str, {param.type_str})
        got = _ONNX_TYPE_STRINGS[dtype]
        if any(a.startswith("tensor(") for a in allowed) and got not in allowed:
            shown = ", ".join(sorted(a for a in allowed if a.startswith("tensor(")))
            raise ShapeError(f"input {i} ('{param.name}') is {got}; {node.op_type} takes {shown}")
        if param.type_str in constraints and param.is_homogeneous:
            first = bound.setdefault(param.type_str, (i, got))
            if first[1] != got:
                raise ShapeError(f"inputs {first[0]} and {i} must have the same element type "
                                 f"({param.type_str}), found {first[1]} and {got}")


def check_node(node: onnx.NodeProto, opset: int, input_dtypes: list[str | None] | None = None) -> None:
    """Hold a node to its ONNX schema (see above), and its inputs' element types when given;
    ShapeError saying what is wrong."""
    schema = _schema(node.op_type, opset)
    seen: set[str] = set()
    for a in node.attribute:
        if a.name in seen:
            raise ShapeError(f"attribute '{a.name}' is given twice")
        seen.add(a.name)
        kind = attribute_type(a)
        if kind not in _ATTR_TYPE_NAMES or kind == 0:
            raise ShapeError(f"attribute '{a.name}' has no value of a known type")
        if schema is not None and a.name not in schema.attributes:
            raise ShapeError(f"{node.op_type}-{schema.since_version} has no attribute '{a.name}'")
        if schema is not None:
            want = int(schema.attributes[a.name].type.value)
            if kind != want:
                raise ShapeError(f"attribute '{a.name}' must be {_ATTR_TYPE_NAMES.get(want, want)}, "
                                 f"found {_ATTR_TYPE_NAMES[kind]}")
        if a.name in POSITIVE_ATTRS:
            values = list(a.ints) if kind == 7 else [a.i] if kind == 2 else []
            if any(v <= 0 for v in values):
                raise ShapeError(f"attribute '{a.name}' must be positive, found {values if kind == 7 else a.i}")
    if schema is None:
        return
    for name, attr in schema.attributes.items():
        if attr.required and name not in seen:
            raise ShapeError(f"required attribute '{name}' is missing ({node.op_type}-{schema.since_version})")
    for name in SDC_REQUIRED_ATTRS.get(node.op_type, ()):
        if name not in seen:
            raise ShapeError(f"attribute '{name}' is missing (sdc needs it for {node.op_type})")
    n = len(node.input)
    if n < schema.min_input:
        raise ShapeError(f"has {n} input{'s' if n != 1 else ''}, {node.op_type}-{schema.since_version} "
                         f"takes at least {schema.min_input}")
    if n > schema.max_input:
        raise ShapeError(f"has {n} inputs, {node.op_type}-{schema.since_version} takes at most {schema.max_input}")
    formal = list(schema.inputs)
    for i, name in enumerate(node.input):
        if name:
            continue
        param = formal[min(i, len(formal) - 1)] if formal else None
        if param is None or param.option != onnx.defs.OpSchema.FormalParameterOption.Optional:
            what = f"'{param.name}'" if param is not None else f"{i}"
            raise ShapeError(f"input {i} ({what}) is omitted (''), but {node.op_type} requires it")
    if len(node.output) > schema.max_output:
        raise ShapeError(f"has {len(node.output)} outputs, {node.op_type}-{schema.since_version} "
                         f"has at most {schema.max_output}")
    if input_dtypes is not None:
        _check_input_types(node, schema, input_dtypes)


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """`axis` (negative counts from the end) as an index into `rank` dims; ShapeError when it names no
    dim, a rank-0 input included. Every op method reads its axes through this, so a model's
    out-of-range axis is one clear error, never an IndexError or a modulo by zero."""
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def node_attrs(node: onnx.NodeProto) -> dict:
    """A node's attributes as Python values (strings decoded)."""
    out = {}
    for a in node.attribute:
        if not a.type:
            a.type = attribute_type(a)  # old IR versions leave it unset
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
        raise SdcError(f"{what} has unsupported element type {dtype_name(tensor.data_type)}")
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
    return symbolic.floor_div(a, b)


def sym_eq(a, b) -> bool:
    return symbolic.equal(a, b)


# The binary ops that Shape -> ... -> Reshape chains compute with, evaluated elementwise over
# object arrays of ints and sympy dims.
SYM_BINARY: dict[str, Callable] = {
    "Add": _sym_binary(operator.add),
    "Sub": _sym_binary(operator.sub),
    "Mul": _sym_binary(operator.mul),
    "Div": _sym_binary(_floordiv),
    "Mod": _sym_binary(symbolic.mod),
    "Max": _sym_binary(symbolic.maximum),
    "Min": _sym_binary(symbolic.minimum),
}
