"""Planning a partitioned program (sdc-spmd-partition's output) for every rank of its mesh.

Every rank runs the same steps; what differs is its weights. `sdc.all_slice` of a weight (a
parameter or constant, or an all_slice of one) is done here, once per rank: the rank's block
becomes a weight of that rank's file, and the whole weight is dropped from it when nothing else
reads it. A block keeps its weight's name when it is the only block of that weight the rank
holds, else `NAME[DIM:BLOCK/COUNT]`.

The manifest describes the global program: its inputs and outputs are the whole tensors, with
static dims multiplied back and symbolic ones keeping their global names; each rank's values are
local (a split symbolic dim `B` reads `B//2`). The plan records the mesh coordinates of each rank
and how each input and output is split (`shardings`), which the runtime uses to cut the inputs
and assemble the outputs.
"""

from __future__ import annotations

from typing import Any

from sdc.diagnostics import SdcError
from sdc.dialect.mesh import Mesh, Sharding, local_dim, to_json
from sdc.mlir import ir

SHARDING = "sdc.sharding"


def fold_all_slice(builder, op, attrs: dict, layout: list[int] | None) -> bool:
    """Slice a weight for the builder's rank; False when the operand is not a weight."""
    mesh: Mesh | None = getattr(builder, "mesh", None)
    vid = builder.ids.get(op.operands[0])
    value = builder.plan.values.get(vid) if vid is not None else None
    if mesh is None or value is None or "weight" not in value or value["weight"] not in builder.plan.weights:
        return False
    tensor = builder.plan.weights[value["weight"]]
    if value.get("layout"):
        inverse = [0] * len(value["layout"])
        for i, p in enumerate(value["layout"]):
            inverse[p] = i
        tensor = tensor.permute(inverse)
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


def fold_weight_op(builder, op, opdef, attrs: dict, layout: list[int] | None) -> bool:
    """Compute now an op whose operands are all weights (an `sdc.all_slice` for this rank, or an
    `sdc.slice`): its result is a weight of the rank. False when an operand is not a weight."""
    if opdef.name == "all_slice":
        return fold_all_slice(builder, op, attrs, layout)
    mesh: Mesh | None = getattr(builder, "mesh", None)
    if mesh is None or not op.operands:
        return False
    tensors, names = [], []
    for operand in op.operands:
        vid = builder.ids.get(operand)
        value = builder.plan.values.get(vid) if vid is not None else None
        if value is None or "weight" not in value or value["weight"] not in builder.plan.weights:
            return False
        t = builder.plan.weights[value["weight"]]
        if value.get("layout"):
            inverse = [0] * len(value["layout"])
            for i, p in enumerate(value["layout"]):
                inverse[p] = i
            t = t.permute(inverse)
        tensors.append(t)
        names.append(value["weight"])
    from sdc.dialect.opdef import RefEnv

    out = opdef.ref(RefEnv(mesh=mesh.as_dict()), attrs, *tensors)
    if layout:
        out = out.permute(layout)
    window = ",".join(f"{a}:{s}:{e}" for a, s, e in zip(attrs.get("axes") or [], attrs.get("starts", []),
                                                        attrs.get("ends", [])))
    name = f"{names[0]}[{window or opdef.name}]"
    builder.plan.weights[name] = out.contiguous()
    builder._new_value(op.results[0], weight=name, **({"layout": layout} if layout else {}))
    return True


def prune_weights(plan) -> None:
    """Drop weight values nothing reads (the whole weights that were sliced), then their tensors, and
    give each remaining block its weight's name where that is unambiguous."""
    read = set(plan.outputs)
    attr_weights: set[str] = set()
    for step in plan.steps:
        for entry in step.get("ops", []):
            read.update(entry.get("inputs", []))
            _collect_weights(entry.get("attrs", {}), attr_weights)
    for vid in [vid for vid, v in plan.values.items() if "weight" in v and vid not in read]:
        del plan.values[vid]
    used = {v["weight"] for v in plan.values.values() if "weight" in v} | attr_weights
    for name in [n for n in plan.weights if n not in used]:
        del plan.weights[name]
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


def _collect_weights(value: Any, out: set[str]) -> None:
    if isinstance(value, dict):
        if set(value) == {"weight"} and isinstance(value["weight"], str):
            out.add(value["weight"])
        for v in value.values():
            _collect_weights(v, out)
    elif isinstance(value, list):
        for v in value:
            _collect_weights(v, out)


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

