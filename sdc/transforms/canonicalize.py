"""sdc-canonicalize: local simplifications every later pass can rely on.

Patterns (each a small function; see PATTERNS):
- a cast to the operand's own type disappears; a cast of a lossless cast casts once;
- a reshape of a reshape is one reshape; a reshape to the operand's own static type disappears;
- a transpose of a transpose is one transpose, and an identity transpose disappears;
- a reshape that splits one dim in two, a transpose that swaps the two and a reshape that joins them
  again (ShuffleNet's channel shuffle) are one gather along that dim by a constant permutation
  (`block_transpose_gather`): the gather follows the layout its operand lies in, where the three
  shape ops pin their tensors row-major, and the runtime runs it as one copy;
- a bmm between reshapes that flatten and restore the same batch dims is a matmul of the full rank
  (attention_pattern.unflatten_batch_matmul: torch.export's decomposition of 4-D matmuls);
- squeeze/unsqueeze/reshape/transpose/cast/... of constants fold when the result is small
  (at most FOLD_LIMIT elements): shape computations exported graphs build at run time
  become literals.
"""

from __future__ import annotations

import math

from dataclasses import dataclass

import numpy as np

from sdc import dtypes
from sdc.diagnostics import DiagnosticSink
from sdc.dialect.dense import DenseValue
from sdc.dialect.ir import defining_op, read_attrs, tensor_spec
from sdc.dialect.builder import create
from sdc.dialect.opdef import OPS, RefEnv
from sdc.dialect.shapes import block_transpose_indices, is_static
from sdc.mlir import ir, rewrite
from sdc.transforms.attention_pattern import unflatten_batch_matmul
from sdc.transforms.base import ModulePass, pattern_set

FOLD_LIMIT = 4096


def _producer(value: ir.Value, name: str) -> ir.Operation | None:
    owner = defining_op(value)
    return owner if owner is not None and owner.name == name else None


def _attrs(op: ir.Operation) -> dict:
    return read_attrs(OPS[op.name[4:]], op)


def _replace_with(rewriter, op: ir.Operation, name: str, operands, attrs: dict) -> None:
    with rewriter.ip:
        new = create(name, operands, attrs, result_types=[r.type for r in op.results], loc=op.location)
    rewriter.replace_op(op, new.results)


# ---------------------------------------------------------------- casts

