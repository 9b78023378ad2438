"""Values while importing: run-time tensors, compile-time constants, and symbolic shape vectors.

Importers see three kinds of value, and `Builder.emit` (sdc/frontend/builder.py) decides which
one an op produces:

- a constant (`V.const`, a numpy array): every input known at compile time, so the op is
  evaluated right away by its reference semantics (this folds weights that a graph computes,
  e.g. ConstantOfShape of a static shape);
- a symbolic vector (`V.const` of dtype object, entries ints or sympy expressions): run-time
  shape arithmetic (Shape -> Gather -> Concat -> Reshape) evaluated over symbolic dims, so it
  folds to attributes like `shape = ["B", "S", 12, 64]`;
- a run-time tensor (`V.value`, an `ir.Value`) with its symbolic shape (`V.sym`).

Constants turn into IR only when a run-time op uses them: small ones as `sdc.constant`, big
ones as `sdc.parameter` whose data goes to the weights.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from sdc import dtypes
from sdc.dialect import symbolic
from sdc.dialect.shapes import DYN, ShapeContext, TensorSpec
from sdc.dialect.symbolic import sym_int  # noqa: F401 (the frontends' dim normalizer, public here)
from sdc.mlir import ir


def is_int(d) -> bool:
    return isinstance(d, int)


@dataclass
class V:
    """One imported value (see the module docstring)."""

    dtype: str
    sym: tuple = ()
    value: ir.Value | None = None
    const: np.ndarray | None = None
    torch_const: torch.Tensor | None = None  # for dtypes numpy lacks (bf16)
    name: str | None = None  # the source's name for a constant (an ONNX initializer), kept for weights

    @property
    def is_const(self) -> bool:
        return (self.const is not None and self.const.dtype != object) or self.torch_const is not None

    @property
    def is_symbolic(self) -> bool:
        return self.const is not None and self.const.dtype == object

    @property
    def known(self) -> bool:
        return self.const is not None or self.torch_const is not None

    @property
    def rank(self) -> int:
        return len(self.sym)

    def as_torch(self) -> torch.Tensor:
        if self.torch_const is not None:
            return self.torch_const
        array = np.asarray(self.const, order="C")
        return torch.from_numpy(array if array.flags.writeable else array.copy())

    def ints(self) -> list:
        """Entries of a known 1-D vector, as ints and sympy expressions."""
        return [sym_int(x) for x in np.asarray(self.const).reshape(-1).tolist()]


def const_value(array: np.ndarray) -> V:
    array = np.asarray(array)
    if array.dtype == object:
        entries = [sym_int(x) for x in array.reshape(-1).tolist()]
        if all(is_int(e) for e in entries):
            array = np.array(entries, dtype=np.int64).reshape(array.shape)
            return V("i64", tuple(array.shape), const=array)
        return V("i64", tuple(array.shape), const=np.array(entries, dtype=object).reshape(array.shape))
    return V(dtypes.from_numpy(array.dtype), tuple(array.shape), const=array)


def torch_value(t: torch.Tensor) -> V:
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return V("bf16", tuple(t.shape), torch_const=t.contiguous())
    return V(dtypes.from_torch(t.dtype), tuple(t.shape), const=t.numpy())


class SymbolicShapes(ShapeContext):
    """Shape rules over sympy dims: equalities between static dims are checked, others trusted
    (the shape-constraint pass proves or guards them later)."""

    def __init__(self, mesh=None):
        self.mesh = mesh

    def product(self, dims):
        if any(d is DYN for d in dims):
            return DYN
        return sym_int(symbolic.product(dims))

    def exact_div(self, a, b, message: str):
        if a is DYN or b is DYN:
            return DYN
        if is_int(a) and is_int(b):
            return super().exact_div(a, b, message)
        quotient = symbolic.polynomial_quotient(a, b)
        return DYN if quotient is None else quotient

    def window(self, size, k, stride: int, pad_begin: int, pad_end: int, dilation: int, ceil_mode: bool = False):
        """Conv/pool output length over a symbolic dim: floor((size + pads - span) / stride) + 1."""
        if is_int(size) or size is DYN or not is_int(k) or ceil_mode:
            return super().window(size, k, stride, pad_begin, pad_end, dilation, ceil_mode)
        span = dilation * (k - 1) + 1
        return sym_int(symbolic.floor_div(size + pad_begin + pad_end - span, stride) + 1)

    def slice_len(self, size, start: int, end: int, step: int):
        """Slices of a symbolic dim whose bounds are clear (from the start or the end, step 1)."""
        if size is DYN or step != 1:
            return DYN
        big = 2**62
        begin = start if start >= 0 else size + start
        stop = size if end >= big else (end if end >= 0 else size + end)
        if start < 0 and end >= big:
            return -start  # the last -start elements (assumes the dim is at least that long)
        if start >= 0 and end >= 0 and end < big:
            return DYN if not is_int(size) else min(size, end) - start
        return sym_int(stop - begin)


def spec_of(v: V) -> TensorSpec:
    return TensorSpec(tuple(v.sym), v.dtype)


def ir_shape(sym: tuple) -> TensorSpec:
    return tuple(d if is_int(d) else DYN for d in sym)


_IDENT = re.compile(r"[^A-Za-z0-9_]")


def symbol_name(text: str) -> str:
    """A dim name usable in dim expressions (identifier characters only)."""
    name = _IDENT.sub("_", text)
    if not name or name[0].isdigit():
        name = "d_" + name
    return name
