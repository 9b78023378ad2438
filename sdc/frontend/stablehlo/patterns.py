"""StableHLO -> sdc rewrite rules, one small function per StableHLO op family.

A rule reads one StableHLO op and emits sdc ops through the frontend-neutral `Builder`, returning
one `V` per result (sdc/frontend/values.py): a run-time value, a compile-time constant (folded by
the builder) or a symbolic shape vector. The conversion driver (sdc/frontend/stablehlo/convert.py)
wraps every rule in a dialect-conversion pattern; a rule never touches the rewriter.

`RULES` maps a StableHLO op name to its `Rule`: the function, and an optional `check` that says up
front, for one op, why it cannot be converted (an unsupported reduction body, a transposed
convolution). The coverage table (docs/stablehlo-coverage.md) is generated from `RULES`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from sdc.dialect.ir import tensor_spec
from sdc.dialect import symbolic
from sdc.dialect.shapes import DYN
from sdc.frontend.builder import INLINE_LIMIT, Builder
from sdc.frontend.values import V, const_value, is_int, sym_int
from sdc.mlir import ir, stablehlo


class Unsupported(ValueError):
    """A StableHLO op whose attributes or body sdc cannot express (the message says which)."""


@dataclass(frozen=True)
class Rule:
    """How one StableHLO op becomes sdc ops. `check(op)` returns why this op cannot, or None."""

    convert: Callable[["Rewrite", Any, list[V]], list[V]]
    check: Callable[[Any], str | None] | None = None
    family: str = ""


class Rewrite:
    """What a rule works with: the builder and the StableHLO op's attributes and result types."""

    def __init__(self, builder: Builder, lookup: Callable[[Any], V] | None = None):
        self.b = builder
        self.lookup = lookup  # what the conversion knows about a value defined outside a region

    # ------------------------------------------------------------ reading attributes

    @staticmethod
    def ints(op, name: str) -> list[int]:
        if name not in op.attributes:
            return []
        return [int(x) for x in op.attributes[name]]

    @staticmethod
    def int_attr(op, name: str, default: int = 0) -> int:
        return int(op.attributes[name].value) if name in op.attributes else default

    @staticmethod
    def result_spec(op, i: int = 0):
        return tensor_spec(op.results[i].type)

    def result_shape(self, op, like: V | None = None, i: int = 0) -> list:
        """The static dims of result `i`; a `?` dim takes `like`'s dim at the same place."""
        shape = list(self.result_spec(op, i).shape)
        for j, d in enumerate(shape):
            if d is DYN:
                if like is None or j >= len(like.sym):
                    raise Unsupported(f"result dim {j} is dynamic and not derived from an operand")
                shape[j] = like.sym[j]
        return shape


def source_line(loc: ir.Location) -> str:
    """`file:line` (or the location's name) of a location, for messages."""
    text = str(loc)
    m = re.search(r'"([^"]+)":(\d+):(\d+)', text)
    if m:
        return f"{m.group(1)}:{m.group(2)}"
    m = re.search(r'loc\("([^"]+)"', text)
    return m.group(1) if m else "unknown location"


# ---------------------------------------------------------------- symbolic shape arithmetic

def _sym_array(v: V) -> np.ndarray:
    return v.const if v.is_symbolic else np.asarray(v.const).astype(object)


def _floordiv(a, b):
    return sym_int(symbolic.floor_div(a, b))


_SYM_BINARY: dict[str, Callable] = {
    "stablehlo.add": lambda a, b: a + b,
    "stablehlo.subtract": lambda a, b: a - b,
    "stablehlo.multiply": lambda a, b: a * b,
    "stablehlo.divide": np.frompyfunc(_floordiv, 2, 1),  # dims are positive: truncation is floor
    "stablehlo.maximum": np.frompyfunc(lambda a, b: sym_int(symbolic.maximum(a, b)), 2, 1),
    "stablehlo.minimum": np.frompyfunc(lambda a, b: sym_int(symbolic.minimum(a, b)), 2, 1),
}


