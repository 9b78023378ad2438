"""ONNX node importer: one method per ONNX op, `op_<OpType>`, each emitting sdc ops.

Methods get the node and its input values (`V`, None for an omitted optional input) and
return the output values; they emit through `self.b`, the frontend-neutral `Builder`
(sdc/frontend/builder.py). Attribute and input conventions that changed across opsets (axes
as attribute or input, Slice/Pad/Clip/Split arguments) are handled in the method.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import torch

from sdc import dtypes, limits
from sdc.dialect import symbolic
from sdc.dialect.shapes import DYN, ShapeError
from sdc.frontend.builder import Builder, CompileTimeValueError, assume_le
from sdc.frontend.onnx_common import (AXES_INPUT_SINCE, BINARY, INT64_MAX, ONNX_DTYPES, REDUCE, SYM_BINARY, UNARY,
                                      VARIADIC, check_node, node_attrs, normalize_axis, sym_eq, tensor_value)
from sdc.frontend.onnx_ops_indexing import IndexingOps
from sdc.frontend.onnx_ops_nn import NNOps
from sdc.frontend.values import V, const_value, is_int, sym_int, torch_value

__all__ = ["CompileTimeValueError", "NodeImporter"]


# A Range of constants longer than this is computed at run time (an iota), not folded into the artifact.
FOLDED_RANGE_ELEMENTS = 1 << 20

class NodeImporter(IndexingOps, NNOps):
    """Dispatches on op_type to `op_<OpType>` (here and in the mixins onnx_ops_indexing.py and
    onnx_ops_nn.py) or to the one-op tables of onnx_common. Ops are emitted through `self.b`, the
    frontend-neutral `Builder`; what stays here is ONNX's own conventions."""

    def __init__(self, builder: Builder, values: dict[str, V], opset: int):
        self.b = builder
        self.values = values  # the graph's values by name (subgraphs read the enclosing graph's)
        self.opset = opset

    @classmethod
    def supports(cls, op_type: str) -> bool:
        return (hasattr(cls, f"op_{op_type}") or op_type in UNARY or op_type in BINARY
                or op_type in VARIADIC or op_type in REDUCE)

    def import_node(self, node: onnx.NodeProto, inputs: list[V | None]) -> list[V]:
        try:
            check_node(node, self.opset, [v.dtype if v is not None else None for v in inputs])  # before any method
        except ShapeError as e:
            if getattr(self, "_nn_scopes", None):  # a subgraph's node: the error names it
                raise ShapeError(f"node '{node.name or node.op_type}' ({node.op_type}): {e}") from None
            raise
        attrs = node_attrs(node)
        op = node.op_type
        method = getattr(self, f"op_{op}", None)
        if method is not None:
            outs = method(node, inputs, attrs)
        elif op in UNARY:
            outs = self.b.emit_all(UNARY[op], [inputs[0]])
        elif op in BINARY:
            outs = [self.binary(op, inputs[0], inputs[1])]
        elif op in VARIADIC:
            outs = [self.variadic(VARIADIC[op], op, [v for v in inputs if v is not None])]
        elif op in REDUCE:
            outs = [self.reduce(REDUCE[op], op, inputs, attrs)]
        else:
            raise ValueError(f"no importer for {op}")
        return outs if isinstance(outs, list) else [outs]

    # ---------------------------------------------------------------- helpers

    def binary(self, op: str, a: V, b: V) -> V:
        if op in SYM_BINARY and self.b.sym_ready(a, b):
            return const_value(SYM_BINARY[op](self.b.sym_array(a), self.b.sym_array(b)))
        if op == "Equal" and self.b.sym_ready(a, b):
            eq = np.frompyfunc(sym_eq, 2, 1)(self.b.sym_array(a), self.b.sym_array(b))
            return const_value(eq.astype(bool))
        return self.b.emit(BINARY[op], [a, b])

    def variadic(self, name: str, op: str, inputs: list[V]) -> V:
        if op in SYM_BINARY and any(v.is_symbolic for v in inputs) and all(v.known for v in inputs):
            acc = self.b.sym_array(inputs[0])
            for v in inputs[1:]:
                acc = SYM_BINARY["Add" if op == "Sum" else op](acc, self.b.sym_array(v))
            return const_value(acc)
        acc = inputs[0]
        for v in inputs[1:]:
            acc = self.b.emit(name, [acc, v])
        return acc

    def axes_of(self, node, inputs, attrs, input_index: int, since: int) -> list[int] | None:
        """Axes from the attribute (older opsets) or the input (newer); None when absent."""
        if self.opset >= since and len(inputs) > input_index:
            v = inputs[input_index]
            return None if v is None else self.b.static_ints(v, "axes")
        if "axes" in attrs:
            return list(attrs["axes"])
        return None

    def reduce(self, name: str, op: str, inputs, attrs) -> V:
        axes = self.axes_of(None, inputs, attrs, 1, AXES_INPUT_SINCE.get(op, 18))
        keepdims = bool(attrs.get("keepdims", 1))
        x = inputs[0]
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.rank))
        if op == "ReduceProd" and x.is_symbolic:
            arr = self.b.sym_array(x)
            prod = symbolic.product(arr.reshape(-1))
            return const_value(np.array([prod] if keepdims else prod, dtype=object))
        return self.b.emit(name, [x], axes=axes, keepdims=keepdims)

    # ---------------------------------------------------------------- constants and shapes

    def op_Constant(self, node, inputs, attrs):
        if "value" in attrs:
            return tensor_value(attrs["value"], f"node '{node.name}' value")
        for key, dtype in (("value_float", np.float32), ("value_int", np.int64)):
            if key in attrs:
                return self.b.const(np.array(attrs[key], dtype=dtype))
        for key, dtype in (("value_floats", np.float32), ("value_ints", np.int64)):
            if key in attrs:
                return self.b.const(np.array(list(attrs[key]), dtype=dtype))
        raise ShapeError(f"Constant with {', '.join(attrs) or 'no value'} is unsupported (sparse/string values)")

    def op_Identity(self, node, inputs, attrs):
        return inputs[0]

    def op_Shape(self, node, inputs, attrs):
        x = inputs[0]
        dims = list(x.sym)
        start, end = attrs.get("start", 0), attrs.get("end", None)
        dims = dims[slice(start, end)]
        if any(d is DYN for d in dims):
            raise ShapeError("Shape of a tensor with a dim unknown at compile time (not a named input dim) "
                             "is unsupported")
        return const_value(np.array(dims, dtype=object))

    def op_Size(self, node, inputs, attrs):
        if any(d is DYN for d in inputs[0].sym):
            raise ShapeError("Size of a tensor with a dim unknown at compile time is unsupported")
        n = symbolic.product(inputs[0].sym)
        return const_value(np.array(n, dtype=object))

    def op_ConstantOfShape(self, node, inputs, attrs):
        fill = tensor_value(attrs["value"], "ConstantOfShape value") if "value" in attrs else self.b.const(
            np.zeros(1, np.float32))
        shape = self.b.known_ints(inputs[0], "ConstantOfShape's shape")
        scalar = self.b.emit("reshape", [fill], shape=[]) if fill.rank else fill
        if all(is_int(d) for d in shape):
            if fill.is_const and not fill.dtype == "bf16":
                limits.check_elements(shape, fill.const.itemsize, "ConstantOfShape's folded value")
                return self.b.const(np.full(shape, fill.const.reshape(-1)[0], dtype=fill.const.dtype))
        return self.b.broadcast(scalar, shape)

    def op_Range(self, node, inputs, attrs):
        start, limit, delta = inputs
        for name, v in zip(("start", "limit", "delta"), inputs):
            if v.rank > 1 or (v.rank == 1 and v.sym[0] != 1):
                raise ShapeError(f"Range {name} must be a scalar, found shape {list(v.sym)}")
        if all(v.is_const for v in inputs):
            s, l, d = (v.as_torch().item() for v in inputs)
            n = limits.range_length(s, l, d)
            if n <= FOLDED_RANGE_ELEMENTS:
                ramp = torch.arange(n, dtype=torch.float64 if start.dtype in ("f16", "bf16", "f32", "f64") else torch.int64)
                values = ramp * d + s
                return torch_value(values.to(dtypes.to_torch(start.dtype)))
            # longer: computed at run time, not stored in the artifact (nor allocated three times here)
        else:
            if not all(v.known for v in inputs):
                raise CompileTimeValueError("Range bounds must be known at compile time (possibly symbolic)")
            s, l, d = (self.b.known_ints(v, "Range bound")[0] for v in inputs)
            if all(is_int(x) for x in (s, l, d)):
                n = max(0, math.ceil((l - s) / d))
            else:
                n = sym_int(symbolic.maximum(symbolic.ceiling_div(l - s, d), 0))
            if symbolic.is_maximum(n):
                n = sym_int(symbolic.ceiling_div(l - s, d))
        ramp = self.b.iota([n], 0, start.dtype)

        def operand(bound, v):  # a number folds into a constant; a symbolic bound is its own value
            if is_int(bound) or isinstance(bound, float):
                return self.b.const(np.array(bound), start.dtype)
            return self.b.emit("reshape", [v], shape=[]) if v.rank else v

        if d != 1:
            ramp = self.b.emit("mul", [ramp, operand(d, delta)])
        if s != 0:
            ramp = self.b.emit("add", [ramp, operand(s, start)])
        return ramp

    def op_Cast(self, node, inputs, attrs):
        to = attrs["to"]
        if to not in ONNX_DTYPES:
            raise ShapeError(f"Cast to {onnx.TensorProto.DataType.Name(to)} is unsupported")
        return self.b.cast(inputs[0], ONNX_DTYPES[to])

    def op_CastLike(self, node, inputs, attrs):
        return self.b.cast(inputs[0], inputs[1].dtype)

    # ---------------------------------------------------------------- shape manipulation

    def op_Reshape(self, node, inputs, attrs):
        x, shape_v = inputs
        shape = self.b.known_ints(shape_v, "Reshape's shape")
        allowzero = attrs.get("allowzero", 0)
        target = []
        for i, d in enumerate(shape):
            if is_int(d) and d == 0 and not allowzero:
                if i >= x.rank:
                    raise ShapeError(f"shape entry {i} is 0 (copy) but the input has rank {x.rank}")
                target.append(x.sym[i])
            else:
                target.append(d)
        return self.b.reshape(x, target)

    def op_Flatten(self, node, inputs, attrs):
        x = inputs[0]
        axis = attrs.get("axis", 1)
        axis = axis + x.rank if axis < 0 else axis
        head, tail = symbolic.product(x.sym[:axis]), symbolic.product(x.sym[axis:])
        target = [sym_int(head), sym_int(tail)]
        if DYN in x.sym[:axis]:
            target[0] = -1
        if DYN in x.sym[axis:]:
            target[1] = -1
        return self.b.reshape(x, target)

    def op_Transpose(self, node, inputs, attrs):
        x = inputs[0]
        perm = list(attrs.get("perm", reversed(range(x.rank))))
        if x.is_symbolic:
            return const_value(np.transpose(self.b.sym_array(x), perm))
        return self.b.emit("transpose", [x], perm=perm)

    def op_Squeeze(self, node, inputs, attrs):
        x = inputs[0]
        axes = self.axes_of(node, inputs, attrs, 1, 13)
        if axes is None:
            axes = [i for i, d in enumerate(x.sym) if is_int(d) and d == 1]
        if x.is_symbolic:
            return const_value(np.squeeze(self.b.sym_array(x), axis=tuple(axes)))
        return self.b.emit("squeeze", [x], axes=axes)

    def op_Unsqueeze(self, node, inputs, attrs):
        x = inputs[0]
        axes = self.axes_of(node, inputs, attrs, 1, 13)
        if x.is_symbolic:
            rank = x.rank + len(axes)
            return const_value(np.expand_dims(self.b.sym_array(x), tuple(normalize_axis(a, rank, "axes") for a in axes)))
        return self.b.emit("unsqueeze", [x], axes=axes)

    def op_Concat(self, node, inputs, attrs):
        vals = [v for v in inputs if v is not None]
        axis = attrs["axis"]
        if any(v.is_symbolic for v in vals) and all(v.known for v in vals):
            return const_value(np.concatenate([self.b.sym_array(v) for v in vals], axis=axis))
        acc = vals[0]
        for v in vals[1:]:
            acc = self.b.emit("concat", [acc, v], axis=axis)
        return acc

    def op_Gather(self, node, inputs, attrs):
        data, indices = inputs
        axis = attrs.get("axis", 0)
        if data.is_symbolic and indices.is_const:
            try:
                return const_value(np.take(self.b.sym_array(data), indices.const.astype(np.int64), axis=axis))
            except (IndexError, np.exceptions.AxisError) as e:
                raise ShapeError(f"Gather of a shape vector: {e}") from None
        return self.b.emit("gather", [data, indices], axis=axis)

    def op_Slice(self, node, inputs, attrs):
        x = inputs[0]
        if self.opset < 10:
            starts, ends = list(attrs["starts"]), list(attrs["ends"])
            axes = list(attrs.get("axes", range(len(starts))))
            steps = [1] * len(starts)
        else:
            starts = self.b.known_ints(inputs[1], "Slice starts")
            ends = self.b.known_ints(inputs[2], "Slice ends")
            axes = self.b.static_ints(inputs[3], "Slice axes") if len(inputs) > 3 and inputs[3] is not None else list(
                range(len(starts)))
            steps = self.b.static_ints(inputs[4], "Slice steps") if len(inputs) > 4 and inputs[4] is not None else [
                1] * len(starts)
        if not all(is_int(b) for b in starts + ends):
            if x.is_symbolic:
                raise ShapeError(f"Slice of a shape vector with symbolic bounds {starts}:{ends} is unsupported")
            return self.symbolic_slice(node, x, starts, ends, axes, steps)
        ends = [min(e, INT64_MAX) for e in ends]
        if x.is_symbolic:
            arr = self.b.sym_array(x)
            index = [slice(None)] * arr.ndim
            for a, s, e, st in zip(axes, starts, ends, steps):
                if not -arr.ndim <= a < arr.ndim:
                    raise ShapeError(f"Slice axis {a} is out of range for a shape value of rank {arr.ndim}")
                if st == 0:
                    raise ShapeError("Slice step 0 (ONNX requires a non-zero step)")
                index[a % arr.ndim] = slice(s, e, st)
            return const_value(arr[tuple(index)])
        return self.b.emit("slice", [x], starts=starts, ends=ends, axes=axes, steps=steps)

    def symbolic_slice(self, node, x: V, starts: list, ends: list, axes: list, steps: list) -> V:
        """A Slice whose bounds are dim expressions (`position_ids[:, :seq]`, `mask[..., past:past + seq]`):
        each such axis becomes a gather of `begin + step * iota(length)`, its length a dim expression.

        ONNX clamps the bounds to the dim; where the algebra cannot prove a bound in range, the import
        assumes it and records the assumption as a guard (`seq <= 64`), so the run-time check
        rejects sizes at which the clamped length would differ (where the exported model itself
        fails: the slice feeds an op that needs the unclamped length)."""
        static = ([], [], [], [])
        for a, s0, e0, st in zip(axes, starts, ends, steps):
            a %= x.rank
            if is_int(s0) and is_int(e0):
                for part, value in zip(static, (s0, min(e0, INT64_MAX), a, st)):
                    part.append(value)
                continue
            if st <= 0:
                raise ShapeError(f"Slice with symbolic bounds {s0}:{e0} and step {st} is unsupported (steps must be "
                                 "positive)")
            size = x.sym[a]
            if size is DYN:
                raise ShapeError(f"Slice with symbolic bounds {s0}:{e0} of a dim unknown at compile time")
            where = f"node '{node.name or node.op_type}' slices {s0}:{e0} of a dim of size {size}"
            begin, stop = (self._slice_bound(b, size, where) for b in (s0, e0))
            assume_le(self.b, 0, begin, where)
            assume_le(self.b, begin, stop, where)
            assume_le(self.b, stop, size, where)
            length = sym_int(stop - begin if st == 1 else symbolic.floor_div(stop - begin + st - 1, st))
            if sym_eq(length, size) and sym_eq(begin, 0) and st == 1:
                continue  # the whole dim
            index = self.b.iota([length], 0, "i64")
            if st != 1:
                index = self.b.emit("mul", [index, self.b.const(np.array(st), "i64")])
            if not sym_eq(begin, 0):
                index = self.b.emit("add", [index, const_value(np.array([begin], dtype=object))])
            x = self.b.emit("gather", [x, index], axis=a)
        if static[0]:
            x = self.b.emit("slice", [x], starts=static[0], ends=static[1], axes=static[2], steps=static[3])
        return x

    @staticmethod
    def _slice_bound(bound, size, where: str):
        """A Slice bound in [0, size] terms: a negative one counts from the end (its sign must be known)."""
        if is_int(bound):
            if bound >= INT64_MAX // 2:
                return size
            bound = size + bound if bound < 0 else bound
            return min(max(bound, 0), size) if is_int(size) else bound
        if bound.is_nonnegative:
            return bound
        if bound.is_negative:
            return sym_int(size + bound)
        raise ShapeError(f"{where}: the sign of the bound {bound} is unknown at compile time")

    def op_Split(self, node, inputs, attrs):
        x = inputs[0]
        axis = normalize_axis(attrs.get("axis", 0), x.rank)
        n_out = len(node.output)
        if self.opset >= 13 and len(inputs) > 1 and inputs[1] is not None:
            sizes = self.b.static_ints(inputs[1], "Split sizes")
        elif "split" in attrs:
            sizes = list(attrs["split"])
        else:
            dim = x.sym[axis]
            if not is_int(dim):
                raise ShapeError(f"Split of a dynamic dim ({dim}) into equal parts is unsupported")
            parts = attrs.get("num_outputs", n_out)
            chunk = -(-dim // parts)
            sizes = [min(chunk, dim - i * chunk) for i in range(parts)]
        if len(set(sizes)) == 1 and len(sizes) > 1:
            return self.b.emit_all("split", [x], {"axis": axis, "parts": len(sizes)})
        outs, start = [], 0
        for size in sizes:
            outs.append(self.b.emit("slice", [x], starts=[start], ends=[start + size], axes=[axis], steps=[1]))
            start += size
        return outs

    def op_Expand(self, node, inputs, attrs):
        x, shape_v = inputs
        shape = self.b.known_ints(shape_v, "Expand's shape")
        return self.b.broadcast(x, shape)

    def op_Tile(self, node, inputs, attrs):
        x = inputs[0]
        repeats = self.b.static_ints(inputs[1], "Tile repeats")
        # [d0, d1] x [r0, r1] -> unsqueeze to [1, d0, 1, d1], broadcast to [r0, d0, r1, d1], reshape.
        inter = []
        for d in x.sym:
            inter += [1, d]
        y = self.b.reshape(x, inter)
        target = []
        for r, d in zip(repeats, x.sym):
            target += [r, d]
        y = self.b.broadcast(y, target)
        return self.b.reshape(y, [sym_int(r * d) for r, d in zip(repeats, x.sym)])

    def op_Pad(self, node, inputs, attrs):
        x = inputs[0]
        mode = attrs.get("mode", "constant")
        if mode not in ("constant", "reflect", "edge"):
            raise ShapeError(f"Pad mode '{mode}' is unsupported")
        if self.opset < 11:
            pads = list(attrs["pads"])
            value = attrs.get("value", 0.0)
        else:
            pads = self.b.static_ints(inputs[1], "Pad pads")
            value = self.b.scalar(inputs[2] if len(inputs) > 2 else None, "Pad constant_value", 0)
            if len(inputs) > 3 and inputs[3] is not None:
                axes = [normalize_axis(a, x.rank, "axes") for a in self.b.static_ints(inputs[3], "Pad axes")]
                full = [0] * (2 * x.rank)
                for i, a in enumerate(axes):
                    full[a], full[x.rank + a] = pads[i], pads[len(axes) + i]
                pads = full
        return self.b.emit("pad", [x], pads=pads, mode=mode, value=float(value))

    def op_DepthToSpace(self, node, inputs, attrs):
        x = inputs[0]
        b = attrs["blocksize"]
        n, c, h, w = x.sym
        cb = self.b.exact_div(c, b * b)
        if attrs.get("mode", "DCR") == "DCR":
            y = self.b.reshape(x, [n, b, b, cb, h, w])
            y = self.b.emit("transpose", [y], perm=[0, 3, 4, 1, 5, 2])
        else:
            y = self.b.reshape(x, [n, cb, b, b, h, w])
            y = self.b.emit("transpose", [y], perm=[0, 1, 4, 2, 5, 3])
        return self.b.reshape(y, [n, cb, sym_int(h * b), sym_int(w * b)])

    def op_SpaceToDepth(self, node, inputs, attrs):
        x = inputs[0]
        b = attrs["blocksize"]
        n, c, h, w = x.sym
        hb, wb = self.b.exact_div(h, b), self.b.exact_div(w, b)
        y = self.b.reshape(x, [n, c, hb, b, wb, b])
        perm = [0, 1, 3, 5, 2, 4] if attrs.get("mode", "DCR") == "CRD" else [0, 3, 5, 1, 2, 4]
        y = self.b.emit("transpose", [y], perm=perm)
        return self.b.reshape(y, [n, sym_int(c * b * b), hb, wb])

    def op_Trilu(self, node, inputs, attrs):
        x = inputs[0]
        k = int(self.b.scalar(inputs[1] if len(inputs) > 1 else None, "Trilu k", 0))
        rows, cols = x.sym[-2], x.sym[-1]
        r = self.b.iota([rows, cols], 0, "i64")
        c = self.b.iota([rows, cols], 1, "i64")
        diff = self.b.emit("sub", [c, r])  # col - row
        kk = self.b.const(np.array(k, np.int64))
        keep = self.b.emit("ge" if attrs.get("upper", 1) else "le", [diff, kk])
        return self.b.emit("where", [keep, x, self.b.scalar_like(0, x)])

    # ---------------------------------------------------------------- elementwise specials

    def op_Pow(self, node, inputs, attrs):
        x, y = inputs
        return self.b.emit("pow", [x, self.b.cast(y, x.dtype)])

    def op_Neg(self, node, inputs, attrs):
        x = inputs[0]
        if x.is_symbolic:  # `-seq` as the start of `x[:, -seq:]`
            return const_value(np.frompyfunc(lambda d: sym_int(-d), 1, 1)(self.b.sym_array(x)))
        return self.b.emit("neg", [x])

    def op_Mod(self, node, inputs, attrs):
        a, b = inputs
        if self.b.sym_ready(a, b):
            return const_value(SYM_BINARY["Mod"](self.b.sym_array(a), self.b.sym_array(b)))
        return self.b.emit("mod", [a, b], fmod=bool(attrs.get("fmod", 0)))

    def op_Where(self, node, inputs, attrs):
        c, x, y = inputs
        if c.is_const and self.b.sym_ready(x, y) or (c.is_const and x.known and y.known and
                                                     (x.is_symbolic or y.is_symbolic)):
            return const_value(np.where(c.const.astype(bool), self.b.sym_array(x), self.b.sym_array(y)))
        return self.b.emit("where", [c, x, y])

    def op_Clip(self, node, inputs, attrs):
        x = inputs[0]
        if self.opset < 11:
            return self.b.emit("clip", [x], min=float(attrs.get("min", -math.inf)),
                               max=float(attrs.get("max", math.inf)))
        lo = inputs[1] if len(inputs) > 1 else None
        hi = inputs[2] if len(inputs) > 2 else None
        if (lo is None or lo.is_const) and (hi is None or hi.is_const):
            return self.b.emit("clip", [x], min=float(self.b.scalar(lo, "Clip min", -math.inf)),
                               max=float(self.b.scalar(hi, "Clip max", math.inf)))
        # Run-time bounds: max(x, min) then min(., max), in the operand's type.
        if lo is not None:
            x = self.b.emit("max", [x, lo])
        if hi is not None:
            x = self.b.emit("min", [x, hi])
        return x

    def op_LeakyRelu(self, node, inputs, attrs):
        return self.b.emit("leaky_relu", [inputs[0]], alpha=attrs.get("alpha", 0.01))

    def op_Elu(self, node, inputs, attrs):
        return self.b.emit("elu", [inputs[0]], alpha=attrs.get("alpha", 1.0))

    def op_Selu(self, node, inputs, attrs):
        return self.b.emit("selu", [inputs[0]], alpha=attrs.get("alpha", 1.67326319217681884765625),
                           gamma=attrs.get("gamma", 1.05070102214813232421875))

    def op_HardSigmoid(self, node, inputs, attrs):
        return self.b.emit("hard_sigmoid", [inputs[0]], alpha=attrs.get("alpha", 0.2), beta=attrs.get("beta", 0.5))

    def op_Gelu(self, node, inputs, attrs):
        return self.b.emit("gelu", [inputs[0]], approximate=attrs.get("approximate", "none"))

    def op_PRelu(self, node, inputs, attrs):
        x, slope = inputs
        neg = self.b.emit("lt", [x, self.b.scalar_like(0, x)])
        return self.b.emit("where", [neg, self.b.emit("mul", [x, slope]), x])

    def op_ThresholdedRelu(self, node, inputs, attrs):
        x = inputs[0]
        keep = self.b.emit("gt", [x, self.b.scalar_like(attrs.get("alpha", 1.0), x)])
        return self.b.emit("where", [keep, x, self.b.scalar_like(0, x)])

    def op_IsInf(self, node, inputs, attrs):
        x = inputs[0]
        pos, neg = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
        inf = self.b.emit("isinf", [x])
        if pos and neg:
            return inf
        if not pos and not neg:
            return self.b.emit("and", [inf, self.b.const(np.array(False))])
        side = self.b.emit("gt" if pos else "lt", [x, self.b.scalar_like(0, x)])
        return self.b.emit("and", [inf, side])

    def op_BitShift(self, node, inputs, attrs):
        name = "shift_left" if attrs["direction"] == "LEFT" else "shift_right"
        return self.b.emit(name, inputs[:2])

    def op_Mean(self, node, inputs, attrs):
        vals = [v for v in inputs if v is not None]
        total = self.variadic("add", "Sum", vals)
        return self.b.emit("div", [total, self.b.scalar_like(len(vals), total)])

    def op_Dropout(self, node, inputs, attrs):
        x = inputs[0]
        outs = [x]
        if len(node.output) > 1 and node.output[1]:
            ones = self.b.broadcast(self.b.const(np.array(True)), list(x.sym))
            outs.append(ones)
        return outs

    # ---------------------------------------------------------------- contractions

    def op_MatMul(self, node, inputs, attrs):
        return self.b.emit("matmul", inputs[:2])

    def op_Gemm(self, node, inputs, attrs):
        a, b = inputs[0], inputs[1]
        c = inputs[2] if len(inputs) > 2 else None
        alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
        y = self.b.emit("matmul", [a, b], transpose_lhs=bool(attrs.get("transA", 0)),
                        transpose_rhs=bool(attrs.get("transB", 0)))
        if alpha != 1.0:
            y = self.b.emit("mul", [y, self.b.scalar_like(alpha, y)])
        if c is not None and beta != 0.0:
            if beta != 1.0:
                c = self.b.emit("mul", [c, self.b.scalar_like(beta, c)])
            y = self.b.emit("add", [y, c])
        return y

    def _spatial_pads(self, x: V, kernel: list[int], strides, dilations, attrs) -> list[int]:
        n = len(kernel)
        auto_pad = attrs.get("auto_pad", "NOTSET")
        if auto_pad in ("NOTSET", ""):
            return list(attrs.get("pads", [0] * (2 * n)))
        if auto_pad == "VALID":
            return [0] * (2 * n)
        pads = [0] * (2 * n)
        for i in range(n):
            size = x.sym[2 + i]
            if not is_int(size):
                raise ShapeError(f"auto_pad {auto_pad} on a dynamic spatial dim is unsupported")
            out = -(-size // strides[i])
            total = max(0, (out - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1 - size)
            small, big = total // 2, total - total // 2
            pads[i], pads[n + i] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        return pads

    def op_Conv(self, node, inputs, attrs):
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        n = x.rank - 2
        kernel = list(attrs.get("kernel_shape", w.sym[2:]))
        strides = list(attrs.get("strides", [1] * n))
        dilations = list(attrs.get("dilations", [1] * n))
        pads = self._spatial_pads(x, kernel, strides, dilations, attrs)
        y = self.b.emit("conv", [x, w], strides=strides, pads=pads, dilations=dilations, groups=attrs.get("group", 1))
        if bias is not None:
            b = self.b.reshape(bias, [1, bias.sym[0]] + [1] * n)
            y = self.b.emit("add", [y, b])
        return y

    def _pool(self, name: str, node, inputs, attrs) -> V:
        x = inputs[0]
        n = x.rank - 2
        kernel = list(attrs["kernel_shape"])
        strides = list(attrs.get("strides", [1] * n))
        dilations = list(attrs.get("dilations", [1] * n))
        pads = self._spatial_pads(x, kernel, strides, dilations, attrs)
        extra = {"ceil_mode": bool(attrs.get("ceil_mode", 0))}
        extra["dilations"] = dilations
        if name == "avg_pool":
            extra["count_include_pad"] = bool(attrs.get("count_include_pad", 0))
        return self.b.emit(name, [x], kernel=kernel, strides=strides, pads=pads, **extra)

    def op_MaxPool(self, node, inputs, attrs):
        if len(node.output) > 1 and node.output[1]:
            raise ShapeError("MaxPool's Indices output is unsupported")
        if attrs.get("storage_order", 0):
            raise ShapeError("MaxPool storage_order=1 is unsupported")
        return self._pool("max_pool", node, inputs, attrs)

    def op_AveragePool(self, node, inputs, attrs):
        return self._pool("avg_pool", node, inputs, attrs)

    def op_GlobalAveragePool(self, node, inputs, attrs):
        return self.b.emit("global_avg_pool", [inputs[0]])

    def op_GlobalMaxPool(self, node, inputs, attrs):
        return self.b.emit("global_max_pool", [inputs[0]])

    # ---------------------------------------------------------------- normalization and reductions

    def op_BatchNormalization(self, node, inputs, attrs):
        if attrs.get("training_mode", 0) or len([o for o in node.output if o]) > 1:
            return self._batch_norm_training(node, inputs, attrs)
        return self.b.emit("batch_norm", inputs[:5], epsilon=attrs.get("epsilon", 1e-5))

    def _batch_norm_training(self, node, inputs, attrs) -> list[V]:
        """Training-mode batch norm: batch statistics normalize; running statistics update by momentum."""
        x, scale, bias, running_mean, running_var = inputs[:5]
        axes = [0] + list(range(2, x.rank))
        shape = [1, x.sym[1]] + [1] * (x.rank - 2)
        mean = self.b.emit("reduce_mean", [x], axes=axes, keepdims=True)
        centered = self.b.emit("sub", [x, mean])
        var = self.b.emit("reduce_mean", [self.b.emit("mul", [centered, centered])], axes=axes, keepdims=True)
        eps = self.b.scalar_like(attrs.get("epsilon", 1e-5), x)
        y = self.b.emit("mul", [centered, self.b.emit("rsqrt", [self.b.emit("add", [var, eps])])])
        y = self.b.emit("add", [self.b.emit("mul", [y, self.b.reshape(scale, shape)]), self.b.reshape(bias, shape)])
        momentum = attrs.get("momentum", 0.9)
        keep, take = self.b.scalar_like(momentum, x), self.b.scalar_like(1 - momentum, x)
        flat_mean = self.b.reshape(mean, [x.sym[1]])
        flat_var = self.b.reshape(var, [x.sym[1]])
        new_mean = self.b.emit("add", [self.b.emit("mul", [running_mean, keep]), self.b.emit("mul", [flat_mean, take])])
        new_var = self.b.emit("add", [self.b.emit("mul", [running_var, keep]), self.b.emit("mul", [flat_var, take])])
        return [y, new_mean, new_var]

    def op_InstanceNormalization(self, node, inputs, attrs):
        x, scale, bias = inputs
        axes = list(range(2, x.rank))
        mean = self.b.emit("reduce_mean", [x], axes=axes, keepdims=True)
        centered = self.b.emit("sub", [x, mean])
        var = self.b.emit("reduce_mean", [self.b.emit("mul", [centered, centered])], axes=axes, keepdims=True)
        eps = self.b.scalar_like(attrs.get("epsilon", 1e-5), x)
        y = self.b.emit("mul", [centered, self.b.emit("rsqrt", [self.b.emit("add", [var, eps])])])
        shape = [1, x.sym[1]] + [1] * (x.rank - 2)
        return self.b.emit("add", [self.b.emit("mul", [y, self.b.reshape(scale, shape)]), self.b.reshape(bias, shape)])

    def op_LayerNormalization(self, node, inputs, attrs):
        if len(node.output) > 1 and any(node.output[1:]):
            return self._layer_norm_with_statistics(node, inputs, attrs)
        x, scale = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
        axis = normalize_axis(attrs.get("axis", -1), x.rank)
        norm_shape = list(x.sym[axis:])
        if scale.rank != len(norm_shape):
            scale = self.b.broadcast(scale, norm_shape)
        if bias is None:
            bias = self.b.broadcast(self.b.scalar_like(0, x), norm_shape)
        elif bias.rank != len(norm_shape):
            bias = self.b.broadcast(bias, norm_shape)
        return self.b.emit("layer_norm", [x, scale, bias], axis=axis, epsilon=attrs.get("epsilon", 1e-5))

    def _layer_norm_with_statistics(self, node, inputs, attrs) -> list[V]:
        """LayerNormalization that also returns Mean and InvStdDev: spelled out in the stash type."""
        x, scale = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
        axis = normalize_axis(attrs.get("axis", -1), x.rank)
        stash = ONNX_DTYPES.get(attrs.get("stash_type", 1), "f32")
        axes = list(range(axis, x.rank))
        xs = self.b.cast(x, stash)
        mean = self.b.emit("reduce_mean", [xs], axes=axes, keepdims=True)
        centered = self.b.emit("sub", [xs, mean])
        var = self.b.emit("reduce_mean", [self.b.emit("mul", [centered, centered])], axes=axes, keepdims=True)
        eps = self.b.const(np.array(attrs.get("epsilon", 1e-5)), stash)
        inv_std = self.b.emit("rsqrt", [self.b.emit("add", [var, eps])])
        y = self.b.cast(self.b.emit("mul", [centered, inv_std]), x.dtype)
        y = self.b.emit("mul", [y, scale])
        if bias is not None:
            y = self.b.emit("add", [y, bias])
        return [y, mean, inv_std]

    def op_RMSNormalization(self, node, inputs, attrs):
        x, scale = inputs[0], inputs[1]
        axis = normalize_axis(attrs.get("axis", -1), x.rank)
        norm_shape = list(x.sym[axis:])
        if scale.rank != len(norm_shape):
            scale = self.b.broadcast(scale, norm_shape)
        return self.b.emit("rms_norm", [x, scale], axis=axis, epsilon=attrs.get("epsilon", 1e-5))

    def op_LRN(self, node, inputs, attrs):
        return self.b.emit("lrn", [inputs[0]], size=attrs["size"], alpha=attrs.get("alpha", 1e-4),
                           beta=attrs.get("beta", 0.75), bias=attrs.get("bias", 1.0))

    def _softmax(self, name: str, inputs, attrs) -> V:
        x = inputs[0]
        if self.opset >= 13:
            return self.b.emit(name, [x], axis=attrs.get("axis", -1))
        axis = normalize_axis(attrs.get("axis", 1), x.rank)
        if axis == x.rank - 1:
            return self.b.emit(name, [x], axis=-1)
        # Before opset 13 softmax coerces the input to 2-D at `axis`.
        head, tail = symbolic.product(x.sym[:axis]), symbolic.product(x.sym[axis:])
        flat = self.b.reshape(x, [sym_int(head), sym_int(tail)])
        return self.b.reshape(self.b.emit(name, [flat], axis=1), list(x.sym))

    def op_Softmax(self, node, inputs, attrs):
        return self._softmax("softmax", inputs, attrs)

    def op_LogSoftmax(self, node, inputs, attrs):
        return self._softmax("log_softmax", inputs, attrs)

    def _arg(self, name: str, inputs, attrs) -> V:
        return self.b.emit(name, [inputs[0]], axis=attrs.get("axis", 0), keepdims=bool(attrs.get("keepdims", 1)),
                           select_last_index=bool(attrs.get("select_last_index", 0)))

    def op_ArgMax(self, node, inputs, attrs):
        return self._arg("argmax", inputs, attrs)

    def op_ArgMin(self, node, inputs, attrs):
        return self._arg("argmin", inputs, attrs)

    def _composite_reduce(self, inputs, attrs, pre, reducer, post, since=18) -> V:
        x = inputs[0]
        axes = self.axes_of(None, inputs, attrs, 1, since)
        keepdims = bool(attrs.get("keepdims", 1))
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.rank))
        y = self.b.emit(reducer, [pre(x)], axes=axes, keepdims=keepdims)
        return post(y)

    def op_ReduceL1(self, node, inputs, attrs):
        return self._composite_reduce(inputs, attrs, lambda x: self.b.emit("abs", [x]), "reduce_sum", lambda y: y)

    def op_ReduceL2(self, node, inputs, attrs):
        return self._composite_reduce(inputs, attrs, lambda x: self.b.emit("mul", [x, x]), "reduce_sum",
                                      lambda y: self.b.emit("sqrt", [y]))

    def op_ReduceSumSquare(self, node, inputs, attrs):
        return self._composite_reduce(inputs, attrs, lambda x: self.b.emit("mul", [x, x]), "reduce_sum", lambda y: y)

    def op_ReduceLogSum(self, node, inputs, attrs):
        return self._composite_reduce(inputs, attrs, lambda x: x, "reduce_sum", lambda y: self.b.emit("log", [y]))

    def op_ReduceLogSumExp(self, node, inputs, attrs):
        x = inputs[0]
        axes = self.axes_of(None, inputs, attrs, 1, 18) or list(range(x.rank))
        keepdims = bool(attrs.get("keepdims", 1))
        peak = self.b.emit("reduce_max", [x], axes=axes, keepdims=True)
        shifted = self.b.emit("exp", [self.b.emit("sub", [x, peak])])
        summed = self.b.emit("reduce_sum", [shifted], axes=axes, keepdims=True)
        y = self.b.emit("add", [self.b.emit("log", [summed]), peak])
        return y if keepdims else self.b.emit("squeeze", [y], axes=axes)
