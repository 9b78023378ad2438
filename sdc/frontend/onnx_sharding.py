"""Sharding annotations in ONNX models, imported as `sdc.shard` ops.

Two sources:

- `sdc::Shard` nodes (domain `sdc`), which `sdc.shard(tensor, ...)` leaves in a model exported with
  `torch.onnx.export(..., dynamo=False)`: one input, one output, string-list attributes `dims` (per
  dim: "" for whole, "dp", or "dp,tp") and `partial`. They name mesh axes and import with or
  without a mesh.
- ONNX's multi-device annotations: a node's `device_configurations` hold `ShardingSpecProto`s for
  its inputs and outputs (`sharded_dim`: a tensor dim and its number of shards). ONNX counts shards,
  the mesh names axes, so they are read only when compiling for a mesh: a dim split n ways goes to
  the mesh axis of size n (`dp` for dim 0 and `tp` for the others when both fit, else the first
  free axis of that size, else consecutive axes whose sizes multiply to n). A spec no mesh axis
  fits is an error naming the node.
"""

from __future__ import annotations

from typing import Any

import onnx

from sdc.diagnostics import SdcError

SDC_DOMAIN = "sdc"
SHARD_OP = "Shard"


def is_shard_node(node: onnx.NodeProto) -> bool:
    return node.domain == SDC_DOMAIN and node.op_type == SHARD_OP


def shard_node_sharding(node: onnx.NodeProto, label: str) -> tuple[list[list[str]], list[str]]:
    attrs = {a.name: a for a in node.attribute}
    if "dims" not in attrs:
        raise SdcError(f"node '{label}' (sdc.Shard) has no 'dims' attribute")
    dims = [[a for a in s.decode().split(",") if a] for s in attrs["dims"].strings]
    partial = [s.decode() for s in attrs["partial"].strings] if "partial" in attrs else []
    if len(node.input) != 1 or len(node.output) != 1:
        raise SdcError(f"node '{label}' (sdc.Shard) must have one input and one output")
    return dims, partial


def import_shard_node(builder, node: onnx.NodeProto, inputs: list, label: str) -> list:
    dims, partial = shard_node_sharding(node, label)
    v = inputs[0]
    if len(dims) != v.rank:
        raise SdcError(f"node '{label}' (sdc.Shard) gives {len(dims)} dims for a tensor of rank {v.rank}")
    return builder.emit_all("shard", [v], {"sharding": [dims, partial]}, fold=False)


def node_specs(node: onnx.NodeProto) -> dict[str, Any]:
    """The node's sharding specs, by tensor name."""
    out = {}
    for config in getattr(node, "device_configurations", []):
        for spec in config.sharding_spec:
            out[spec.tensor_name] = spec
    return out


def spec_sharding(spec, rank: int, mesh: dict[str, int], label: str) -> tuple[list[list[str]], list[str]]:
    """An ONNX ShardingSpecProto as per-dim mesh axes."""
    dims: list[list[str]] = [[] for _ in range(rank)]
    used: set[str] = set()
    for sharded in spec.sharded_dim:
        axis = sharded.axis + rank if sharded.axis < 0 else sharded.axis
        if not 0 <= axis < rank:
            raise SdcError(f"node '{label}': the sharding of '{spec.tensor_name}' names dim {sharded.axis} of a "
                           f"rank-{rank} tensor")
        if len(sharded.simple_sharding) != 1:
            raise SdcError(f"node '{label}': the sharding of '{spec.tensor_name}' dim {axis} has "
                           f"{len(sharded.simple_sharding)} parts; sdc reads one (an even split)")
        n = sharded.simple_sharding[0].num_shards
        if n <= 1:
            continue
        axes = _axes_for(n, axis, mesh, used)
        if axes is None:
            have = ", ".join(f"{a}={s}" for a, s in mesh.items())
            raise SdcError(f"node '{label}': '{spec.tensor_name}' dim {axis} is split {n} ways, and no free axis of "
                           f"the mesh ({have}) has that size")
        dims[axis] = axes
        used.update(axes)
    return dims, []


def _axes_for(n: int, dim: int, mesh: dict[str, int], used: set[str]) -> list[str] | None:
    free = [a for a in mesh if a not in used]
    preferred = ["dp"] if dim == 0 else ["tp"]
    for a in preferred + free:
        if a in free and mesh[a] == n:
            return [a]
    for i in range(len(free)):
        product = 1
        for j in range(i, len(free)):
            product *= mesh[free[j]]
            if product == n:
                return free[i:j + 1]
            if product > n:
                break
    return None


def annotate(builder, v, spec, mesh: dict[str, int] | None, label: str):
    """`v` behind an `sdc.shard` carrying the ONNX spec (unchanged without a mesh)."""
    if spec is None or not mesh:
        return v
    dims, partial = spec_sharding(spec, v.rank, mesh, label)
    if not any(dims):
        return v
    return builder.emit_all("shard", [v], {"sharding": [dims, partial]}, fold=False)[0]
