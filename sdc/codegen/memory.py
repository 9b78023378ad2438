"""The memory plan: one arena per rank, and an offset in it for every intermediate a step makes.

Why: a call of a compiled program should not ask an allocator for memory once per value. The
planner knows, at compile time, when each value is made and when it is last read, so values whose
lifetimes do not overlap can share bytes of one buffer (the *arena*), which the runtime allocates
once per executable. On CUDA that also gives every kernel a fixed address, which a captured CUDA
graph needs (sdc/runtime/cuda_graphs.py).

What is planned (`plan_rank_memory`): the values that cross steps, i.e. the outputs of launch and
collective steps that a later step reads. Temporaries inside one reference kernel group are the
group's own business (torch allocates them; a generated kernel keeps them in registers). Not planned:
inputs, weights and rank outputs (an output is handed to the caller, who keeps it past the next
call), and values whose size is not known at compile time. A value with symbolic dims is planned at
its *upper bound* when the guards bound every symbol it uses (`--input-shape B=1..64` gives
`B <= 64`) and its dims grow with their symbols (`+`, `*`, `//` by a constant): at run time it then
takes a prefix of its slot. A value with an unbounded symbol, or a dim expression that can shrink as
a symbol grows, is left to the allocator.

Time is the step index of the launch or collective that makes or reads a value: a value is live from
the step that makes it through the last step that reads it (both ends included, so a kernel never
writes over its own operands). A value that is left to the allocator may be a view of a planned one
(a reshape that returns a view of its operand); every planned value it may hold stays live as long
as it does, so its memory is not given away under it. A value that an output may view is not planned
at all (`rank_buffers`): every output is memory of its own, made fresh by the call, which the
producing kernel writes directly and the runtime hands out without a copy. A collective's operands
stay live to the end of the call: a collective may still read them after its step (on its own
stream, or on another rank's thread in the simulator), and the plan does not say when it is done.

A concat that its producers write in place (`write_concats_in_place`, on targets with generated
kernels) is an `alloc` of the joined value and a `view` step per operand: the joined value is made at
its `alloc` (before the first producer), each slice is a view of it that takes no bytes of its own
and keeps it live as long as the slice is read.

The placement is *greedy by size* (the strategy of TFLite's arena planner): buffers sorted by size,
largest first, each placed at the lowest aligned offset where it overlaps no buffer already placed
whose lifetime overlaps its own. Its peak is at least the largest number of bytes live at one time
(`max_live_bytes`, a lower bound every placement obeys) and at most the sum of the sizes.

Everything here works on plain data (the plan's JSON dicts), so it is unit-tested without MLIR.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from sdc.dialect import symexpr
from sdc.fmt import format_bytes

# Lifetimes and placement are shared with sdc-recompute (sdc/transforms/lifetimes.py); re-exported
# here, where the planner and the tests look for the memory plan's names.
from sdc.transforms.lifetimes import (ALIGNMENT, ALLOC, COLLECTIVE, LAUNCH, VIEW, Buffer,  # noqa: F401
                                      Placement, _step_reads, aligned, check_placement, max_bytes,
                                      max_live_bytes, place, rank_buffers, symbol_bounds)


# ---------------------------------------------------------------- concats written in place

CUSTOM_TEMPLATE = "custom"  # a user's Triton kernel indexes flat (sdc/codegen/triton/custom.py): no strided views


def _strided_kernel(step: Mapping) -> bool:
    """A generated kernel other than a user's: it takes every tensor's strides, so it reads and
    writes a slice view of a larger buffer as it is."""
    kernel = step.get("kernel", {})
    return step["kind"] == LAUNCH and kernel.get("backend") == "triton" and kernel.get("template") != CUSTOM_TEMPLATE


def _lone_concat(step: Mapping) -> Mapping | None:
    """The concat op of a launch that is one concat and nothing else, or None."""
    ops = step.get("kernel", {}).get("ops", []) if step["kind"] == LAUNCH else []
    if len(ops) != 1 or ops[0].get("op") != "concat" or len(step.get("outputs", [])) != 1:
        return None
    return ops[0]


def write_concats_in_place(values: Mapping[str, dict], outputs: Sequence[str], steps: Sequence[dict],
                           inputs: Sequence[str] = (), dims: Mapping[str, Sequence] | None = None) -> list[dict]:
    """The steps with each concat whose operands its producers can write in place turned into one
    buffer: an `alloc` of the concat's result before the first producer runs, a `view` step per
    operand binding it to its slice (`narrow(axis, offset, size)`), and no concat launch.

    Why: a concat is a pass over every byte it joins; a generated kernel takes its result's strides,
    so it can write its part of the joined tensor where the concat would have copied it. An operand
    qualifies when a generated kernel makes it in row-major order (no `layout`), or it is itself a
    concat written this way (a chain of concats, DenseNet's growing block, is one buffer); when it is
    no rank output and every other step that reads it is a generated kernel that runs before the
    concat (so its view never outlives the buffer's free); and when its size along the axis is known
    (the offsets are numbers). A concat of the same value twice, or of an input or a weight, or any
    operand a reference kernel reads, keeps its copy.

    The buffer is allocated per call at the call's sizes, so its dims must be numbers or expressions
    over the symbols the inputs bind: a `"?"` dim of a joined value is named from `dims` (each
    value's symbolic dims, sdc-shape-constraints' `sdc.result_dims`), and those names are written
    into `values` for the values it joins."""
    returned = set(outputs)
    bound = {s for vid in inputs for d in values[vid]["shape"] if isinstance(d, str) and d != "?"
             for s in symexpr.free_symbols(d)}

    def named(vid: str) -> list | None:
        """The value's dims with each "?" named from `dims` (None where one stays unknown)."""
        shape = list(values[vid]["shape"])
        known = list((dims or {}).get(vid) or [])
        for j, d in enumerate(shape):
            name = known[j] if j < len(known) else None
            if d != "?":
                continue
            if isinstance(name, int) or (isinstance(name, str) and _binds(name, bound)):
                shape[j] = name
            else:
                return None
        return shape

    shapes: dict[str, list] = {}
    readers: dict[str, list[int]] = {}
    for i, step in enumerate(steps):
        for vid in _step_reads(step):
            readers.setdefault(vid, []).append(i)
    written: dict[str, int] = {}  # a generated kernel's row-major result -> its step
    for i, step in enumerate(steps):
        if _strided_kernel(step):
            for r in step["kernel"].get("results", []):
                if not r.get("layout"):
                    written[r["value"]] = i
    parent: dict[str, tuple[str, int, int]] = {}  # operand -> (its concat, axis, offset)
    first: dict[str, int] = {}  # a concat written in place -> the step of its first producer
    dropped: set[int] = set()
    for i, step in enumerate(steps):
        concat = _lone_concat(step)
        if concat is None:
            continue
        joined = step["outputs"][0]
        ins = list(concat["inputs"])
        shape = named(joined)
        axis = concat.get("attrs", {}).get("axis")
        if len(ins) != 2 or ins[0] == ins[1] or not isinstance(axis, int) or shape is None or "weight" in values[joined]:
            continue
        axis %= len(shape)

        def qualifies(vid: str) -> bool:
            if vid in returned or (vid not in written and vid not in first):
                return False
            own = named(vid)
            if own is None or not isinstance(own[axis], int) or any(
                    d != e for j, (d, e) in enumerate(zip(own, shape)) if j != axis):
                return False
            return all(t == i or (t < i and _strided_kernel(steps[t])) for t in readers.get(vid, []))

        if not all(qualifies(v) for v in ins):
            continue
        shapes[joined] = shape
        offset = 0
        for vid in ins:
            shapes[vid] = named(vid)
            parent[vid] = (joined, axis, offset)
            offset += shapes[vid][axis]
        first[joined] = min(first.get(v, written.get(v, i)) for v in ins)
        dropped.add(i)
    if not dropped:
        return list(steps)
    for vid, shape in shapes.items():
        values[vid]["shape"] = shape
    children: dict[str, list[str]] = {}
    for vid, (joined, _, _) in parent.items():
        children.setdefault(joined, []).append(vid)
    inserted: dict[int, list[dict]] = {}
    for root in (c for c in first if c not in parent):
        made = [{"kind": ALLOC, "value": root}]
        pending = [root]
        while pending:  # each buffer before its slices: a chain's inner concat is a view of the outer one
            base = pending.pop(0)
            for vid in sorted(children.get(base, []), key=lambda v: parent[v][2]):
                _, axis, offset = parent[vid]
                made.append({"kind": VIEW, "value": vid, "of": base, "axis": axis, "offset": offset})
                pending.append(vid)
        inserted.setdefault(first[root], []).extend(made)
    out: list[dict] = []
    for i, step in enumerate(steps):
        out.extend(inserted.get(i, []))
        if i not in dropped:
            out.append(step)
    return out


def _binds(dim: str, bound: set[str]) -> bool:
    """Whether a symbolic dim evaluates from the symbols the inputs bind."""
    try:
        return set(symexpr.free_symbols(dim)) <= bound
    except symexpr.SymExprError:
        return False


def in_place_concats(steps: Iterable[Mapping]) -> list[str]:
    """The concats of a rank's steps that their producers write in place (the bases of `view` steps)."""
    return list(dict.fromkeys(step["of"] for step in steps if step.get("kind") == VIEW))


def plan_rank_memory(values: Mapping[str, Mapping], outputs: Sequence[str], steps: Sequence[dict],
                     conditions: Iterable[str] = (), alignment: int = ALIGNMENT,
                     direct_only: bool = False) -> dict | None:
    """The rank's `arena` (plan.json; None when nothing is planned). The steps stay as they are:
    a placed value takes its bytes when the step that makes it runs (docs/artifact.md).

    `direct_only` (targets with generated kernels): only generated kernels' results go in the arena,
    since they write there directly; a reference kernel's torch result would have to be copied in,
    which costs a pass over its bytes, so on such targets those stay with torch's allocator (on CUDA
    its caching allocator, or the private pool of a captured graph). On the reference (cpu) target
    every planned value is in the arena; the runtime uses it there only when asked (docs/runtime.md)."""
    bounds = symbol_bounds(conditions)
    buffers = rank_buffers(values, outputs, steps, bounds, direct_only)
    if not buffers:
        return None
    placement = place(buffers, alignment)
    arena = {"bytes": placement.size, "alignment": alignment,
             "offsets": {b.name: placement.offsets[b.name] for b in buffers},
             "max_live_bytes": max_live_bytes(buffers, alignment),
             "unshared_bytes": sum(aligned(b.size, alignment) for b in buffers)}
    symbols = sorted({s for b in buffers for d in values[b.name]["shape"] if isinstance(d, str)
                      for s in symexpr.free_symbols(d)})
    if symbols:
        arena["bounds"] = {s: bounds[s] for s in symbols}
    return arena


def arena_summary(arena: Mapping | None) -> str:
    """One line for `sdc inspect`: the arena's size, against the lower bound and against no reuse.

    `arena` is a plan's `arena` whose size, offsets and bounds the artifact reader has checked; the
    two report-only sizes are shown only when they are sizes."""
    if not arena:
        return "none (no intermediate crosses a step with a size known at compile time)"
    size = arena["bytes"]
    live, unshared = arena.get("max_live_bytes"), arena.get("unshared_bytes")
    parts = [f"{format_bytes(size)} for {len(arena['offsets'])} values"]
    if isinstance(live, int) and not isinstance(live, bool) and live > 0:
        parts.append(f"max live {format_bytes(live)} ({size / live:.2f}x)")
    if isinstance(unshared, int) and not isinstance(unshared, bool) and unshared > 0:
        parts.append(f"without reuse {format_bytes(unshared)}")
    if arena.get("bounds"):
        parts.append("at " + ", ".join(f"{k}={v}" for k, v in arena["bounds"].items()))
    return ", ".join(parts)