def symbolic_eval(rw: Rewrite, op, ins: list[V]) -> V | None:
    """Shape arithmetic over symbolic dims (a `b * 8` JAX computes for a reshape), or None.

    JAX lowers shapes that depend on a symbolic dim to integer ops on the dim's value; evaluated
    here over sympy, they fold to the `shape` attributes of sdc ops."""
    if not ins or not all(v.known for v in ins) or not any(v.is_symbolic for v in ins):
        return None
    name = op.name
    arrays = [_sym_array(v) for v in ins]
    if name in _SYM_BINARY and len(arrays) == 2:
        out = _SYM_BINARY[name](arrays[0], arrays[1])
    elif name in ("stablehlo.reshape", "stablehlo.convert", "stablehlo.broadcast_in_dim", "stablehlo.transpose"):
        shape = [int(d) for d in rw.result_spec(op).shape]
        a = arrays[0]
        if name == "stablehlo.transpose":
            a = np.transpose(a, rw.ints(op, "permutation"))
        elif name == "stablehlo.broadcast_in_dim":
            dims = rw.ints(op, "broadcast_dimensions")
            expanded = [1] * len(shape)
            for i, d in enumerate(dims):
                expanded[d] = a.shape[i]
            a = np.broadcast_to(a.reshape(expanded), shape)
        out = a.reshape(shape)
    elif name == "stablehlo.concatenate":
        out = np.concatenate(arrays, axis=rw.int_attr(op, "dimension"))
    elif name == "stablehlo.slice":
        index = tuple(slice(s, e, st) for s, e, st in zip(rw.ints(op, "start_indices"), rw.ints(op, "limit_indices"),
                                                          rw.ints(op, "strides")))
        out = arrays[0][index]
    else:
        return None
    out = np.asarray(out, dtype=object)
    v = const_value(out)
    v.dtype = rw.result_spec(op).dtype
    return v


# ---------------------------------------------------------------- elementwise

_UNARY = {
    "abs": "abs", "negate": "neg", "exponential": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "tanh": "tanh", "logistic": "sigmoid", "sine": "sin", "cosine": "cos", "tan": "tan", "floor": "floor",
    "ceil": "ceil", "round_nearest_even": "round", "sign": "sign",
}
_BINARY = {
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "maximum": "max", "minimum": "min",
    "power": "pow", "shift_left": "shift_left", "shift_right_arithmetic": "shift_right",
}
_LOGICAL = {"and": ("and", "bitwise_and"), "or": ("or", "bitwise_or"), "xor": ("xor", "bitwise_xor")}
_COMPARE = {"EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge"}


def _unary(sdc_op: str):
    def rule(rw: Rewrite, op, ins: list[V]) -> list[V]:
        return [rw.b.emit(sdc_op, [ins[0]])]

    rule.__name__ = sdc_op
    return rule


def _binary(sdc_op: str):
    def rule(rw: Rewrite, op, ins: list[V]) -> list[V]:
        return [rw.b.emit(sdc_op, [ins[0], ins[1]])]

    rule.__name__ = sdc_op
    return rule


def _logical(bool_op: str, int_op: str):
    def rule(rw: Rewrite, op, ins: list[V]) -> list[V]:
        return [rw.b.emit(bool_op if ins[0].dtype == "i1" else int_op, [ins[0], ins[1]])]

    return rule


def _not(rw: Rewrite, op, ins: list[V]) -> list[V]:
    return [rw.b.emit("not" if ins[0].dtype == "i1" else "bitwise_not", [ins[0]])]


def _remainder(rw: Rewrite, op, ins: list[V]) -> list[V]:
    # StableHLO's remainder takes the dividend's sign (C fmod), for floats and integers alike.
    return [rw.b.emit("mod", [ins[0], ins[1]], fmod=True)]


def _compare(rw: Rewrite, op, ins: list[V]) -> list[V]:
    direction = stablehlo().ComparisonDirectionAttr(op.attributes["comparison_direction"]).value
    return [rw.b.emit(_COMPARE[direction], [ins[0], ins[1]])]


def _check_compare(op) -> str | None:
    direction = stablehlo().ComparisonDirectionAttr(op.attributes["comparison_direction"]).value
    return None if direction in _COMPARE else f"comparison direction {direction}"


def _select(rw: Rewrite, op, ins: list[V]) -> list[V]:
    return [rw.b.emit("where", ins)]


def _clamp(rw: Rewrite, op, ins: list[V]) -> list[V]:
    lo, x, hi = ins
    return [rw.b.emit("max", [rw.b.emit("min", [x, hi]), lo])]


def _convert(rw: Rewrite, op, ins: list[V]) -> list[V]:
    return [rw.b.cast(ins[0], rw.result_spec(op).dtype)]


def _identity(rw: Rewrite, op, ins: list[V]) -> list[V]:
    return list(ins)


def _is_finite(rw: Rewrite, op, ins: list[V]) -> list[V]:
    bad = rw.b.emit("or", [rw.b.emit("isinf", [ins[0]]), rw.b.emit("isnan", [ins[0]])])
    return [rw.b.emit("not", [bad])]


def _expm1(rw: Rewrite, op, ins: list[V]) -> list[V]:
    return [rw.b.emit("sub", [rw.b.emit("exp", [ins[0]]), rw.b.scalar_like(1.0, ins[0])])]


def _log1p(rw: Rewrite, op, ins: list[V]) -> list[V]:
    return [rw.b.emit("log", [rw.b.emit("add", [ins[0], rw.b.scalar_like(1.0, ins[0])])])]


