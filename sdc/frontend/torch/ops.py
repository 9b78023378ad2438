"""Core ATen ops -> sdc ops: one method per ATen op (`aten_<name>`), plus tables of one-op maps.

`AtenImporter.import_node` gets an FX node whose arguments are already imported (a `V` for a
tensor, an int or a sympy expression for a size, Python scalars as they are) and returns the
node's value: a `V`, or a list of them for an op with several results. It emits through the
frontend-neutral `Builder` (sdc/frontend/builder.py); what stays here is ATen's conventions
(type promotion with Python scalars, `alpha=`, `-1` in `expand`, torch's padding order, the
extra results of the `native_*` ops that inference never reads).

The result dtype torch.export recorded for each node (`node.meta["val"]`) is the ground truth:
elementwise ops compute in it, and the importer casts to it if an sdc op's rule says otherwise.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

import numpy as np
import torch
import torch.fx

from sdc import custom_ops, dtypes
from sdc.dialect import symbolic
from sdc.dialect.shapes import ShapeError
from sdc.frontend.builder import Builder
from sdc.frontend.custom import emit_custom
from sdc.frontend.torch.export import ASSERT_TARGETS, custom_op_name, op_name
from sdc.frontend.values import V, const_value, is_int, sym_int

BIG = 2**63 - 1  # ATen's "to the end" for slice ends

# ATen op (overload packet name) -> sdc op, for ops that are exactly one sdc op on one tensor.
UNARY: dict[str, str] = {
    "neg": "neg", "abs": "abs", "sign": "sign", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "reciprocal": "reciprocal", "tanh": "tanh", "sigmoid": "sigmoid", "erf": "erf", "sin": "sin", "cos": "cos",
    "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "asinh": "asinh",
    "acosh": "acosh", "atanh": "atanh", "floor": "floor", "ceil": "ceil", "round": "round", "relu": "relu",
    "isnan": "isnan", "isinf": "isinf", "silu": "silu", "hardswish": "hard_swish", "mish": "mish",
}

# ATen elementwise binary op -> sdc op; operands are promoted to the node's result dtype.
BINARY: dict[str, str] = {
    "mul": "mul", "maximum": "max", "minimum": "min", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor", "pow": "pow",
}

# Comparisons: operands promoted to their common dtype, the result is bool.
COMPARE: dict[str, str] = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}

LOGICAL: dict[str, str] = {"logical_and": "and", "logical_or": "or", "logical_xor": "xor"}

REDUCE: dict[str, str] = {"sum": "reduce_sum", "mean": "reduce_mean", "amax": "reduce_max", "amin": "reduce_min",
                          "prod": "reduce_prod"}

# Identity-like ops: a value's copy or view is the value (sdc has no aliasing).
IDENTITY = frozenset({"clone", "alias", "detach", "lift_fresh_copy", "contiguous", "dropout"})

# ATen ops whose result is a size: their value is torch's recorded expression (no sdc op).
SIZE_OPS = frozenset({"sym_size", "sym_numel", "sym_stride", "sym_storage_offset"})

# Operators on sizes (SymInt arithmetic): their result comes from torch's recorded expression.
SIZE_FUNCTIONS = frozenset({operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
                            operator.neg, operator.truediv, operator.pow, operator.eq, operator.ne, operator.lt,
                            operator.le, operator.gt, operator.ge, math.ceil, math.floor, math.trunc,
                            torch.sym_max, torch.sym_min, torch.sym_not, torch.sym_float, torch.sym_int,
                            torch.sym_ite})


def packet(target: Any) -> str | None:
    """`add` for aten.add.Tensor; None for anything not an ATen op."""
    if isinstance(target, torch._ops.OpOverload) and target.namespace == "aten":
        return target.overloadpacket.__name__
    return None


def is_random(node: torch.fx.Node) -> bool:
    """Whether importing `node` draws random numbers (a training-mode dropout with p > 0)."""
    if packet(node.target) != "native_dropout":
        return False
    p, train = (list(node.args) + [None, None])[1:3]
    return bool(train) and p is not None and 0 < float(p) < 1


def result_meta(node: torch.fx.Node) -> Any:
    return node.meta.get("val")


def is_size_value(val: Any) -> bool:
    return isinstance(val, (int, float, bool, torch.SymInt, torch.SymBool, torch.SymFloat)) and not isinstance(
        val, torch.Tensor)


class AtenImporter:
    """Dispatches an FX node on its ATen op to `aten_<op>` or to the tables above."""

    def __init__(self, builder: Builder, to_sdc: Callable[[Any], Any]):
        self.b = builder
        self.to_sdc = to_sdc  # a torch size expression -> int or sympy over sdc names
        self.node: torch.fx.Node | None = None
        self._transposed: dict[int, V] = {}  # id of a 2-D permute's result -> its operand (for matmul)
        self.rng: tuple[V, V] | None = None  # the entry's (rng.seed, rng.offset) when a node is random
        self.rng_drawn = 0  # random elements drawn so far (the next random op's base offset)

    # ---------------------------------------------------------------- what is supported

    @classmethod
    def supported_packets(cls) -> set[str]:
        methods = {name[len("aten_"):] for name in dir(cls) if name.startswith("aten_")}
        return methods | set(UNARY) | set(BINARY) | set(COMPARE) | set(LOGICAL) | set(REDUCE) | set(IDENTITY) | SIZE_OPS

    @classmethod
    def supports(cls, node: torch.fx.Node) -> bool:
        if node.target is operator.getitem or op_name(node.target) in ASSERT_TARGETS:
            return True
        if is_size_value(result_meta(node)):  # size arithmetic, sym_size, sym_numel
            return True
        custom = custom_op_name(node.target)
        if custom is not None:
            return custom_ops.is_registered(custom)
        name = packet(node.target)
        return name is not None and name in cls.supported_packets()

    # ---------------------------------------------------------------- dispatch

    def import_node(self, node: torch.fx.Node, args: list, kwargs: dict) -> Any:
        self.node = node
        custom = custom_op_name(node.target)
        if custom is not None:
            return self.custom(custom, args, kwargs)
        name = packet(node.target)
        method = getattr(self, f"aten_{name}", None)
        if method is not None:
            return method(*args, **kwargs)
        if name in UNARY:
            x = args[0]
            return self.b.emit(UNARY[name], [self.cast(x, self.out_dtype())])
        if name in BINARY:
            return self.binary(BINARY[name], args[0], args[1])
        if name in COMPARE:
            return self.compare(COMPARE[name], args[0], args[1])
        if name in LOGICAL:
            return self.b.emit(LOGICAL[name], [self.cast(self.tensor(a, "i1"), "i1") for a in args[:2]])
        if name in REDUCE:
            return self.reduce(REDUCE[name], *args, **kwargs)
        if name in IDENTITY:
            return args[0]
        raise ShapeError(f"no importer for {op_name(node.target)}")

    def custom(self, name: str, args: list, kwargs: dict) -> Any:
        """A registered custom op: its tensor arguments (in schema order) become the operands, the
        others its attributes by schema name, with the schema's defaults for those not given."""
        schema = self.node.target._schema
        given = dict(zip((a.name for a in schema.arguments), args))
        given.update(kwargs)
        inputs: list[V] = []
        attrs: dict[str, Any] = {}
        for a in schema.arguments:
            if a.name in given:
                value = given[a.name]
            elif a.has_default_value():
                value = a.default_value
            else:
                continue
            if isinstance(value, V):
                inputs.append(value)
            elif value is None and isinstance(a.type, torch.OptionalType) and \
                    isinstance(a.type.getElementType(), torch.TensorType):
                raise ShapeError(f"custom op '{name}': optional tensor argument '{a.name}' is None; pass a tensor")
            else:
                attrs[a.name] = value
        outs = emit_custom(self.b, name, inputs, attrs)
        return outs[0] if len(outs) == 1 and not isinstance(result_meta(self.node), (list, tuple)) else outs

    # ---------------------------------------------------------------- helpers

    def out_dtype(self, index: int | None = None) -> str:
        val = result_meta(self.node)
        if index is not None:
            val = val[index]
        return dtypes.from_torch(val.dtype)

    def cast(self, v: V, dtype: str) -> V:
        return self.b.cast(v, dtype)

    def tensor(self, x: Any, dtype: str) -> V:
        """A tensor operand: a V as it is, a Python number (or size) as a rank-0 constant of `dtype`."""
        if isinstance(x, V):
            return x
        if symbolic.is_symbolic(x):
            # a size as data (`arange(s) + past_length`): its run-time value, an i64 `sdc.dim_values`
            size = V("i64", (), value=self.b.tensor(const_value(np.array(x, dtype=object))))
            return self.cast(size, dtype)
        if dtype == "bf16":
            return self.b.scalar_like(x, V("bf16"))
        return self.b.const(np.array(x), dtype)

    def promoted(self, a: Any, b: Any) -> str:
        """torch's result type of two operands: tensors by dtype and by being 0-d or not, scalars by kind."""
        def stand_in(x):
            if isinstance(x, V):
                return torch.empty(() if x.rank == 0 else (1,), dtype=dtypes.to_torch(x.dtype))
            return x
        return dtypes.from_torch(torch.result_type(stand_in(a), stand_in(b)))

    def binary(self, op: str, a: Any, b: Any, dtype: str | None = None) -> V:
        dtype = dtype or self.out_dtype()
        return self.b.emit(op, [self.cast(self.tensor(a, dtype), dtype), self.cast(self.tensor(b, dtype), dtype)])

    def compare(self, op: str, a: Any, b: Any) -> V:
        dtype = self.promoted(a, b)
        return self.b.emit(op, [self.cast(self.tensor(a, dtype), dtype), self.cast(self.tensor(b, dtype), dtype)])

    @staticmethod
    def axis(d: int, rank: int) -> int:
        return d % rank if rank else 0

    def axes(self, dims: Any, rank: int) -> list[int]:
        if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
            return list(range(rank))
        dims = [dims] if isinstance(dims, int) else list(dims)
        return sorted({self.axis(d, rank) for d in dims})

    def reduce(self, op: str, x: V, dims: Any = None, keepdim: bool = False, *, dtype: Any = None) -> V:
        if isinstance(dims, bool):  # prod.dim_int(x, dim, keepdim) vs sum(x, dtype) overloads
            dims, keepdim = None, dims
        out = self.out_dtype()
        x = self.cast(x, out)
        if x.rank == 0:
            return x
        return self.b.emit(op, [x], axes=self.axes(dims, x.rank), keepdims=bool(keepdim))

    def size(self, d: Any) -> Any:
        """A size argument: ints stay, torch sizes become sdc dim expressions."""
        return sym_int(d) if isinstance(d, int) or symbolic.is_symbolic(d) else self.to_sdc(d)

    def ones(self, shape: list, dtype: str) -> V:
        return self.b.const(np.ones([int(d) for d in shape]), dtype)

    def along_channels(self, v: V, rank: int) -> V:
        """A per-channel vector [C] as [C, 1, ...], to broadcast over dim 1 of a rank-`rank` tensor."""
        return self.b.reshape(v, [v.sym[0]] + [1] * (rank - 2))

    def filled(self, shape: list, value: Any, dtype: str) -> V:
        shape = [self.size(d) for d in shape]
        scalar = self.tensor(value, dtype)
        if all(is_int(d) for d in shape):
            return self.b.broadcast(scalar, shape)
        return self.b.broadcast(scalar, shape, fold=False)

    # ---------------------------------------------------------------- arithmetic with ATen conventions

    def aten_add(self, a, b, alpha=1):
        if alpha != 1:
            b = self.binary("mul", b, alpha)
        return self.binary("add", a, b)

    def aten_sub(self, a, b, alpha=1):
        if alpha != 1:
            b = self.binary("mul", b, alpha)
        return self.binary("sub", a, b)

    def aten_rsub(self, a, b, alpha=1):
        return self.aten_sub(b, a, alpha)

    def aten_div(self, a, b, rounding_mode=None):
        out = self.out_dtype()
        if rounding_mode is None or dtypes.is_float(out):
            q = self.binary("div", a, b)
            if rounding_mode == "floor":
                q = self.b.emit("floor", [q])
            elif rounding_mode == "trunc":
                q = self.trunc(q)
            return q
        if rounding_mode == "trunc":
            return self.binary("div", a, b)
        q = self.b.emit("floor", [self.binary("div", a, b, dtype="f64")])  # floor division of integers
        return self.cast(q, out)

    def trunc(self, x: V) -> V:
        negative = self.b.emit("lt", [x, self.b.scalar_like(0, x)])
        return self.b.emit("where", [negative, self.b.emit("ceil", [x]), self.b.emit("floor", [x])])

    def aten_trunc(self, x):
        return self.trunc(x) if dtypes.is_float(x.dtype) else x

    def aten_remainder(self, a, b):
        return self.b.emit("mod", [self.cast(self.tensor(a, self.out_dtype()), self.out_dtype()),
                                   self.cast(self.tensor(b, self.out_dtype()), self.out_dtype())], fmod=False)

    def aten_fmod(self, a, b):
        return self.b.emit("mod", [self.cast(self.tensor(a, self.out_dtype()), self.out_dtype()),
                                   self.cast(self.tensor(b, self.out_dtype()), self.out_dtype())], fmod=True)

    def aten_pow(self, a, b):
        if isinstance(a, V) and not isinstance(b, V):
            x = self.cast(a, self.out_dtype())
            if b == 2:
                return self.b.emit("mul", [x, x])
            if b == 0.5:
                return self.b.emit("sqrt", [x])
            if b == 1:
                return x
        return self.binary("pow", a, b)

    def aten_log1p(self, x):
        x = self.cast(x, self.out_dtype())
        return self.b.emit("log", [self.b.emit("add", [x, self.b.scalar_like(1, x)])])

    def aten_expm1(self, x):
        x = self.cast(x, self.out_dtype())
        return self.b.emit("sub", [self.b.emit("exp", [x]), self.b.scalar_like(1, x)])

    def aten_log2(self, x):
        x = self.cast(x, self.out_dtype())
        return self.b.emit("mul", [self.b.emit("log", [x]), self.b.scalar_like(1 / math.log(2), x)])

    def aten_log10(self, x):
        x = self.cast(x, self.out_dtype())
        return self.b.emit("mul", [self.b.emit("log", [x]), self.b.scalar_like(1 / math.log(10), x)])

    def aten_logical_not(self, x):
        return self.b.emit("not", [self.cast(x, "i1")])

    def aten_bitwise_not(self, x):
        return self.b.emit("not" if x.dtype == "i1" else "bitwise_not", [x])

    def aten_where(self, cond, a, b):
        out = self.out_dtype()
        return self.b.emit("where", [self.cast(cond, "i1"), self.cast(self.tensor(a, out), out),
                                     self.cast(self.tensor(b, out), out)])

    def aten_clamp(self, x, min=None, max=None):
        out = self.out_dtype()
        x = self.cast(x, out)
        if isinstance(min, V) or isinstance(max, V):
            if min is not None:
                x = self.binary("max", x, min)
            if max is not None:
                x = self.binary("min", x, max)
            return x
        return self.b.emit("clip", [x], min=-math.inf if min is None else float(min),
                           max=math.inf if max is None else float(max))

    def aten_clamp_min(self, x, min):
        return self.aten_clamp(x, min=min)

    def aten_clamp_max(self, x, max):
        return self.aten_clamp(x, max=max)

    def aten_hardtanh(self, x, min_val=-1.0, max_val=1.0):
        return self.b.emit("clip", [x], min=float(min_val), max=float(max_val))

    def aten_gelu(self, x, approximate="none"):
        return self.b.emit("gelu", [x], approximate=approximate)

    def aten_leaky_relu(self, x, negative_slope=0.01):
        return self.b.emit("leaky_relu", [x], alpha=float(negative_slope))

    def aten_elu(self, x, alpha=1.0, scale=1.0, input_scale=1.0):
        if input_scale != 1:
            x = self.binary("mul", x, input_scale)
        y = self.b.emit("elu", [x], alpha=float(alpha))
        return y if scale == 1 else self.binary("mul", y, scale)

    def aten_hardsigmoid(self, x):
        return self.b.emit("hard_sigmoid", [x], alpha=1 / 6, beta=0.5)

    # ---------------------------------------------------------------- values

    def aten_scalar_tensor(self, value, *, dtype=None, **_):
        return self.tensor(value, self.out_dtype())

    def aten_full(self, size, fill_value, *, dtype=None, **_):
        return self.filled(list(size), fill_value, self.out_dtype())

    def aten_full_like(self, x, fill_value, *, dtype=None, **_):
        return self.filled(list(x.sym), fill_value, self.out_dtype())

    def aten_zeros_like(self, x, *, dtype=None, **_):
        return self.filled(list(x.sym), 0, self.out_dtype())

    def aten_ones_like(self, x, *, dtype=None, **_):
        return self.filled(list(x.sym), 1, self.out_dtype())

    def aten_empty(self, size, *, dtype=None, **_):
        return self.filled(list(size), 0, self.out_dtype())  # sdc has no uninitialized memory: zeros

    def aten_fill(self, x, value):
        return self.filled(list(x.sym), value, self.out_dtype())

    def aten_arange(self, *args, dtype=None, **_):
        numbers = list(args) + [None] * (3 - len(args))
        if len(args) == 1:
            start, end, step = 0, args[0], 1
        else:
            start, end, step = numbers[0], numbers[1], numbers[2] if numbers[2] is not None else 1
        out = self.out_dtype()
        start, end = self.size(start) if not isinstance(start, float) else start, \
            self.size(end) if not isinstance(end, float) else end
        if all(isinstance(v, (int, float)) for v in (start, end, step)):
            return self.b.const(np.arange(start, end, step), out)
        if step != 1 or not is_int(start):
            raise ShapeError(f"arange({start}, {end}, {step}) of a run-time length needs step 1 and an int start")
        r = self.b.iota([sym_int(end - start)], 0, dtype=out)
        return r if start == 0 else self.b.emit("add", [r, self.b.scalar_like(start, r)])

    def aten__to_copy(self, x, *, dtype=None, **_):
        return self.cast(x, self.out_dtype())

    def aten_copy(self, dst, src, non_blocking=False):
        return self.b.broadcast(self.cast(src, dst.dtype), list(dst.sym))

    # ---------------------------------------------------------------- shapes

    def aten_view(self, x, size):
        return self.b.reshape(x, [self.size(d) for d in size])

    aten__unsafe_view = aten_view
    aten_reshape = aten_view

    def aten_permute(self, x, dims):
        perm = [self.axis(d, x.rank) for d in dims]
        if perm == list(range(x.rank)):
            return x
        y = self.b.emit("transpose", [x], perm=perm)
        if perm == [1, 0]:
            self._transposed[id(y)] = x
        return y

    def aten_t(self, x):
        return x if x.rank < 2 else self.aten_permute(x, [1, 0])

    def aten_expand(self, x, size, *, implicit=False):
        size = [self.size(d) for d in size]
        lead = len(size) - x.rank
        target = [x.sym[i - lead] if (is_int(d) and d == -1) else d for i, d in enumerate(size)]
        if tuple(target) == tuple(x.sym):
            return x
        return self.b.broadcast(x, target, fold=False)

    def aten_unsqueeze(self, x, dim):
        return self.b.emit("unsqueeze", [x], axes=[self.axis(dim, x.rank + 1)])

    def aten_squeeze(self, x, dim=None):
        axes = self.axes(dim, x.rank)
        axes = [a for a in axes if is_int(x.sym[a]) and x.sym[a] == 1]
        return self.b.emit("squeeze", [x], axes=axes) if axes else x

    def bound(self, value: Any, size: Any, default: int) -> int:
        """A slice bound as an int for `sdc.slice`: sizes that equal the dim (+- a constant) count from the end."""
        if value is None:
            return default
        value = self.size(value)
        if is_int(value):
            return value
        offset = symbolic.simplify(value - size)
        if offset.is_Integer:
            return BIG if int(offset) >= 0 else int(offset)
        raise ShapeError(f"a slice bound of {value} (the dim is {size}) is a run-time value")

    def aten_slice(self, x, dim=0, start=None, end=None, step=1):
        axis = self.axis(dim, x.rank)
        size = x.sym[axis]
        begin, stop = self.bound(start, size, 0), self.bound(end, size, BIG)
        if begin == 0 and stop >= BIG and step == 1:
            return x
        if is_int(size) and begin == 0 and stop >= size and step == 1:
            return x
        return self.b.emit("slice", [x], starts=[begin], ends=[min(stop, BIG)], axes=[axis], steps=[int(step)])

    def aten_select(self, x, dim, index):
        axis = self.axis(dim, x.rank)
        index = self.bound(index, x.sym[axis], 0)
        stop = index + 1 if index != -1 else BIG
        part = self.b.emit("slice", [x], starts=[index], ends=[stop], axes=[axis], steps=[1])
        return self.b.emit("squeeze", [part], axes=[axis])

    def aten_cat(self, tensors, dim=0):
        out = self.out_dtype()
        parts = [self.cast(t, out) for t in tensors if not (t.rank == 1 and t.sym[0] == 0)]
        axis = self.axis(dim, parts[0].rank)
        acc = parts[0]
        for p in parts[1:]:
            acc = self.b.emit("concat", [acc, p], axis=axis)
        return acc

    def aten_split_with_sizes(self, x, split_sizes, dim=0):
        axis = self.axis(dim, x.rank)
        outs, offset = [], 0
        for s in split_sizes:
            s = self.size(s)
            if not is_int(s) or not is_int(offset):
                raise ShapeError(f"split sizes must be static, found {list(split_sizes)}")
            outs.append(self.b.emit("slice", [x], starts=[offset], ends=[offset + s], axes=[axis], steps=[1]))
            offset += s
        return outs

    def aten_split(self, x, split_size, dim=0):
        axis = self.axis(dim, x.rank)
        size = x.sym[axis]
        if not is_int(size) or not is_int(split_size):
            raise ShapeError("split of a run-time dim is unsupported")
        return self.aten_split_with_sizes(x, [min(split_size, size - o) for o in range(0, size, split_size)], dim)

    def aten_constant_pad_nd(self, x, pad, value=0):
        pad = [int(p) for p in pad]
        begins, ends = [0] * x.rank, [0] * x.rank
        for i in range(len(pad) // 2):  # pairs from the last dim backwards
            begins[x.rank - 1 - i], ends[x.rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
        return self.b.emit("pad", [x], pads=begins + ends, mode="constant", value=float(value))

    def aten_flip(self, x, dims):
        for d in self.axes(dims, x.rank):
            x = self.b.emit("slice", [x], starts=[-1], ends=[-BIG], axes=[d], steps=[-1])
        return x

    def aten_repeat(self, x, repeats):
        repeats = [int(r) for r in repeats]
        lead = len(repeats) - x.rank
        dims = [1] * lead + list(x.sym)
        interleaved, target, final = [], [], []
        for r, d in zip(repeats, dims):
            interleaved += [1, d]
            target += [r, d]
            final.append(sym_int(r * d))
        y = self.b.reshape(x, interleaved)
        y = self.b.broadcast(y, target, fold=False)
        return self.b.reshape(y, final)

    # ---------------------------------------------------------------- indexing

    def aten_embedding(self, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
        return self.b.emit("gather", [weight, indices], axis=0)

    def aten_index_select(self, x, dim, index):
        return self.b.emit("gather", [x, index], axis=self.axis(dim, x.rank))

    def aten_gather(self, x, dim, index, sparse_grad=False):
        return self.b.emit("gather_elements", [x, index], axis=self.axis(dim, x.rank))

    def aten_index(self, x, indices):
        """`x[i0, :, i2]` (advanced indexing): one index tensor is an `sdc.gather` on its dim;
        several are one `sdc.gather_nd` over their dims moved to the front, addressed by the index
        tensors broadcast together and stacked into tuples (see `index_tuples`)."""
        given = [(d, i) for d, i in enumerate(indices) if i is not None]
        if any(i.dtype == "i1" for _, i in given):
            raise ShapeError("indexing with a boolean mask is unsupported (its result size depends on the data)")
        if len(given) == 1:
            d, idx = given[0]
            return self.b.emit("gather", [x, idx], axis=d)
        dims = [d for d, _ in given]
        rest = [d for d in range(x.rank) if d not in dims]
        front = self.aten_permute(x, dims + rest)
        tuples, lead = self.index_tuples([i for _, i in given])
        y = self.b.emit("gather_nd", [front, tuples], batch_dims=0)
        # numpy's rule: index dims that are adjacent keep their place, separated ones go first
        first = dims[0]
        if dims != list(range(first, first + len(dims))) or first == 0:
            return y
        k = len(lead)
        perm = list(range(k, k + first)) + list(range(k)) + list(range(k + first, y.rank))
        return self.aten_permute(y, perm)

    def index_tuples(self, index: list[V]) -> tuple[V, list]:
        """The index tensors broadcast to their common shape S and stacked on a last dim: an i64
        [*S, len(index)] of the tuples `gather_nd` addresses; and S."""
        rank = max(i.rank for i in index)
        lead: list = []
        for k in range(rank):
            sizes = [i.sym[k - rank + i.rank] for i in index if k - rank + i.rank >= 0]
            wider = [d for d in sizes if not (is_int(d) and d == 1)]
            lead.append(wider[0] if wider else 1)
        columns = []
        for i in index:
            i = self.cast(i, "i64")
            if i.rank < rank:
                i = self.b.reshape(i, [1] * (rank - i.rank) + list(i.sym))
            if tuple(i.sym) != tuple(lead):
                i = self.b.broadcast(i, lead, fold=False)
            columns.append(self.b.emit("unsqueeze", [i], axes=[rank]))
        acc = columns[0]
        for c in columns[1:]:
            acc = self.b.emit("concat", [acc, c], axis=rank)
        return acc, lead

    def aten_cumsum(self, x, dim, *, dtype=None):
        return self.b.emit("cumsum", [self.cast(x, self.out_dtype())], axis=self.axis(dim, x.rank))

    def aten_topk(self, x, k, dim=-1, largest=True, sorted=True):
        return self.b.emit_all("topk", [x], {"k": int(k), "axis": self.axis(dim, x.rank), "largest": bool(largest),
                                             "sorted": True})

    def aten_sort(self, x, dim=-1, descending=False, stable=False):
        axis = self.axis(dim, x.rank)
        if not is_int(x.sym[axis]):
            raise ShapeError("sort along a run-time dim is unsupported")
        return self.b.emit_all("topk", [x], {"k": x.sym[axis], "axis": axis, "largest": bool(descending),
                                             "sorted": True})

    # ---------------------------------------------------------------- reductions

    def aten_any(self, x, dim=None, keepdim=False):
        as_int = self.cast(x, "i32")
        y = self.b.emit("reduce_max", [as_int], axes=self.axes(dim, x.rank), keepdims=bool(keepdim))
        return self.cast(y, "i1")

    def aten_all(self, x, dim=None, keepdim=False):
        as_int = self.cast(self.cast(x, "i1"), "i32")
        y = self.b.emit("reduce_min", [as_int], axes=self.axes(dim, x.rank), keepdims=bool(keepdim))
        return self.cast(y, "i1")

    def arg(self, op: str, x: V, dim: Any, keepdim: bool) -> V:
        if dim is None:
            x, dim = self.b.reshape(x, [-1]), 0
        return self.b.emit(op, [x], axis=self.axis(dim, x.rank), keepdims=bool(keepdim))

    def aten_argmax(self, x, dim=None, keepdim=False):
        return self.arg("argmax", x, dim, keepdim)

    def aten_argmin(self, x, dim=None, keepdim=False):
        return self.arg("argmin", x, dim, keepdim)

    def aten_max(self, x, dim=None, keepdim=False):
        if dim is None:
            return self.b.emit("reduce_max", [x], axes=list(range(x.rank)), keepdims=False)
        if isinstance(dim, V):
            return self.binary("max", x, dim)
        values = self.b.emit("reduce_max", [x], axes=[self.axis(dim, x.rank)], keepdims=bool(keepdim))
        return [values, self.arg("argmax", x, dim, keepdim)]

    def aten_min(self, x, dim=None, keepdim=False):
        if dim is None:
            return self.b.emit("reduce_min", [x], axes=list(range(x.rank)), keepdims=False)
        if isinstance(dim, V):
            return self.binary("min", x, dim)
        values = self.b.emit("reduce_min", [x], axes=[self.axis(dim, x.rank)], keepdims=bool(keepdim))
        return [values, self.arg("argmin", x, dim, keepdim)]

    def aten_var(self, x, dim=None, unbiased=None, keepdim=False, *, correction=None):
        if isinstance(unbiased, bool):  # var.dim(x, dim, unbiased, keepdim)
            correction = 1 if unbiased else 0
        correction = 1 if correction is None else correction
        axes = self.axes(dim, x.rank)
        count = sym_int(symbolic.product(x.sym[a] for a in axes))
        if not is_int(count):
            raise ShapeError("var over a run-time dim is unsupported")
        mean = self.b.emit("reduce_mean", [x], axes=axes, keepdims=True)
        centered = self.b.emit("sub", [x, mean])
        var = self.b.emit("reduce_mean", [self.b.emit("mul", [centered, centered])], axes=axes, keepdims=bool(keepdim))
        if correction == 0:
            return var
        return self.b.emit("mul", [var, self.b.scalar_like(count / max(count - correction, 0), var)])

    def aten__softmax(self, x, dim, half_to_float=False):
        return self.b.emit("softmax", [x], axis=self.axis(dim, x.rank))

    def aten__log_softmax(self, x, dim, half_to_float=False):
        return self.b.emit("log_softmax", [x], axis=self.axis(dim, x.rank))

    # ---------------------------------------------------------------- normalization

    def aten_native_layer_norm(self, x, normalized_shape, weight, bias, eps):
        k = len(normalized_shape)
        shape = list(x.sym[-k:])
        scale = weight if weight is not None else self.ones(shape, x.dtype)
        shift = bias if bias is not None else self.b.const(np.zeros([int(d) for d in shape]), x.dtype)
        y = self.b.emit("layer_norm", [x, scale, shift], axis=x.rank - k, epsilon=float(eps))
        return [y, None, None]  # mean and rstd: only training reads them

    def aten__native_batch_norm_legit_no_training(self, x, weight, bias, mean, var, momentum, eps):
        c = x.sym[1]
        scale = weight if weight is not None else self.ones([c], x.dtype)
        shift = bias if bias is not None else self.b.const(np.zeros([int(c)]), x.dtype)
        return [self.b.emit("batch_norm", [x, scale, shift, mean, var], epsilon=float(eps)), None, None]

    def aten__native_batch_norm_legit_functional(self, x, weight, bias, running_mean, running_var, training,
                                                 momentum, eps):
        """Batch norm with its running statistics' next values (results 3 and 4), as torch.export
        writes a training-mode BatchNorm: in training, the batch's statistics normalize (primitive
        ops, so the gradient flows through them) and the running ones move by `momentum`, the
        variance unbiased (n / (n - 1)), as torch updates them."""
        if not training:
            y = self.aten__native_batch_norm_legit_no_training(x, weight, bias, running_mean, running_var,
                                                                momentum, eps)[0]
            return [y, None, None, running_mean, running_var]
        axes = [0] + list(range(2, x.rank))
        count = math.prod(x.sym[a] for a in axes)
        if not is_int(sym_int(count)):
            raise ShapeError("training-mode batch norm over run-time dims is unsupported (give static shapes)")
        count = int(sym_int(count))
        mean = self.b.emit("reduce_mean", [x], axes=axes, keepdims=True)
        centered = self.b.emit("sub", [x, mean])
        var = self.b.emit("reduce_mean", [self.b.emit("mul", [centered, centered])], axes=axes, keepdims=True)
        rstd = self.b.emit("rsqrt", [self.b.emit("add", [var, self.b.scalar_like(float(eps), var)])])
        y = self.b.emit("mul", [centered, rstd])
        if weight is not None:
            y = self.b.emit("mul", [y, self.along_channels(weight, x.rank)])
        if bias is not None:
            y = self.b.emit("add", [y, self.along_channels(bias, x.rank)])
        c = x.sym[1]
        batch_mean, batch_var = self.b.reshape(mean, [c]), self.b.reshape(var, [c])
        outs = [y, batch_mean, self.b.reshape(rstd, [c])]
        if running_mean is None:
            return outs + [None, None]
        m = float(momentum)
        unbiased = count / max(count - 1, 1)

        def moved(old: Any, new: Any, factor: float) -> Any:
            kept = self.b.emit("mul", [old, self.b.scalar_like(1.0 - m, old)])
            return self.b.emit("add", [kept, self.b.emit("mul", [new, self.b.scalar_like(m * factor, new)])])

        return outs + [moved(running_mean, batch_mean, 1.0), moved(running_var, batch_var, unbiased)]

    def aten__native_batch_norm_legit(self, x, weight, bias, *args):
        """`.no_stats` (`track_running_stats=False`, train and eval mode alike): batch statistics.
        `.default` with running statistics: inference reads them; training updates them in place,
        which torch.export writes in the functional form instead (so this one is refused)."""
        if len(args) == 5:
            running_mean, running_var, training, momentum, eps = args
            if training:
                raise ShapeError("an in-place training-mode batch norm is unsupported (torch.export writes the "
                                 "functional form, which is)")
            return self.aten__native_batch_norm_legit_no_training(x, weight, bias, running_mean, running_var,
                                                                  momentum, eps)
        _, momentum, eps = args
        return self.aten__native_batch_norm_legit_functional(x, weight, bias, None, None, True, momentum, eps)[:3]

    def aten_native_dropout(self, x, p, train):
        """Dropout as a mask drawn by `sdc.random_uniform` from the program's `rng.seed` and
        `rng.offset` inputs (`random_uniform` says how): keep where u >= p, scale by 1 / (1 - p).
        Results: the output and the mask (bool), as ATen's."""
        if not train or p == 0:
            return [x, self.b.broadcast(self.b.const(np.array(True), "i1"), list(x.sym))]
        if p >= 1:
            zero = self.filled(list(x.sym), 0, x.dtype)
            return [zero, self.b.broadcast(self.b.const(np.array(False), "i1"), list(x.sym))]
        u = self.random_uniform(list(x.sym), x.dtype)
        keep = self.b.emit("ge", [u, self.b.scalar_like(float(p), u)])
        y = self.b.emit("mul", [x, self.cast(keep, x.dtype)])
        return [self.b.emit("mul", [y, self.b.scalar_like(1.0 / (1.0 - p), y)]), keep]

    def random_uniform(self, shape: list, dtype: str) -> V:
        """Uniform [0, 1) values of a static `shape` from the next unused counters of this import's
        random stream: each random op draws `rng.offset + base`, `base` the elements drawn before it
        in the program, so one seed and offset give every op its own numbers."""
        if self.rng is None:
            raise ShapeError("a random op needs the program's rng inputs (an importer bug: none were made)")
        dims = [sym_int(d) for d in shape]
        if not all(is_int(d) for d in dims):
            raise ShapeError(f"a random op over run-time dims {shape} is unsupported (give static shapes)")
        seed, offset = self.rng
        start = self.b.emit("add", [offset, self.b.const(np.array(self.rng_drawn), "i64")]) if self.rng_drawn \
            else offset
        self.rng_drawn += math.prod(dims)
        return self.b.emit("random_uniform", [seed, start], shape=dims, dtype=dtype)

    def aten_native_group_norm(self, x, weight, bias, n, c, hw, group, eps):
        grouped = self.b.reshape(x, [x.sym[0], int(group), -1])
        length = grouped.sym[2]
        if not is_int(length):
            raise ShapeError("group norm over run-time spatial dims is unsupported")
        y = self.b.emit("layer_norm", [grouped, self.ones([length], x.dtype),
                                       self.b.const(np.zeros([length]), x.dtype)], axis=2, epsilon=float(eps))
        y = self.b.reshape(y, list(x.sym))
        if weight is not None:
            y = self.b.emit("mul", [y, self.along_channels(weight, x.rank)])
        if bias is not None:
            y = self.b.emit("add", [y, self.along_channels(bias, x.rank)])
        return [y, None, None]

    # ---------------------------------------------------------------- contractions and windows

    def matmul(self, a: V, b: V) -> V:
        source = self._transposed.get(id(b))
        if source is not None:
            return self.b.emit("matmul", [a, source], transpose_rhs=True)
        return self.b.emit("matmul", [a, b])

    def aten_mm(self, a, b):
        return self.matmul(a, b)

    aten_bmm = aten_mm
    aten_matmul = aten_mm

    def aten_addmm(self, bias, a, b, *, beta=1, alpha=1):
        y = self.matmul(a, b)
        if alpha != 1:
            y = self.binary("mul", y, alpha)
        if beta != 1:
            bias = self.binary("mul", bias, beta)
        return self.b.emit("add", [y, bias])

    def aten_convolution(self, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
        spatial = x.rank - 2
        pads = [int(p) for p in padding] * 2 if len(padding) == spatial else [int(p) for p in padding] * 2 * spatial
        attrs = {"strides": [int(s) for s in stride], "pads": pads, "dilations": [int(d) for d in dilation],
                 "groups": int(groups)}
        if transposed:
            y = self.b.emit("conv_transpose", [x, weight], output_padding=[int(p) for p in output_padding], **attrs)
        else:
            y = self.b.emit("conv", [x, weight], **attrs)
        return y if bias is None else self.b.emit("add", [y, self.along_channels(bias, y.rank)])

    def window(self, values: list, spatial: int, default: list | None = None) -> list[int]:
        values = [int(v) for v in values] if values else list(default or [])
        return values * spatial if len(values) == 1 else values

    def aten_max_pool2d_with_indices(self, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        spatial = x.rank - 2
        kernel = self.window(kernel_size, spatial)
        strides = self.window(stride, spatial, kernel)
        pads = self.window(padding if isinstance(padding, (list, tuple)) else [padding], spatial)
        dilations = self.window(dilation if isinstance(dilation, (list, tuple)) else [dilation], spatial)
        y = self.b.emit("max_pool", [x], kernel=kernel, strides=strides, pads=pads * 2, dilations=dilations,
                        ceil_mode=bool(ceil_mode))
        return [y, None]  # the indices: only max_unpool and the backward read them

    aten_max_pool3d_with_indices = aten_max_pool2d_with_indices

    def aten_avg_pool2d(self, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                        divisor_override=None):
        if divisor_override is not None:
            raise ShapeError("avg_pool2d with divisor_override is unsupported")
        spatial = x.rank - 2
        kernel = self.window(kernel_size, spatial)
        strides = self.window(stride, spatial, kernel)
        pads = self.window(padding if isinstance(padding, (list, tuple)) else [padding], spatial)
        return self.b.emit("avg_pool", [x], kernel=kernel, strides=strides, pads=pads * 2, ceil_mode=bool(ceil_mode),
                           count_include_pad=bool(count_include_pad))

    aten_avg_pool3d = aten_avg_pool2d

    def aten__adaptive_avg_pool2d(self, x, output_size):
        output_size = [int(s) for s in output_size]
        if all(s == 1 for s in output_size):
            return self.b.emit("global_avg_pool", [x])
        sizes = list(x.sym[2:])
        if not all(is_int(s) and s % o == 0 for s, o in zip(sizes, output_size)):
            raise ShapeError(f"adaptive average pooling of {sizes} to {output_size} is supported only where the "
                             "output size divides the input size")
        kernel = [s // o for s, o in zip(sizes, output_size)]
        return self.b.emit("avg_pool", [x], kernel=kernel, strides=kernel, pads=[0] * 2 * len(kernel))

    aten__adaptive_avg_pool3d = aten__adaptive_avg_pool2d

    # ---------------------------------------------------------------- resampling

    def upsample(self, x: V, mode: str, align_corners: bool, factors: list | None) -> V:
        """An `sdc.resize` of the spatial dims (2 ..) as torch computes `F.interpolate`, to the lengths
        torch recorded. Output position i samples input coordinate `(i + 0.5) / s - 0.5` for `linear`
        (half-pixel: torch clamps a negative one to 0, as the resize's clamped taps do), the corners'
        grid with align_corners, and `floor(i / s)` for `nearest`. `s` is the given scale factor,
        which torch samples with (not the rounded lengths' ratio), else output/input length."""
        out = [self.size(d) for d in result_meta(self.node).shape[2:]]
        scales = [float(f) for f in factors] if factors and not align_corners else []
        axes = [2 + i for i, (have, want) in enumerate(zip(x.sym[2:], out))
                if sym_int(have) != sym_int(want) or (scales and scales[i] != 1.0)]
        if not axes:
            return x  # every dim keeps its length and its coordinates
        if mode == "nearest":
            coords, nearest = "asymmetric", "floor"
        else:
            coords, nearest = ("align_corners" if align_corners else "half_pixel"), "round_prefer_floor"
        return self.b.emit("resize", [x], axes=axes, sizes=[out[a - 2] for a in axes],
                           scales=[scales[a - 2] for a in axes] if scales else [], mode=mode,
                           coordinate_transformation_mode=coords, nearest_mode=nearest)

    def scale_factors(self, scales_h: Any, scales_w: Any, scale_factors: Any) -> list | None:
        """An upsample op's scale factors: `.vec` takes one optional list (positionally where the
        other overloads take `scales_h`), the other overloads one optional float per dim."""
        if self.node.target._overloadname == "vec":
            return scale_factors if scale_factors is not None else scales_h
        return [scales_h, scales_w] if scales_h is not None and scales_w is not None else None

    def aten_upsample_bilinear2d(self, x, output_size, align_corners, scales_h=None, scales_w=None, *,
                                 scale_factors=None):
        factors = self.scale_factors(scales_h, scales_w, scale_factors)
        return self.upsample(x, "linear", bool(align_corners), factors)

    def aten_upsample_nearest2d(self, x, output_size, scales_h=None, scales_w=None, *, scale_factors=None):
        return self.upsample(x, "nearest", False, self.scale_factors(scales_h, scales_w, scale_factors))
