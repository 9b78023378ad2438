"""Structure ops: `sdc.fusion` (a kernel group) and its terminator `sdc.yield`.

These are not `OpDef` table entries: they have a region and no reference function of their own
(the interpreter and the CPU executor run the ops inside). They are defined here, next to the
generated op classes, and loaded with the dialect.

    %r = "sdc.fusion"() ({
      %0 = "sdc.conv"(%x, %w) {...} : (tensor<1x64x56x56xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x56x56xf32>
      %1 = "sdc.add"(%0, %b) : (tensor<1x64x56x56xf32>, tensor<64x1x1xf32>) -> tensor<1x64x56x56xf32>
      %2 = "sdc.relu"(%1) : (tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>
      "sdc.yield"(%2) : (tensor<1x64x56x56xf32>) -> ()
    }) {kind = "convolution"} : () -> tensor<1x64x56x56xf32>

A fusion op has no operands: its body reads values defined above it directly (the region is not
isolated from above), and its results are the values its `sdc.yield` names, in order. Its `kind`
(a string) says what the group is built around: `elementwise`, `reduction`, `contraction`,
`convolution`, `pooling` or `layout`. IRDL gives every member of a variadic group one type, so
all results of one fusion op share a type (the fusion pass only forms groups where they do).
"""

# No `from __future__ import annotations`: dialects.ext reads the field annotations as live objects.

from typing import Any, Sequence

from sdc.dialect.attrs import Sdc
from sdc.mlir import ext, ir

FUSION = "sdc.fusion"
YIELD = "sdc.yield"
FUSION_KINDS = ("elementwise", "reduction", "contraction", "convolution", "pooling", "layout", "attention")
STRUCTURE_OPS = (FUSION, YIELD)


def verify_structure(op) -> str | None:
    """Check an `sdc.fusion` or `sdc.yield`; returns the error message (without the op-name prefix) or None."""
    op = op.operation if hasattr(op, "operation") else op
    if op.name == FUSION:
        return _verify_fusion(op)
    if op.name == YIELD:
        return _verify_yield(op)
    return "is not an sdc structure op"


def _verify_fusion(op) -> str | None:
    if len(op.operands):
        return f"takes no operands (its body reads values from above), found {len(op.operands)}"
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        return "must have one region with one block"
    block = op.regions[0].blocks[0]
    if len(block.arguments):
        return f"body block takes no arguments, found {len(block.arguments)}"
    ops = [o.operation for o in block.operations]
    if not ops or ops[-1].name != YIELD:
        return f"body must end with '{YIELD}'"
    for inner in ops[:-1]:
        if inner.name == FUSION:
            return "cannot hold another 'sdc.fusion'"
        if not inner.name.startswith("sdc."):
            return f"body holds only sdc ops, found '{inner.name}'"
    yielded = list(ops[-1].operands)
    results = list(op.results)
    if len(yielded) != len(results):
        return f"has {len(results)} results but its body yields {len(yielded)} values"
    for i, (v, r) in enumerate(zip(yielded, results)):
        if v.type != r.type:
            return f"result #{i} has type {r.type} but the body yields {v.type}"
    if "kind" in op.attributes:
        kind = op.attributes["kind"]
        if not isinstance(kind, ir.StringAttr) or kind.value not in FUSION_KINDS:
            return f"kind must be one of {', '.join(FUSION_KINDS)}, found {kind}"
    return None


def _verify_yield(op) -> str | None:
    parent = op.parent if op.attached else None
    parent = parent.operation if parent is not None and hasattr(parent, "operation") else parent
    if parent is None or parent.name != FUSION:
        return f"must be the terminator of an '{FUSION}' body"
    return None


def report(op, check) -> bool:
    """Run `check(op)` (a message or None) as an op verifier: emit the message at the op's location.

    Shared by every Python-defined sdc op class (see sdc.dialect.op_classes.SdcOpBase)."""
    try:
        message = check(op)
    except Exception as e:  # a verifier bug must not take the process down
        message = f"verifier failed: {type(e).__name__}: {e}"
    if message:
        op.location.emit_error(f"'{op.operation.name}' op {message}")
        return False
    return True


class _StructureOp(Sdc.Operation):
    def verify_invariants(self) -> bool:
        return report(self, verify_structure)


class FusionOp(_StructureOp, name="fusion"):
    """A kernel group: the ops of its body run as one kernel; results are what its `sdc.yield` names."""

    outs: Sequence[ext.Result[Any]]
    body: ext.Region


class YieldOp(_StructureOp, name="yield", traits=[ir.IsTerminatorTrait]):
    """The terminator of an `sdc.fusion` body: the values the group gives to the ops after it."""

    values: Sequence[ext.Operand[Any]]