def _atan2(rw: Rewrite, op, ins: list[V]) -> list[V]:
    """atan2(y, x) from atan(y / x), corrected by quadrant (x = 0: sign(y) * pi/2; atan2(0, 0) = 0)."""
    y, x = ins
    b = rw.b
    zero = b.scalar_like(0.0, x)
    t = b.emit("atan", [b.emit("div", [y, x])])
    t = b.emit("where", [b.emit("eq", [x, zero]), b.emit("mul", [b.emit("sign", [y]), b.scalar_like(np.pi / 2, y)]), t])
    half_turn = b.emit("where", [b.emit("ge", [y, zero]), b.scalar_like(np.pi, y), b.scalar_like(-np.pi, y)])
    return [b.emit("where", [b.emit("lt", [x, zero]), b.emit("add", [t, half_turn]), t])]


# ---------------------------------------------------------------- constants, iota, dims

def _constant(rw: Rewrite, op, ins: list[V]) -> list[V]:
    attr = op.attributes["value"]
    spec = rw.result_spec(op)
    if spec.dtype == "bf16":
        raise Unsupported("bf16 constants are not read yet")
    from sdc import dtypes

    np_dtype = dtypes.to_numpy(spec.dtype)
    if attr.is_splat:
        array = np.full(spec.shape, np.asarray(attr.get_splat_value().value if hasattr(attr, "get_splat_value")
                                               else np.array(attr)).reshape(-1)[0], dtype=np_dtype)
    else:
        array = np.asarray(attr).astype(np_dtype).reshape(spec.shape)
    return [Builder.const(array)]


def _iota(rw: Rewrite, op, ins: list[V]) -> list[V]:
    spec = rw.result_spec(op)
    return [rw.b.iota(list(spec.shape), rw.int_attr(op, "iota_dimension"), spec.dtype)]


def _dynamic_iota(rw: Rewrite, op, ins: list[V]) -> list[V]:
    shape = rw.b.known_ints(ins[0], "the shape of a dynamic_iota")
    return [rw.b.iota(shape, rw.int_attr(op, "iota_dimension"), rw.result_spec(op).dtype)]


def _get_dimension_size(rw: Rewrite, op, ins: list[V]) -> list[V]:
    d = ins[0].sym[rw.int_attr(op, "dimension")]
    v = const_value(np.array(d, dtype=object))
    v.dtype = rw.result_spec(op).dtype
    return [v]


# ---------------------------------------------------------------- shapes

def _broadcast_to(rw: Rewrite, x: V, dims: list[int], shape: list) -> V:
    """broadcast_in_dim: operand dim i goes to result dim dims[i]; the rest are new."""
    if dims != sorted(dims):
        order = sorted(range(len(dims)), key=lambda i: dims[i])
        x = rw.b.emit("transpose", [x], perm=order)
        dims = sorted(dims)
    expanded: list = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = x.sym[i]
    if len(expanded) != x.rank:
        x = rw.b.reshape(x, expanded)
    if [d for d in expanded] == list(shape):
        return x
    # A filled constant stays a run-time broadcast: folding it would write a weight per fill.
    size = _product(list(shape))
    return rw.b.broadcast(x, list(shape), fold=not is_int(size) or size <= INLINE_LIMIT)


def _broadcast_in_dim(rw: Rewrite, op, ins: list[V]) -> list[V]:
    x, dims = ins[0], rw.ints(op, "broadcast_dimensions")
    shape = list(rw.result_spec(op).shape)
    for i, d in enumerate(dims):
        if shape[d] is DYN:
            shape[d] = x.sym[i]
    if any(d is DYN for d in shape):
        raise Unsupported("a new dynamic dim without a shape operand")
    return [_broadcast_to(rw, x, dims, shape)]


def _dynamic_broadcast_in_dim(rw: Rewrite, op, ins: list[V]) -> list[V]:
    shape = rw.b.known_ints(ins[1], "the output shape of a dynamic_broadcast_in_dim")
    return [_broadcast_to(rw, ins[0], rw.ints(op, "broadcast_dimensions"), shape)]


def _reshape(rw: Rewrite, op, ins: list[V]) -> list[V]:
    shape = list(rw.result_spec(op).shape)
    if any(d is DYN for d in shape):
        dyn = [i for i, d in enumerate(shape) if d is DYN]
        if len(dyn) > 1:
            raise Unsupported("a reshape to more than one dynamic dim without a shape operand")
        shape[dyn[0]] = -1
    return [rw.b.reshape(ins[0], shape)]


def _dynamic_reshape(rw: Rewrite, op, ins: list[V]) -> list[V]:
    return [rw.b.reshape(ins[0], rw.b.known_ints(ins[1], "the output shape of a dynamic_reshape"))]


def _transpose(rw: Rewrite, op, ins: list[V]) -> list[V]:
    perm = rw.ints(op, "permutation")
    if perm == list(range(len(perm))):
        return [ins[0]]
    return [rw.b.emit("transpose", [ins[0]], perm=perm)]


