"""sdc-verify: run every sdc op's verifier and shape rule, and check entry signatures."""

from __future__ import annotations

from dataclasses import dataclass

from sdc.diagnostics import DiagnosticSink
from sdc.dialect.attrs import AttrError, read_dims
from sdc.dialect.ir import shard_counts, tensor_spec
from sdc.dialect.op_classes import verify_op
from sdc.dialect.shapes import is_static
from sdc.mlir import ir
from sdc.transforms.base import ModulePass, walk_ops


@dataclass(frozen=True)
class VerifyPass(ModulePass):
    """Reports every invalid sdc op (not just the first), and every `sdc.dims` argument
    annotation that contradicts its argument's type. No options."""

    name = "sdc-verify"
    summary = "check every sdc op's operands, attributes and shape rule, reporting all errors"

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        for op in walk_ops(module, "sdc."):
            message = verify_op(op)
            if message:
                diag.error(op, f"'{op.name}' op {message}")
        for fn in walk_ops(module, "func.func"):
            _check_arg_dims(fn, diag)


def _check_arg_dims(fn: ir.Operation, diag: DiagnosticSink) -> None:
    if "arg_attrs" not in fn.attributes or not fn.regions[0].blocks:
        return
    arg_attrs = ir.ArrayAttr(fn.attributes["arg_attrs"])
    args = fn.regions[0].blocks[0].arguments
    for i, (arg, attrs) in enumerate(zip(args, arg_attrs)):
        attrs = ir.DictAttr(attrs)
        if "sdc.dims" not in attrs:
            continue
        try:
            dims = read_dims(attrs["sdc.dims"])
        except AttrError as e:
            diag.error(fn, f"argument #{i} 'sdc.dims' {e}")
            continue
        if not isinstance(arg.type, ir.RankedTensorType):
            diag.error(fn, f"argument #{i} 'sdc.dims' annotates {arg.type}, which is not a ranked tensor")
            continue
        spec = tensor_spec(arg.type)
        if len(dims) != spec.rank:
            diag.error(fn, f"argument #{i} 'sdc.dims' has {len(dims)} dims, the type has rank {spec.rank}")
            continue
        shards = shard_counts(fn, attrs, spec.rank)
        for d, (named, actual) in enumerate(zip(dims, spec.shape)):
            if isinstance(named, int) and shards[d] > 1:
                named //= shards[d]  # a partitioned program's argument is the local block of the input
            if isinstance(named, int) and is_static(actual) and named != actual:
                diag.error(fn, f"argument #{i} 'sdc.dims' dim {d} is {named}, the type says {actual}")