_LOSSLESS = {
    "i1": {"i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64", "f16", "bf16", "f32", "f64"},
    "i8": {"i16", "i32", "i64", "f16", "bf16", "f32", "f64"},
    "i16": {"i32", "i64", "f32", "f64"},
    "i32": {"i64", "f64"},
    "ui8": {"ui16", "ui32", "ui64", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"},
    "ui16": {"ui32", "ui64", "i32", "i64", "f32", "f64"},
    "ui32": {"ui64", "i64", "f64"},
    "f16": {"f32", "f64"},
    "bf16": {"f32", "f64"},
    "f32": {"f64"},
}


def cast_to_same_type(op, rewriter) -> bool:
    if op.operands[0].type != op.results[0].type:
        return False
    rewriter.replace_op(op, [op.operands[0]])
    return True


def cast_of_lossless_cast(op, rewriter) -> bool:
    inner = _producer(op.operands[0], "sdc.cast")
    if inner is None:
        return False
    source = tensor_spec(inner.operands[0].type).dtype
    middle = tensor_spec(inner.results[0].type).dtype
    if middle not in _LOSSLESS.get(source, ()):
        return False
    _replace_with(rewriter, op, "cast", [inner.operands[0]], {"dtype": _attrs(op)["dtype"]})
    return True


# ---------------------------------------------------------------- reshapes and transposes


def reshape_of_reshape(op, rewriter) -> bool:
    inner = _producer(op.operands[0], "sdc.reshape")
    if inner is None:
        return False
    _replace_with(rewriter, op, "reshape", [inner.operands[0]], {"shape": _attrs(op)["shape"]})
    return True


def reshape_to_same_type(op, rewriter) -> bool:
    t = op.operands[0].type
    if t != op.results[0].type or not ir.RankedTensorType(t).has_static_shape:
        return False
    rewriter.replace_op(op, [op.operands[0]])
    return True


def transpose_of_transpose(op, rewriter) -> bool:
    inner = _producer(op.operands[0], "sdc.transpose")
    if inner is None:
        return False
    first, second = _attrs(inner)["perm"], _attrs(op)["perm"]
    composed = [first[p] for p in second]
    if composed == list(range(len(composed))):
        rewriter.replace_op(op, [inner.operands[0]])
    else:
        _replace_with(rewriter, op, "transpose", [inner.operands[0]], {"perm": composed})
    return True


def identity_transpose(op, rewriter) -> bool:
    perm = _attrs(op)["perm"]
    if perm != list(range(len(perm))):
        return False
    rewriter.replace_op(op, [op.operands[0]])
    return True


# The longest dim a block transpose becomes a gather along: the permutation is a constant of that many
# int64 indices.
BLOCK_TRANSPOSE_LIMIT = 1 << 16


def _single_use(value: ir.Value) -> bool:
    uses = iter(value.uses)
    return next(uses, None) is not None and next(uses, None) is None


def block_transpose_gather(op, rewriter) -> bool:
    """reshape(transpose(reshape(x))) that splits a dim k of x into [a, b], swaps the two and joins them
    back into x's own shape -> gather(x, block_transpose_indices(a, b), axis=k)."""
    swap = _producer(op.operands[0], "sdc.transpose")
    split = _producer(swap.operands[0], "sdc.reshape") if swap is not None else None
    if split is None or op.results[0].type != split.operands[0].type:
        return False
    if not (_single_use(swap.results[0]) and _single_use(split.results[0])):
        return False
    x = tensor_spec(split.operands[0].type).shape
    parts = tensor_spec(split.results[0].type).shape
    perm = _attrs(swap)["perm"]
    k = next((i for i, p in enumerate(perm) if p != i), None)
    if (k is None or len(parts) != len(x) + 1 or k + 1 >= len(parts)
            or perm != [*range(k), k + 1, k, *range(k + 2, len(parts))]):
        return False
    a, b = parts[k], parts[k + 1]
    if not (is_static(a) and is_static(b) and is_static(x[k])) or a * b != x[k] or a * b > BLOCK_TRANSPOSE_LIMIT:
        return False
    others = [*zip(parts[:k], x[:k]), *zip(parts[k + 2:], x[k + 1:])]
    if any(is_static(p) != is_static(d) or (is_static(p) and p != d) for p, d in others):
        return False
    # the element count fixes one dynamic dim; two could trade a factor ([B, 6, T] as [2B, 2, 3, T/2])
    if sum(not is_static(d) for _, d in others) > 1:
        return False
    with rewriter.ip:
        indices = create("constant", [], {"value": DenseValue.from_numpy(
            np.array(block_transpose_indices(a, b), dtype=np.int64))}, loc=op.location)
    _replace_with(rewriter, op, "gather", [split.operands[0], indices.results[0]], {"axis": k})
    return True


# ---------------------------------------------------------------- constant folding


def fold_constant_operands(op, rewriter) -> bool:
    opdef = OPS.get(op.name[4:])
    if opdef is None or not opdef.pure or not op.operands or opdef.name == "constant":
        return False
    producers = [_producer(v, "sdc.constant") for v in op.operands]
    if any(p is None for p in producers):
        return False
    specs = [tensor_spec(r.type) for r in op.results]
    if not all(all(is_static(d) for d in s.shape) for s in specs):
        return False
    if sum(math.prod(s.shape) for s in specs) > FOLD_LIMIT:
        return False
    try:
        inputs = [_attrs(p)["value"].to_torch() for p in producers]
        out = opdef.ref(RefEnv(), _attrs(op), *inputs)
    except Exception:  # an op the reference cannot evaluate here stays as it is
        return False
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    values = []
    with rewriter.ip:
        for t, spec, result in zip(outs, specs, op.results):
            dense = DenseValue(t.to(dtypes.to_torch(spec.dtype)).reshape(spec.shape).contiguous(), spec.dtype)
            values.append(create("constant", [], {"value": dense}, loc=op.location).results[0])
    rewriter.replace_op(op, values)
    return True


PATTERNS = {
    "sdc.cast": [cast_to_same_type, cast_of_lossless_cast],
    "sdc.reshape": [reshape_to_same_type, reshape_of_reshape, block_transpose_gather, unflatten_batch_matmul],
    "sdc.transpose": [identity_transpose, transpose_of_transpose],
}
FOLDABLE = [name for name, d in OPS.items() if d.pure and d.operands and name != "constant"]


@dataclass(frozen=True)
class CanonicalizePass(ModulePass):
    """Options: fold (bool, default true) evaluates small ops on constants at compile time."""

    name = "sdc-canonicalize"
    summary = "fold cast/reshape/transpose chains and small constant expressions"
    fold: bool = True

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        patterns = {k: list(v) for k, v in PATTERNS.items()}
        if self.fold:
            for name in FOLDABLE:
                patterns.setdefault(f"sdc.{name}", []).append(fold_constant_operands)
        rewrite.apply_patterns_and_fold_greedily(module, pattern_set(patterns))