def _slice(rw: Rewrite, op, ins: list[V]) -> list[V]:
    starts, limits, strides = rw.ints(op, "start_indices"), rw.ints(op, "limit_indices"), rw.ints(op, "strides")
    axes = [i for i, (s, e, st) in enumerate(zip(starts, limits, strides))
            if not (s == 0 and st == 1 and is_int(ins[0].sym[i]) and e == ins[0].sym[i])]
    if not axes:
        return [ins[0]]
    return [rw.b.emit("slice", [ins[0]], starts=[starts[a] for a in axes], ends=[limits[a] for a in axes],
                      axes=axes, steps=[strides[a] for a in axes])]


def _concatenate(rw: Rewrite, op, ins: list[V]) -> list[V]:
    axis = rw.int_attr(op, "dimension")
    out = ins[0]
    for v in ins[1:]:
        out = rw.b.emit("concat", [out, v], axis=axis)
    return [out]


def _pad(rw: Rewrite, op, ins: list[V]) -> list[V]:
    value = rw.b.scalar(ins[1], "a pad's padding value")
    low, high = rw.ints(op, "edge_padding_low"), rw.ints(op, "edge_padding_high")
    return [rw.b.emit("pad", [ins[0]], pads=low + high, value=float(value))]


def _check_pad(op) -> str | None:
    if any(Rewrite.ints(op, "interior_padding")):
        return "interior padding"
    return None


# ---------------------------------------------------------------- reductions

_REDUCERS = {"stablehlo.add": "reduce_sum", "stablehlo.maximum": "reduce_max", "stablehlo.minimum": "reduce_min",
             "stablehlo.multiply": "reduce_prod"}


def _body_op(op) -> str | None:
    """The one binary op a reduction body applies to its two arguments, or None."""
    blocks = list(op.regions[0].blocks)
    if len(blocks) != 1:
        return None
    ops = list(blocks[0].operations)
    if len(ops) != 2 or ops[1].name != "stablehlo.return":
        return None
    args = list(blocks[0].arguments)
    inner = ops[0]
    if len(args) != 2 or [o for o in inner.operands] != args and [o for o in inner.operands] != args[::-1]:
        return None
    return inner.name


def _check_reduce(op) -> str | None:
    if len(op.results) != 1:
        return f"a reduction of {len(op.results)} values at once"
    body = _body_op(op)
    if body not in _REDUCERS:
        return f"a reduction body other than add/max/min/multiply ({body or 'several ops'})"
    return None


def _reduce(rw: Rewrite, op, ins: list[V]) -> list[V]:
    x, init = ins
    body = _body_op(op)
    out = rw.b.emit(_REDUCERS[body], [x], axes=rw.ints(op, "dimensions"), keepdims=False)
    if not _is_identity(rw, init, body):
        out = rw.b.emit(_BINARY[body.split(".")[1]], [out, init])
    return [out]


def _is_identity(rw: Rewrite, init: V, body: str) -> bool:
    if not init.is_const:
        return False
    value = float(rw.b.const_array(init, "a reduction's initial value").reshape(-1)[0])
    identity = {"stablehlo.add": 0.0, "stablehlo.multiply": 1.0}.get(body)
    if identity is not None:
        return value == identity
    if body == "stablehlo.maximum":
        return value == -np.inf or value <= np.iinfo(np.int64).min or (init.dtype != "i64" and _is_lowest(init, value))
    return value == np.inf or _is_highest(init, value)


def _is_lowest(init: V, value: float) -> bool:
    kind = np.dtype(init.const.dtype)
    return kind.kind in "iu" and value == np.iinfo(kind).min or kind.kind == "f" and value == np.finfo(kind).min


def _is_highest(init: V, value: float) -> bool:
    kind = np.dtype(init.const.dtype)
    return kind.kind in "iu" and value == np.iinfo(kind).max or kind.kind == "f" and value == np.finfo(kind).max


def _check_reduce_window(op) -> str | None:
    body = _body_op(op)
    if body not in ("stablehlo.maximum", "stablehlo.add"):
        return f"a window reduction other than max/add ({body or 'several ops'})"
    if any(d != 1 for d in Rewrite.ints(op, "base_dilations")):
        return "a window reduction with base dilation"
    window = Rewrite.ints(op, "window_dimensions")
    strides = Rewrite.ints(op, "window_strides") or [1] * len(window)
    flat = [i for i, (w, s) in enumerate(zip(window, strides)) if w == 1 and s == 1]
    if len(flat) < 2:
        return "a window reduction without a batch and a channel dim (two dims of window 1)"
    return None


