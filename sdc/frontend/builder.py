"""Emitting sdc ops from any frontend: the part of an importer that is not about its source format.

An importer (ONNX, torch.export, JAX through StableHLO) reads its graph and, for each source node,
calls a `Builder`: `emit` creates `sdc.<op>` at the current insertion point with the node's
location (through the dialect's one builder, `sdc.dialect.builder.create`, given the result types
this module infers with symbolic dims), or evaluates it right away when every input is known at
compile time; constants and parameters appear only where a run-time op uses them; casts, reshapes
(a target with symbolic dims and one -1), broadcasts and iotas are one call each. What a frontend
adds is its own dispatch (ONNX op_type -> method) and its own conventions (ONNX's 0-copy Reshape
entries, auto_pad, opset-dependent arguments).

    b = Builder(params, name_hint=lambda: "w")
    with b.at(Builder.location("fc1", "model.onnx", 3)):
        y = b.emit("matmul", [x, w], transpose_rhs=True)
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np
import torch

from sdc import dtypes
from sdc.dialect.builder import create
from sdc.dialect.dense import DenseValue
from sdc.dialect.ir import tensor_type
from sdc.dialect import symbolic
from sdc.dialect.opdef import OPS, RefEnv
from sdc.dialect.shapes import DYN, ShapeError, TensorSpec
from sdc.dialect.symbolic import to_text
from sdc.dialect.symexpr import SymExprError
from sdc.frontend.values import V, SymbolicShapes, const_value, ir_shape, is_int, spec_of, sym_int, torch_value
from sdc.mlir import ir

INLINE_LIMIT = 256  # constants up to this many elements stay in the IR text
FOLD_LIMIT = 1 << 26  # never evaluate a compile-time op producing more elements than this


class CompileTimeValueError(ShapeError):
    """An op argument that sdc needs at compile time (a shape, axes, a count) is a run-time value."""


class Builder:
    """Emits sdc ops at the current insertion point, folding what is known at compile time.

    `params` receives the data of every `sdc.parameter` created (by name); `name_hint` names a
    parameter whose value has no source name (the importer passes the current node's output).
    """

    def __init__(self, params: dict[str, Any], name_hint: Callable[[], str]):
        self.params = params
        self.name_hint = name_hint
        # computed values of one value everywhere become splat constants, not parameters (the torch
        # frontend sets it: its weights never come through here; an ONNX initializer does and stays a weight)
        self.splat_constants = False
        self.loc: ir.Location | None = None
        self._types: dict[tuple, ir.Type] = {}
        # Conditions on the symbolic dims that the import assumed (a slice `[:seq]` of a dim of 64
        # assumes seq <= 64): (condition text, why), recorded as the function's `sdc.guards`, which
        # the shape pass reads as constraints and the runtime checks.
        self.guards: list[tuple[str, str]] = []

    # ---------------------------------------------------------------- locations and types

    @staticmethod
    def location(name: str, file: str, line: int, column: int = 0) -> ir.Location:
        """`loc("name"("file":line:column))`: a source node's name over its place in the source."""
        return ir.Location.name(name, childLoc=ir.Location.file(file, line, column))

    @contextmanager
    def at(self, loc: ir.Location) -> Iterator[ir.Location]:
        """Emit with `loc` (ops created inside, and the bindings' default location)."""
        previous, self.loc = self.loc, loc
        try:
            with loc:
                yield loc
        finally:
            self.loc = previous

    def tensor_type(self, shape: tuple, dtype: str) -> ir.Type:
        """The ranked tensor type of symbolic dims `shape` (non-int dims are `?`), built once per import."""
        key = (ir_shape(tuple(shape)), dtype)
        t = self._types.get(key)
        if t is None:
            t = self._types[key] = tensor_type(TensorSpec(*key))
        return t

    # ---------------------------------------------------------------- materialization

    def tensor(self, v: V, name: str | None = None) -> ir.Value:
        """The run-time value of `v`, creating a constant or parameter op if needed."""
        if v.value is not None:
            return v.value
        if v.is_symbolic:
            # Shape arithmetic of any rank (a scalar `past + seq`, a [1, 2] pair): its entries as one
            # sdc.dim_values, reshaped to the value's shape.
            dims = [d if is_int(d) else self.dim_text(d) for d in v.ints()]
            flat = create("dim_values", [], {"dims": dims}, loc=self.loc).results[0]
            if v.rank != 1:
                flat = create("reshape", [flat], {"shape": list(v.sym)},
                              result_types=[self.tensor_type(v.sym, "i64")], loc=self.loc).results[0]
            v.value = flat
            return flat
        t = v.as_torch()
        flat = t.reshape(-1)
        # one value everywhere (the zeros F.scaled_dot_product_attention's decomposition fills fully masked
        # rows with) stays a constant of any size: its attribute is a splat, and passes can see the value
        splat = self.splat_constants and v.dtype != "bf16" and flat.numel() > 1 and bool((flat == flat[0]).all())
        if (t.numel() <= INLINE_LIMIT or splat) and v.dtype != "bf16":
            op = create("constant", [], {"value": DenseValue(t.contiguous(), v.dtype)}, loc=self.loc)
        else:
            pname = name or v.name or self.name_hint()
            base, i = pname, 1
            while pname in self.params:
                i += 1
                pname = f"{base}_{i}"
            self.params[pname] = t.contiguous()
            op = create("parameter", [], {"name": pname}, result_types=[self.tensor_type(tuple(t.shape), v.dtype)],
                        loc=self.loc)
        v.value = op.results[0]  # later uses share the one constant or parameter
        return v.value

    @staticmethod
    def dim_text(d) -> str:
        try:
            return to_text(d)
        except SymExprError as e:
            raise ShapeError(str(e)) from None

    # ---------------------------------------------------------------- emitting

    def emit(self, op: str, inputs: list[V], /, **attrs) -> V:
        """`sdc.<op>` on `inputs` with `attrs`, its one result (evaluated now when every input is known)."""
        return self.emit_all(op, inputs, attrs)[0]

    def emit_all(self, op: str, inputs: list[V], attrs: dict | None = None, *, fold: bool = True) -> list[V]:
        """`sdc.<op>` on `inputs`, all its results; `fold=False` keeps it a run-time op even on constants."""
        opdef = OPS[op]
        attrs = opdef.with_defaults(dict(attrs or {}))
        specs = opdef.shape(SymbolicShapes(), [spec_of(v) for v in inputs], attrs) if opdef.shape else None
        if specs is not None:
            specs = [TensorSpec(tuple(sym_int(d) for d in s.shape), s.dtype) for s in specs]
        if fold and opdef.pure and inputs and all(v.is_const for v in inputs) and specs is not None:
            sizes = [_numel(s.shape) for s in specs]  # None for a symbolic shape: never folded
            if None not in sizes and sum(sizes) <= FOLD_LIMIT:
                try:
                    out = opdef.ref(RefEnv(), attrs, *[v.as_torch() for v in inputs])
                except (IndexError, ZeroDivisionError, RuntimeError) as e:
                    # every input is the model's own constant: an index out of range or an integer
                    # division by zero in it is the model's error, found while folding
                    raise ShapeError(f"evaluating sdc.{op} on the model's constants failed: {e}") from None
                outs = list(out) if isinstance(out, (tuple, list)) else [out]
                return [torch_value(t) for t in outs]
        operands = [self.tensor(v) for v in inputs]
        spec_attrs = {k: self._attr_text(v) for k, v in attrs.items()}
        result_types = [self.tensor_type(s.shape, s.dtype) for s in specs] if specs else None
        created = create(op, operands, spec_attrs, result_types=result_types, loc=self.loc)
        return [V(s.dtype, tuple(s.shape), value=r) for s, r in zip(specs, created.results)]

    def _attr_text(self, value):
        """Shape attributes may hold sympy dims: print them as dim expressions."""
        if isinstance(value, (list, tuple)) and any(x is DYN for x in value):
            raise ShapeError(f"an attribute needs a dim that is unknown at compile time: {list(value)}")
        if isinstance(value, (list, tuple)) and any(symbolic.is_symbolic(x) for x in value):
            return [self.dim_text(x) if symbolic.is_symbolic(x) and not x.is_Integer else int(x) for x in value]
        return value

    # ---------------------------------------------------------------- constants

    @staticmethod
    def const(array, dtype: str | None = None) -> V:
        """A compile-time constant (of `dtype` when given)."""
        array = np.asarray(array)
        if dtype:
            array = array.astype(dtypes.to_numpy(dtype))
        return const_value(array)

    def const_like(self, array: np.ndarray, like: V) -> V:
        """A constant of `like`'s element type (bf16 included, which numpy lacks)."""
        if like.dtype == "bf16":
            return torch_value(torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(torch.bfloat16))
        return self.const(array, like.dtype)

    def scalar_like(self, value, like: V) -> V:
        """A rank-0 constant of `like`'s element type: the other operand of `x * 0.5`."""
        if like.dtype == "bf16":
            return torch_value(torch.tensor(value, dtype=torch.bfloat16))
        return self.const(np.array(value), like.dtype)

    def iota(self, shape: list, dimension: int, dtype: str = "i64") -> V:
        """0, 1, 2, ... along `dimension` of a tensor of `shape` (symbolic dims allowed)."""
        return self.emit("iota", [], shape=list(shape), dimension=dimension, dtype=dtype)

    # ---------------------------------------------------------------- values needed at compile time

    def known_ints(self, v: V | None, what: str) -> list:
        """A compile-time int vector (entries may be symbolic dims)."""
        if v is None:
            return []
        if not v.known:
            raise CompileTimeValueError(f"{what} must be known at compile time (it is computed at run time here)")
        return v.ints()

    def static_ints(self, v: V | None, what: str) -> list[int]:
        values = self.known_ints(v, what)
        if not all(is_int(x) for x in values):
            raise ShapeError(f"{what} must be static, found {values}")
        return values

    def known_floats(self, v: V | None, what: str) -> list[float]:
        if v is None:
            return []
        if not v.is_const:
            raise CompileTimeValueError(f"{what} must be known at compile time")
        return [float(s) for s in self.const_array(v, what).reshape(-1)]

    @staticmethod
    def const_array(v: V, what: str) -> np.ndarray:
        """The value of a compile-time constant as numpy (bf16 as f32)."""
        if not v.is_const:
            raise CompileTimeValueError(f"{what} must be known at compile time (its result shape depends on it)")
        if v.dtype == "bf16":
            return v.as_torch().float().numpy()
        return np.asarray(v.const)

    @staticmethod
    def scalar(v: V | None, what: str, default=None):
        """The one value of a compile-time constant (`default` when the input is omitted)."""
        if v is None:
            return default
        if not v.is_const:
            raise CompileTimeValueError(f"{what} must be a compile-time constant")
        values = np.asarray(v.as_torch().float().numpy() if v.dtype == "bf16" else v.const).reshape(-1)
        if values.size != 1:
            raise ShapeError(f"{what} must hold one value, found {values.size}")
        return values[0].item()

    def int_scalar(self, v: V | None, what: str, default=None) -> int | None:
        value = self.scalar(v, what, default)
        return None if value is None else int(value)

    # ---------------------------------------------------------------- symbolic vectors (shape arithmetic)

    @staticmethod
    def sym_ready(*inputs: V | None) -> bool:
        """Every given input is known and one is symbolic: evaluate over sympy dims, emit nothing."""
        present = [v for v in inputs if v is not None]
        return all(v.known for v in present) and any(v.is_symbolic for v in present)

    @staticmethod
    def sym_array(v: V) -> np.ndarray:
        return v.const if v.is_symbolic else v.const.astype(object)

    # ---------------------------------------------------------------- casts and shapes

    def cast(self, v: V, dtype: str) -> V:
        if v.dtype == dtype:
            return v
        if v.is_symbolic and dtypes.is_integer(dtype):
            return v
        return self.emit("cast", [v], dtype=dtype)

    def reshape(self, x: V, target: list) -> V:
        """Reshape to a target of ints/sympy dims and at most one -1 (resolved symbolically where
        the quotient is a dim expression); a no-op reshape emits nothing."""
        target = list(target)
        if -1 in [d for d in target if is_int(d)]:
            i = target.index(-1)
            inferred = _inferred_dim(x.sym, target, i)
            if inferred is not None:
                target[i] = inferred
        if x.is_symbolic:  # a compile-time vector of dims: its new shape must be known too
            if not all(is_int(d) for d in target):
                raise ShapeError(f"a shape value of shape {list(x.sym)} reshaped to {target}: the target must "
                                 "be known at compile time")
            return const_value(self.sym_array(x).reshape([int(d) for d in target]))
        if all(is_int(a) and is_int(b) for a, b in zip(x.sym, target)) and tuple(target) == tuple(x.sym):
            return x
        return self.emit("reshape", [x], shape=target)

    def broadcast(self, x: V, shape: list, *, fold: bool = True) -> V:
        """`x` broadcast to `shape`; `fold=False` keeps a big fill a run-time op instead of a weight."""
        return self.emit_all("broadcast", [x], {"shape": list(shape)}, fold=fold)[0]

    @staticmethod
    def exact_div(a, b):
        """a / b for dims that divide exactly (ints stay ints, symbols stay symbolic)."""
        if is_int(a) and is_int(b):
            if a % b:
                raise ShapeError(f"{a} is not divisible by {b}")
            return a // b
        return sym_int(a / b)


def _inferred_dim(shape: tuple, target: list, index: int):
    """The dim a -1 at `target[index]` stands for, when it is an int or a printable dim expression."""
    if any(d is DYN for d in shape):
        return None
    known = symbolic.product(d for j, d in enumerate(target) if j != index)
    inferred = symbolic.integral_quotient(symbolic.product(shape), known)
    if inferred is None:
        return None
    if not (inferred.free_symbols or inferred.is_Integer):
        return None
    try:
        to_text(inferred)
    except (SymExprError, ValueError, TypeError):  # not expressible in the dim grammar: leave the -1
        return None
    return sym_int(inferred)


def _numel(shape) -> int | None:
    n = 1
    for d in shape:
        if not is_int(d):
            return None
        n *= d
    return n


# ---------------------------------------------------------------- assumptions on symbolic dims


def assume_le(builder: Builder, lhs, rhs, why: str) -> None:
    """Record `lhs <= rhs` (ints or sympy dims) as a guard unless sympy proves it; a ShapeError
    when it is provably false (the model cannot run at any size)."""
    diff = symbolic.difference(rhs, lhs)
    if diff.is_nonnegative:
        return
    if diff.is_negative:
        raise ShapeError(f"{why}: {lhs} <= {rhs} never holds")
    low, high = (Builder.dim_text(sym_int(symbolic.as_sympy(d))) for d in (lhs, rhs))
    condition = f"{low} <= {high}"
    if all(condition != c for c, _ in builder.guards):
        builder.guards.append((condition, why))


# ---------------------------------------------------------------- what every frontend does at the end


def dims_text(sym) -> list | None:
    """A value's symbolic dims for `sdc.dims` (None when a dim is unknown or inexpressible)."""
    out = []
    for d in sym:
        if d is DYN:
            return None
        try:
            out.append(d if is_int(d) else to_text(d))
        except SymExprError:
            return None
    return out


def verify_imported(op: ir.Operation) -> None:
    """The imported module must verify; SdcError with MLIR's messages otherwise (a frontend's bug or a
    model the frontend let through, never a traceback)."""
    from sdc.diagnostics import SdcError
    from sdc.mlir import MLIRError

    try:
        op.verify()
    except MLIRError as e:
        detail = "; ".join(d.message for d in e.error_diagnostics) or str(e)
        raise SdcError(f"imported IR does not verify: {detail}") from None
