"""Sharding annotations in the IR.

`sdc.shard` pins the sharding of a value: its result is the operand, laid out across the device mesh
as its `sharding` says. It is what `sdc.shard(tensor, ...)` in the Python API and ONNX sharding
annotations become. `sdc-sharding-propagation` takes it as a user annotation (it beats every
default); `sdc-spmd-partition` replaces it by the collectives that move the operand into that
sharding (none when it already is). Without a mesh it is the identity.
"""

from __future__ import annotations

from sdc.dialect.hooks import OpKind, ShardingRule
from sdc.dialect.opdef import OpDef, attr, register


def _shard_rule(ctx, ins, attrs):
    dims, partial = attrs["sharding"]
    x = ins[0]
    if len(dims) != x.rank:
        ctx.fail(f"sharding {_text(dims, partial)} has {len(dims)} dims, the operand has rank {x.rank}")
    used = [a for d in dims for a in d] + list(partial)
    repeated = sorted({a for a in used if used.count(a) > 1})
    if repeated:
        ctx.fail(f"sharding {_text(dims, partial)} uses mesh axis '{repeated[0]}' more than once")
    return [x]


def _text(dims, partial) -> str:
    text = "[" + ", ".join(",".join(d) if d else "-" for d in dims) + "]"
    return text + (f" partial({','.join(partial)})" if partial else "")


register(OpDef(
    name="shard", kind=OpKind.SHARDING,
    sharding=ShardingRule("identity"),
    summary="pin a value's sharding across the device mesh",
    doc=("The identity on values; its result is split over the mesh as `sharding` says (per dim the mesh axes "
         "that split it, then the axes over which it is a partial sum). A user annotation: sharding "
         "propagation keeps it and spreads it, and partitioning turns it into the collectives it needs."),
    operands=("operand",), attrs={"sharding": attr("sharding", doc="the result's sharding")},
    shape=_shard_rule, ref=lambda env, a, x: x,
    example=('%1 = "sdc.shard"(%0) {sharding = #sdc.sharding<[["dp"], []], []>} '
             ": (tensor<8x768xf32>) -> tensor<8x768xf32>"),
))