def _reduce_window(rw: Rewrite, op, ins: list[V]) -> list[V]:
    """Pooling in any layout: move two window-1 dims to the front (N, C), pool, move back."""
    x, init = ins[0], ins[1]
    rank = x.rank
    window = rw.ints(op, "window_dimensions")
    strides = rw.ints(op, "window_strides") or [1] * rank
    dilations = rw.ints(op, "window_dilations") or [1] * rank
    padding = (np.asarray(op.attributes["padding"]).reshape(rank, 2).tolist() if "padding" in op.attributes
               else [[0, 0]] * rank)
    flat = [i for i in range(rank) if window[i] == 1 and strides[i] == 1 and padding[i] == [0, 0]]
    if len(flat) < 2:
        raise Unsupported("a window reduction without a batch and a channel dim")
    n, c = flat[0], flat[1]
    spatial = [i for i in range(rank) if i not in (n, c)]
    perm = [n, c] + spatial
    y = rw.b.emit("transpose", [x], perm=perm) if perm != list(range(rank)) else x
    attrs = dict(kernel=[window[i] for i in spatial], strides=[strides[i] for i in spatial],
                 pads=[padding[i][0] for i in spatial] + [padding[i][1] for i in spatial],
                 dilations=[dilations[i] for i in spatial])
    body = _body_op(op)
    if body == "stablehlo.maximum":
        y = rw.b.emit("max_pool", [y], **attrs)
    else:
        # A windowed sum is the mean over the whole window (pads included) times its size.
        y = rw.b.emit("avg_pool", [y], count_include_pad=True, **attrs)
        y = rw.b.emit("mul", [y, rw.b.scalar_like(float(np.prod(attrs["kernel"])), y)])
    if not _is_identity(rw, init, body):
        raise Unsupported("a window reduction whose initial value is not the reduction's identity")
    inverse = list(np.argsort(perm))
    return [rw.b.emit("transpose", [y], perm=inverse) if perm != list(range(rank)) else y]


# ---------------------------------------------------------------- contractions

def _dot_general(rw: Rewrite, op, ins: list[V]) -> list[V]:
    """Any dot_general as one batched matmul: lhs to (batch, free, contracting) and rhs to
    (batch, contracting, free), each flattened to three groups, then the result unflattened."""
    dn = stablehlo().DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
    lb, rb = list(dn.lhs_batching_dimensions), list(dn.rhs_batching_dimensions)
    lc, rc = list(dn.lhs_contracting_dimensions), list(dn.rhs_contracting_dimensions)
    lhs, rhs = ins
    lf = [i for i in range(lhs.rank) if i not in lb + lc]
    rf = [i for i in range(rhs.rank) if i not in rb + rc]
    b = rw.b
    batch = [lhs.sym[i] for i in lb]
    lhs_free, rhs_free = [lhs.sym[i] for i in lf], [rhs.sym[i] for i in rf]
    if not lc:  # an outer product: contract over a dim of one
        lhs = b.reshape(lhs, list(lhs.sym) + [1])
        rhs = b.reshape(rhs, list(rhs.sym) + [1])
        lc, rc = [lhs.rank - 1], [rhs.rank - 1]
    lhs = _permute(b, lhs, lb + lf + lc)
    rhs = _permute(b, rhs, rb + rc + rf)
    k = _product([lhs.sym[i] for i in range(len(lb) + len(lf), lhs.rank)])
    lhs = b.reshape(lhs, batch + [_product(lhs_free), k])
    rhs = b.reshape(rhs, batch + [k, _product(rhs_free)])
    out = b.emit("matmul", [lhs, rhs])
    result_dtype = rw.result_spec(op).dtype
    out = b.reshape(out, batch + lhs_free + rhs_free)
    return [b.cast(out, result_dtype)]


def _permute(b: Builder, x: V, perm: list[int]) -> V:
    return x if perm == list(range(x.rank)) else b.emit("transpose", [x], perm=perm)


def _product(dims: list):
    total: Any = 1
    for d in dims:
        total = total * d
    return sym_int(total)


def _check_convolution(op) -> str | None:
    if any(d != 1 for d in Rewrite.ints(op, "lhs_dilation")):
        return "a convolution with lhs dilation (a transposed convolution)"
    if Rewrite.int_attr(op, "batch_group_count", 1) != 1:
        return "a convolution with batch_group_count > 1"
    if "window_reversal" in op.attributes and any(bool(x) for x in op.attributes["window_reversal"]):
        return "a convolution with window reversal"
    return None


def _convolution(rw: Rewrite, op, ins: list[V]) -> list[V]:
    """Any layout: input to (N, C, spatial...), kernel to (O, I, spatial...), sdc.conv, result back."""
    dn = stablehlo().ConvDimensionNumbers(op.attributes["dimension_numbers"])
    x, w = ins
    spatial = len(list(dn.input_spatial_dimensions))
    x = _permute(rw.b, x, [dn.input_batch_dimension, dn.input_feature_dimension] + list(dn.input_spatial_dimensions))
    w = _permute(rw.b, w, [dn.kernel_output_feature_dimension, dn.kernel_input_feature_dimension]
                 + list(dn.kernel_spatial_dimensions))
    padding = (np.asarray(op.attributes["padding"]).reshape(spatial, 2).tolist() if "padding" in op.attributes
               else [[0, 0]] * spatial)
    y = rw.b.emit("conv", [x, w], strides=rw.ints(op, "window_strides") or [1] * spatial,
                  pads=[p[0] for p in padding] + [p[1] for p in padding],
                  dilations=rw.ints(op, "rhs_dilation") or [1] * spatial,
                  groups=rw.int_attr(op, "feature_group_count", 1))
    out_order = [dn.output_batch_dimension, dn.output_feature_dimension] + list(dn.output_spatial_dimensions)
    return [_permute(rw.b, y, list(np.argsort(out_order)))]


