"""`sdc compile --explain sharding`: what partitioning decided, from the final IR.

Lists the mesh, what the defaults chose (`sdc.sharding_notes`), how the inputs and outputs are
split, and every collective sdc-spmd-partition inserted, in program order: its kind and mesh axes,
the op that needed it (with its source location), the tensor it moves, the bytes each device sends
per run (ring algorithms; a formula when dims are symbolic), and why. Weights split when the plan is
built (all_slice of a parameter or constant) are counted, not listed: they cost nothing at run time.
"""

from __future__ import annotations

from sdc.dialect.ir import ARG_ATTRS, RES_ATTRS, attr_dicts, entry_function, op_location
from sdc.dialect.hooks import OpKind
from sdc.dialect.opdef import OPS, weight_ops
from sdc.mlir import ir
from sdc.transforms.base import walk_ops
from sdc.fmt import format_bytes

WEIGHTS_SHOWN = 8


def collectives(module) -> list[dict]:
    """Every inserted collective of the module, in program order, as plain data."""
    op = module.operation if hasattr(module, "operation") else module
    out = []
    for c in walk_ops(op, "sdc."):
        if c.name[4:] not in OPS or OPS[c.name[4:]].kind != OpKind.COLLECTIVE or "sdc.reason" not in c.attributes:
            continue
        out.append({
            "op": c.name[4:],
            "axes": [ir.StringAttr(a).value for a in ir.ArrayAttr(c.attributes["mesh_axes"])],
            "where": op_location(c),
            "reason": ir.StringAttr(c.attributes["sdc.reason"]).value,
            "bytes": ir.StringAttr(c.attributes["sdc.bytes"]).value if "sdc.bytes" in c.attributes else "?",
            "tensor": ir.StringAttr(c.attributes["sdc.tensor"]).value if "sdc.tensor" in c.attributes else "",
            "weight": c.name == "sdc.all_slice" and _from_weight(c),
            "dim": ir.IntegerAttr(c.attributes["axis"]).value if "axis" in c.attributes else None,
        })
    return out


def _from_weight(op) -> bool:
    """An all_slice of a weight (through all_slices and slices of it): done when the plan is built."""
    cur = op
    while cur is not None and cur.name in ("sdc.all_slice", "sdc.slice"):
        src = cur.operands[0].owner
        cur = src.operation if hasattr(src, "operation") else src
        if not hasattr(cur, "name"):
            return False
    return cur is not None and hasattr(cur, "name") and cur.name in weight_ops()


def format_sharding_report(module, manifest: dict) -> str:
    op = module.operation if hasattr(module, "operation") else module
    mesh = manifest.get("mesh") or {}
    lines = []
    if not mesh:
        return "sharding: no device mesh (compile with --mesh dp=2,tp=2 to partition the program)\n"
    world = manifest.get("world_size", 1)
    lines.append(f"sharding (mesh {','.join(f'{a}={n}' for a, n in mesh.items())}: {world} devices)")
    notes = _notes(op)
    if notes:
        lines.append("  decided by the defaults:")
        lines += [f"    {n}" for n in notes]
    lines += _io(op, manifest)
    found = collectives(op)
    runtime = [c for c in found if not c["weight"]]
    weights = [c for c in found if c["weight"]]
    moving = [c for c in runtime if c["bytes"] != "0"]
    lines.append(f"  collectives per run: {len(moving)} that move data" +
                 (f", {len(runtime) - len(moving)} local slices" if len(runtime) > len(moving) else "") +
                 (f"; bytes sent per device per run: {_total(moving)}" if moving else ""))
    for i, c in enumerate(runtime, 1):
        lines.append(f"  {i}. {c['op']} over {','.join(c['axes'])}" + (f"  at {c['where']}" if c["where"] else ""))
        lines.append(f"     tensor: {c['tensor']}")
        lines.append(f"     bytes per step: {_bytes(c['bytes'])}")
        lines.append(f"     why: {c['reason']}")
    if weights:
        lines.append(f"  weights split when the plan is built (no communication): {len(weights)}")
        for c in weights[:WEIGHTS_SHOWN]:
            lines.append(f"    {c['tensor'].split(',')[0]}: dim {c['dim']} split over {','.join(c['axes'])}")
        if len(weights) > WEIGHTS_SHOWN:
            lines.append(f"    ... and {len(weights) - WEIGHTS_SHOWN} more")
    return "\n".join(lines) + "\n"


def _bytes(text: str) -> str:
    return format_bytes(int(text)) if text.isdigit() else f"{text} B"


def _total(items: list[dict]) -> str:
    static = sum(int(c["bytes"]) for c in items if c["bytes"].isdigit())
    symbolic: dict[str, int] = {}
    for c in items:
        if not c["bytes"].isdigit():
            symbolic[c["bytes"]] = symbolic.get(c["bytes"], 0) + 1
    parts = [format_bytes(static)] if static or not symbolic else []
    parts += [f"{n}*{s} B" if n > 1 else f"{s} B" for s, n in symbolic.items()]
    return " + ".join(parts)


def _notes(fn_parent) -> list[str]:
    out = []
    for fn in walk_ops(fn_parent, "func.func"):
        if "sdc.sharding_notes" in fn.attributes:
            out += [ir.StringAttr(a).value for a in ir.ArrayAttr(fn.attributes["sdc.sharding_notes"])]
    return out


def _io(op, manifest: dict) -> list[str]:
    from sdc.transforms.sharding_ir import SHARDING, read_sharding_attr

    fn = entry_function(op)
    lines = []
    for key, kind, entries in ((ARG_ATTRS, "input", manifest["entry"]["inputs"]),
                               (RES_ATTRS, "output", manifest["entry"]["outputs"])):
        dicts = attr_dicts(fn, key)
        items = []
        for entry, d in zip(entries, dicts):
            s = read_sharding_attr(d[SHARDING]) if SHARDING in d else None
            items.append(f"{entry['name']} {s if s is not None else '(whole)'}")
        if items:
            lines.append(f"  {kind}s: " + ", ".join(items))
    return lines
