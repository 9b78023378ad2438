"""Planning a partitioned program (sdc-spmd-partition's output) for every rank of its mesh.

Every rank runs the same steps; what differs is its weights. `sdc.all_slice` of a weight (a
parameter or constant, or anything the planner computed from weights alone) is done here, once per
rank: the rank's block becomes a weight of that rank's file, and the whole weight is dropped from it
when nothing else reads it. A block keeps its weight's name when it is the only block of that weight the rank
holds, else `NAME[DIM:BLOCK/COUNT]`.

The manifest describes the global program: its inputs and outputs are the whole tensors, with
static dims multiplied back and symbolic ones keeping their global names; each rank's values are
local (a split symbolic dim `B` reads `B//2`). The plan records the mesh coordinates of each rank
and how each input and output is split (`shardings`), which the runtime uses to cut the inputs
and assemble the outputs.
"""

from __future__ import annotations

from sdc.diagnostics import SdcError
from sdc.dialect.mesh import Mesh, Sharding, local_dim, to_json
from sdc.mlir import ir

SHARDING = "sdc.sharding"


def fold_all_slice(builder, op, attrs: dict, layout: list[int] | None) -> bool:
    """Slice a weight for the builder's rank; False when the operand is not a weight."""
    mesh: Mesh | None = builder.mesh
    vid = builder.ids.get(op.operands[0])
    tensor = builder.weight_tensor(vid)
    if mesh is None or tensor is None:
        return False
    value = builder.plan.values[vid]
    axes, axis = list(attrs["mesh_axes"]), attrs["axis"] % tensor.dim()
    n = mesh.size(axes)
    if tensor.shape[axis] % n:
        raise SdcError(f"weight '{value['weight']}' dim {axis} (= {tensor.shape[axis]}) cannot be split "
                       f"{n} ways over mesh axes {', '.join(axes)}")
    index = mesh.index_in_group(builder.plan.rank, axes)
    block = tensor.shape[axis] // n
    piece = tensor.narrow(axis, index * block, block)
    if layout:
        piece = piece.permute(layout)
    name = f"{value['weight']}[{axis}:{index}/{n}]"
    builder.plan.weights[name] = piece.contiguous()
    builder._new_value(op.results[0], weight=name, **({"layout": layout} if layout else {}))
    return True


def name_blocks(plan) -> None:
    """Give each weight block its weight's name where that is unambiguous: a rank holding one block
    of `w` (and not `w` itself, which prune_weights dropped when nothing reads it) calls it `w`."""
    blocks: dict[str, list[str]] = {}
    for name in plan.weights:
        if name.endswith("]") and "[" in name:
            blocks.setdefault(name[:name.rindex("[")], []).append(name)
    renames = {names[0]: base for base, names in blocks.items() if len(names) == 1 and base not in plan.weights}
    for old, new in renames.items():
        plan.weights[new] = plan.weights.pop(old)
    for v in plan.values.values():
        if v.get("weight") in renames:
            v["weight"] = renames[v["weight"]]


def io_shardings(fn, key: str, count: int) -> list[Sharding] | None:
    """The `sdc.sharding` of each entry argument (`arg_attrs`) or result (`res_attrs`)."""
    from sdc.transforms.sharding_ir import read_sharding_attr

    if key not in fn.attributes:
        return None
    out = []
    for attrs in ir.ArrayAttr(fn.attributes[key]):
        attrs = ir.DictAttr(attrs)
        out.append(read_sharding_attr(attrs[SHARDING]) if SHARDING in attrs else None)
    out += [None] * (count - len(out))
    return out if any(s is not None for s in out) else None


def globalize(entries: list[dict], shardings: list[Sharding | None] | None, mesh: Mesh) -> None:
    """Manifest entries from local shapes: split static dims times their shard count."""
    for entry, s in zip(entries, shardings or []):
        if s is None:
            continue
        entry["shape"] = [d * mesh.size(s.dims[i]) if isinstance(d, int) and i < s.rank else d
                          for i, d in enumerate(entry["shape"])]


def localize_inputs(plan, shardings: list[Sharding | None] | None, mesh: Mesh) -> None:
    """Input values name their local size: a split symbolic dim `B` becomes `B//2`."""
    for vid, s in zip(plan.inputs, shardings or []):
        if s is None:
            continue
        value = plan.values[vid]
        value["shape"] = [local_dim(d, mesh.size(s.dims[i])) if isinstance(d, str) and d != "?" else d
                          for i, d in enumerate(value["shape"])]


def sharding_table(fn, n_in: int, n_out: int) -> dict:
    ins = io_shardings(fn, "arg_attrs", n_in) or [None] * n_in
    outs = io_shardings(fn, "res_attrs", n_out) or [None] * n_out
    return {"inputs": [to_json(s) if s is not None else None for s in ins],
            "outputs": [to_json(s) if s is not None else None for s in outs]}