# ---------------------------------------------------------------- gather (the take-along-one-axis form)

def _gather_axis(op) -> int | None:
    """The axis of a gather that is numpy `take(operand, indices[..., 0], axis)`, or None."""
    dn = stablehlo().GatherDimensionNumbers(op.attributes["dimension_numbers"])
    operand = tensor_spec(op.operands[0].type)
    indices = tensor_spec(op.operands[1].type)
    sizes = Rewrite.ints(op, "slice_sizes")
    collapsed, index_map = list(dn.collapsed_slice_dims), list(dn.start_index_map)
    if list(dn.operand_batching_dims) or len(collapsed) != 1 or index_map != collapsed:
        return None
    axis = collapsed[0]
    if dn.index_vector_dim != len(indices.shape) - 1 or indices.shape[-1] != 1:
        return None
    if sizes[axis] != 1 or any(sizes[i] != operand.shape[i] for i in range(len(sizes)) if i != axis):
        return None
    batch = len(indices.shape) - 1
    expected = list(range(axis)) + list(range(axis + batch, len(operand.shape) - 1 + batch))
    return axis if list(dn.offset_dims) == expected else None


def _check_gather(op) -> str | None:
    return None if _gather_axis(op) is not None else "a gather other than take-along-one-axis (x[idx], jnp.take)"


def _gather(rw: Rewrite, op, ins: list[V]) -> list[V]:
    axis = _gather_axis(op)
    indices = rw.b.reshape(ins[1], list(ins[1].sym[:-1]))
    return [rw.b.emit("gather", [ins[0], indices], axis=axis)]


# ---------------------------------------------------------------- dynamic slices at constant offsets

def _start_indices(rw: Rewrite, op, starts: list[V], what: str) -> list[int]:
    """The start offsets of a dynamic_slice/dynamic_update_slice, known at compile time (a loop
    counter of an unrolled loop is), clamped into range as StableHLO specifies."""
    operand = tensor_spec(op.operands[0].type).shape
    window = Rewrite.ints(op, "slice_sizes") or list(tensor_spec(op.operands[1].type).shape)
    out = []
    for i, s in enumerate(starts):
        value = rw.b.scalar(s, f"the start index {i} of a {what}")
        if is_int(operand[i]) and is_int(window[i]):
            value = min(max(int(value), 0), operand[i] - window[i])
        out.append(int(value))
    return out


def _dynamic_slice(rw: Rewrite, op, ins: list[V]) -> list[V]:
    x = ins[0]
    starts = _start_indices(rw, op, ins[1:], "dynamic_slice")
    sizes = rw.ints(op, "slice_sizes")
    axes = [i for i in range(x.rank) if not (starts[i] == 0 and is_int(x.sym[i]) and sizes[i] == x.sym[i])]
    if not axes:
        return [x]
    return [rw.b.emit("slice", [x], starts=[starts[a] for a in axes], ends=[starts[a] + sizes[a] for a in axes],
                      axes=axes, steps=[1] * len(axes))]


def _dynamic_update_slice(rw: Rewrite, op, ins: list[V]) -> list[V]:
    """`update` written into `operand` at constant offsets: the update padded to the operand's
    shape, selected where a constant mask says so."""
    x, update = ins[0], ins[1]
    if not all(is_int(d) for d in x.sym):
        raise Unsupported("a dynamic_update_slice of an operand with symbolic dims")
    starts = _start_indices(rw, op, ins[2:], "dynamic_update_slice")
    sizes = [int(d) for d in update.sym]
    if sizes == list(x.sym):
        return [update]
    low = starts
    high = [int(n) - s - k for n, s, k in zip(x.sym, starts, sizes)]
    mask = np.zeros([int(d) for d in x.sym], dtype=bool)
    mask[tuple(slice(s, s + k) for s, k in zip(starts, sizes))] = True
    padded = rw.b.emit("pad", [update], pads=low + high, value=0.0)
    return [rw.b.emit("where", [Builder.const(mask), padded, x])]


# ---------------------------------------------------------------- chlo composites

# `jax.export` wraps the chlo ops it keeps (erf, the inverse and hyperbolic trigonometric functions,
# top_k) in `stablehlo.composite "chlo.<op>"` with a decomposition function. The ones sdc has an op
# for are converted directly; every other composite is replaced by a call of its decomposition
# before the functions are inlined (convert.expand_composites).
_CHLO_UNARY = {"erf": "erf", "sinh": "sinh", "cosh": "cosh", "tan": "tan", "asin": "asin", "acos": "acos",
               "atan": "atan", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh"}
COMPOSITES: frozenset[str] = frozenset([f"chlo.{n}" for n in _CHLO_UNARY] + ["chlo.top_k"])


def composite_name(op) -> str:
    return ir.StringAttr(op.attributes["name"]).value


def _composite_attrs(op) -> dict[str, Any]:
    if "composite_attributes" not in op.attributes:
        return {}
    d = ir.DictAttr(op.attributes["composite_attributes"])
    out: dict[str, Any] = {}
    for i in range(len(d)):
        named = d[i]
        attr = named.attr
        out[named.name] = attr.value if isinstance(attr, (ir.BoolAttr, ir.IntegerAttr)) else str(attr)
    return out


def _check_composite(op) -> str | None:
    name = composite_name(op)
    return None if name in COMPOSITES else f"composite '{name}' has no rule and was not expanded"


def _composite(rw: Rewrite, op, ins: list[V]) -> list[V]:
    name = composite_name(op).split(".", 1)[1]
    if name in _CHLO_UNARY:
        return [rw.b.emit(_CHLO_UNARY[name], [ins[0]])]
    attrs = _composite_attrs(op)  # top_k: the k largest along the last dim, i32 indices
    values, indices = rw.b.emit_all("topk", [ins[0]], {"k": attrs["k"], "axis": -1,
                                                        "largest": attrs.get("largest", True)})
    return [values, rw.b.cast(indices, rw.result_spec(op, 1).dtype)]


# ---------------------------------------------------------------- control flow, static after lowering

MAX_UNROLL = 4096  # iterations of one unrolled stablehlo.while


def nested_unsupported(op) -> list[str]:
    """The ops inside `op`'s regions that no rule converts (or whose rule refuses them), with
    their locations, for the up-front check."""
    missing = []
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                if inner.name == "stablehlo.return":
                    continue
                rule = RULES.get(inner.name)
                reason = f"{inner.name} at {source_line(inner.location)}" if rule is None else None
                if rule is not None and rule.check is not None:
                    why = rule.check(inner)
                    reason = f"{inner.name} ({why}) at {source_line(inner.location)}" if why else None
                if reason:
                    missing.append(reason)
    return missing


def _check_regions(op) -> str | None:
    missing = nested_unsupported(op)
    return f"its regions use {'; '.join(missing)}" if missing else None


def run_region(rw: Rewrite, region, args: list[V]) -> list[V]:
    """Convert the ops of a one-block region with its arguments bound to `args`; the values its
    `stablehlo.return` returns. Values from outside the region are looked up in the conversion."""
    block = region.blocks[0]
    env: dict[Any, V] = dict(zip(block.arguments, args))

    def value(v) -> V:
        found = env.get(v)
        return found if found is not None else rw.lookup(v)

    for inner in block.operations:
        inner = inner.operation
        ins = [value(v) for v in inner.operands]
        if inner.name == "stablehlo.return":
            return ins
        with rw.b.at(inner.location):
            folded = symbolic_eval(rw, inner, ins)
            outs = [folded] if folded is not None else RULES[inner.name].convert(rw, inner, ins)
        env.update(zip(inner.results, outs))
    raise Unsupported("a region without a stablehlo.return")


def _known_scalar(v: V) -> int | None:
    """The value of a rank-0 constant, or None when it is only known at run time."""
    if not v.is_const:
        return None
    return int(np.asarray(v.const).reshape(-1)[0])


def _while(rw: Rewrite, op, ins: list[V]) -> list[V]:
    """A loop whose trip count is known at compile time (lax.fori_loop, lax.scan): unrolled, the
    body converted once per iteration with the carried values of the last."""
    cond, body = op.regions[0], op.regions[1]
    carried = list(ins)
    for _ in range(MAX_UNROLL + 1):
        (go,) = run_region(rw, cond, carried)
        known = _known_scalar(go)
        if known is None:
            raise Unsupported("the loop condition is not known at compile time (a data-dependent trip count); "
                              "sdc unrolls loops with a constant trip count only")
        if not known:
            return carried
        carried = run_region(rw, body, carried)
    raise Unsupported(f"the loop runs more than {MAX_UNROLL} iterations: too many to unroll")


def _select_branches(rw: Rewrite, index: V, branches: list[list[V]]) -> list[V]:
    """Every branch computed, the results chosen by `index` at run time (branches are pure)."""
    out = branches[-1]
    for i in reversed(range(len(branches) - 1)):
        hit = rw.b.emit("eq", [index, Builder.const(np.array(i), index.dtype)])
        out = [rw.b.emit("where", [hit, a, b]) for a, b in zip(branches[i], out)]
    return out


def _case(rw: Rewrite, op, ins: list[V]) -> list[V]:
    """lax.switch/lax.cond: with a constant index only its branch; otherwise every branch and a
    select (an index out of range takes the last branch, as StableHLO specifies)."""
    (index,) = ins
    n = len(op.regions)
    known = _known_scalar(index)
    if known is not None:
        return run_region(rw, op.regions[known if 0 <= known < n else n - 1], [])
    clamped = rw.b.emit("where", [rw.b.emit("and", [rw.b.emit("ge", [index, Builder.const(np.array(0), index.dtype)]),
                                                    rw.b.emit("lt", [index, Builder.const(np.array(n), index.dtype)])]),
                                  index, Builder.const(np.array(n - 1), index.dtype)])
    return _select_branches(rw, clamped, [run_region(rw, r, []) for r in op.regions])


def _if(rw: Rewrite, op, ins: list[V]) -> list[V]:
    (pred,) = ins
    known = _known_scalar(pred)
    if known is not None:
        return run_region(rw, op.regions[0 if known else 1], [])
    then, other = run_region(rw, op.regions[0], []), run_region(rw, op.regions[1], [])
    return [rw.b.emit("where", [pred, a, b]) for a, b in zip(then, other)]


# ---------------------------------------------------------------- the table

def _shape_assertion(op) -> str | None:
    target = op.attributes["call_target_name"].value if "call_target_name" in op.attributes else ""
    return None if target == "shape_assertion" else f"custom_call @{target}"


def _drop(rw: Rewrite, op, ins: list[V]) -> list[V]:
    # jax.export's shape assertions restate what the sdc shape pass guards at run time.
    return []


RULES: dict[str, Rule] = {}
for _name, _op in _UNARY.items():
    RULES[f"stablehlo.{_name}"] = Rule(_unary(_op), family="elementwise")
for _name, _op in _BINARY.items():
    RULES[f"stablehlo.{_name}"] = Rule(_binary(_op), family="elementwise")
for _name, (_bool, _int) in _LOGICAL.items():
    RULES[f"stablehlo.{_name}"] = Rule(_logical(_bool, _int), family="elementwise")
RULES.update({
    "stablehlo.not": Rule(_not, family="elementwise"),
    "stablehlo.remainder": Rule(_remainder, family="elementwise"),
    "stablehlo.is_finite": Rule(_is_finite, family="elementwise"),
    "stablehlo.exponential_minus_one": Rule(_expm1, family="elementwise"),
    "stablehlo.log_plus_one": Rule(_log1p, family="elementwise"),
    "stablehlo.atan2": Rule(_atan2, family="elementwise"),
    "stablehlo.compare": Rule(_compare, _check_compare, family="compare/select"),
    "stablehlo.select": Rule(_select, family="compare/select"),
    "stablehlo.clamp": Rule(_clamp, family="compare/select"),
    "stablehlo.convert": Rule(_convert, family="convert"),
    "stablehlo.optimization_barrier": Rule(_identity, family="structure"),
    "stablehlo.constant": Rule(_constant, family="constants"),
    "stablehlo.iota": Rule(_iota, family="constants"),
    "stablehlo.dynamic_iota": Rule(_dynamic_iota, family="constants"),
    "stablehlo.get_dimension_size": Rule(_get_dimension_size, family="shapes"),
    "stablehlo.broadcast_in_dim": Rule(_broadcast_in_dim, family="shapes"),
    "stablehlo.dynamic_broadcast_in_dim": Rule(_dynamic_broadcast_in_dim, family="shapes"),
    "stablehlo.reshape": Rule(_reshape, family="shapes"),
    "stablehlo.dynamic_reshape": Rule(_dynamic_reshape, family="shapes"),
    "stablehlo.transpose": Rule(_transpose, family="shapes"),
    "stablehlo.slice": Rule(_slice, family="shapes"),
    "stablehlo.concatenate": Rule(_concatenate, family="shapes"),
    "stablehlo.pad": Rule(_pad, _check_pad, family="shapes"),
    "stablehlo.reduce": Rule(_reduce, _check_reduce, family="reductions"),
    "stablehlo.reduce_window": Rule(_reduce_window, _check_reduce_window, family="reductions"),
    "stablehlo.dot_general": Rule(_dot_general, family="contractions"),
    "stablehlo.convolution": Rule(_convolution, _check_convolution, family="contractions"),
    "stablehlo.gather": Rule(_gather, _check_gather, family="indexing"),
    "stablehlo.custom_call": Rule(_drop, _shape_assertion, family="structure"),
    "stablehlo.dynamic_slice": Rule(_dynamic_slice, family="shapes"),
    "stablehlo.dynamic_update_slice": Rule(_dynamic_update_slice, family="shapes"),
    "stablehlo.composite": Rule(_composite, _check_composite, family="chlo"),
    "stablehlo.while": Rule(_while, _check_regions, family="control flow"),
    "stablehlo.case": Rule(_case, _check_regions, family="control flow"),
    "stablehlo.if": Rule(_if, _check_regions, family="control flow"),
})
