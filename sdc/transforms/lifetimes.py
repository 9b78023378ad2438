"""Value lifetimes over a rank's plan steps, and their placement in one arena (plain data, no MLIR).

The memory plan (sdc/codegen/memory.py, whose docstring gives the rules) and sdc-recompute
(recompute.py, which prices an op order by the arena the planner would give it) share these, so the
two can never disagree about what is live when: `rank_buffers` reads the steps (plan.json v2 dicts)
into `Buffer`s, `place` packs them greedily by size, `max_live_bytes` is the lower bound. Whether an
op's result may view an operand is the op's own fact (`OpDef.may_view`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from sdc import dtypes
from sdc.dialect import symexpr
from sdc.dialect.opdef import get_op

ALIGNMENT = 256  # bytes: what cudaMalloc gives, and enough for any vector load
ALLOC = "alloc"
VIEW = "view"
LAUNCH = "launch"
COLLECTIVE = "collective"


@dataclass(frozen=True)
class Buffer:
    """One value to place: `size` bytes live from time `start` through time `end` (inclusive)."""

    name: str
    size: int
    start: int
    end: int


@dataclass(frozen=True)
class Placement:
    """Where each buffer goes: `offsets[name]` in an arena of `size` bytes."""

    size: int
    offsets: dict[str, int]
    alignment: int


def aligned(n: int, alignment: int = ALIGNMENT) -> int:
    return -(-n // alignment) * alignment


def _overlap_in_time(a: Buffer, b: Buffer) -> bool:
    return a.start <= b.end and b.start <= a.end


def place(buffers: Sequence[Buffer], alignment: int = ALIGNMENT) -> Placement:
    """Greedy by size: the largest buffer first, each at the lowest aligned offset that is free
    for its whole lifetime."""
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"alignment must be a power of two, got {alignment}")
    order = sorted(buffers, key=lambda b: (-b.size, -(b.end - b.start), b.start, b.name))
    placed: list[tuple[Buffer, int, int]] = []  # (buffer, offset, aligned size)
    offsets: dict[str, int] = {}
    size = 0
    for buf in order:
        if buf.name in offsets:
            raise ValueError(f"buffer '{buf.name}' is listed twice")
        need = aligned(buf.size, alignment)
        busy = sorted((off, off + n) for other, off, n in placed if _overlap_in_time(buf, other))
        offset = 0
        for lo, hi in busy:
            if offset + need <= lo:
                break
            offset = max(offset, hi)
        offsets[buf.name] = offset
        placed.append((buf, offset, need))
        size = max(size, offset + need)
    return Placement(size, offsets, alignment)


def max_live_bytes(buffers: Iterable[Buffer], alignment: int = ALIGNMENT) -> int:
    """The most (aligned) bytes live at one time: no placement can use less."""
    events: dict[int, int] = {}
    for b in buffers:
        n = aligned(b.size, alignment)
        events[b.start] = events.get(b.start, 0) + n
        events[b.end + 1] = events.get(b.end + 1, 0) - n
    live = peak = 0
    for t in sorted(events):
        live += events[t]
        peak = max(peak, live)
    return peak


def check_placement(buffers: Sequence[Buffer], placement: Placement) -> None:
    """ValueError unless every buffer is aligned, inside the arena, and apart from every buffer it
    is live with (a quadratic check, for tests and small plans)."""
    spans = []
    for b in buffers:
        off = placement.offsets[b.name]
        if off % placement.alignment or off < 0 or off + b.size > placement.size:
            raise ValueError(f"buffer '{b.name}' at offset {off} ({b.size} bytes) is misaligned or outside "
                             f"the arena of {placement.size} bytes")
        spans.append((b, off, off + b.size))
    for i, (a, lo_a, hi_a) in enumerate(spans):
        for b, lo_b, hi_b in spans[i + 1:]:
            if _overlap_in_time(a, b) and lo_a < hi_b and lo_b < hi_a and a.size and b.size:
                raise ValueError(f"buffers '{a.name}' and '{b.name}' are live together and overlap in memory")


# ---------------------------------------------------------------- sizes

def symbol_bounds(conditions: Iterable[str]) -> dict[str, int]:
    """Upper bounds on symbols that the guards state (`1 <= B <= 64`, `S < 512`, `N == 8`, joined
    by `and`); a condition in any other form bounds nothing."""
    bounds: dict[str, int] = {}

    def note(name: str, hi: int) -> None:
        bounds[name] = min(hi, bounds.get(name, hi))

    def visit(node: symexpr.Node) -> None:
        if isinstance(node, symexpr.BoolOp) and node.op == "and":
            for part in node.parts:
                visit(part)
        elif isinstance(node, symexpr.Compare):
            for op, lhs, rhs in zip(node.ops, node.terms, node.terms[1:]):
                if isinstance(lhs, symexpr.Sym) and isinstance(rhs, symexpr.Int) and op in ("<=", "<", "=="):
                    note(lhs.name, rhs.value - (op == "<"))
                elif isinstance(lhs, symexpr.Int) and isinstance(rhs, symexpr.Sym) and op in (">=", ">", "=="):
                    note(rhs.name, lhs.value - (op == ">"))

    for text in conditions:
        try:
            visit(symexpr.parse_condition(text))
        except symexpr.SymExprError:
            continue
    return bounds


def _grows(node: symexpr.Node) -> bool:
    """True when the dim expression never shrinks as a symbol grows (symbols are >= 0)."""
    if isinstance(node, (symexpr.Int, symexpr.Sym)):
        return True
    if isinstance(node, symexpr.BinOp):
        if node.op in ("+", "*"):
            return _grows(node.lhs) and _grows(node.rhs)
        if node.op == "//":
            return _grows(node.lhs) and isinstance(node.rhs, symexpr.Int) and node.rhs.value > 0
    return False


def max_bytes(value: Mapping, bounds: Mapping[str, int]) -> int | None:
    """The most bytes a value of the plan can take (its dims at the symbols' upper bounds), or None
    when that is not known at compile time."""
    n = dtypes.itemsize(value["dtype"])
    for d in value["shape"]:
        if isinstance(d, int):
            n *= d
            continue
        if d == "?":
            return None
        try:
            node = symexpr.parse(d)
        except symexpr.SymExprError:
            return None
        names = symexpr.free_symbols(node)
        if not _grows(node) or any(s not in bounds for s in names):
            return None
        n *= max(symexpr.evaluate(node, {s: bounds[s] for s in names}), 0)
    return n


# ---------------------------------------------------------------- a rank's plan

def _step_reads(step: Mapping) -> list[str]:
    if step["kind"] == LAUNCH:
        return list(step["inputs"])
    return list(step.get("inputs", [])) if step["kind"] == COLLECTIVE else []


def _writes_directly(step: Mapping) -> bool:
    """True for a generated kernel: it writes its results into the buffers it is given (no copy)."""
    return step["kind"] == LAUNCH and step.get("kernel", {}).get("backend") == "triton"


def _op_may_view(entry: Mapping) -> bool:
    """Whether one op of a reference group may return (a view of) an operand's memory: ops whose
    `OpDef.may_view` says so (torch's view ops, casts that return their operand when the dtype
    already matches, layout_cast as a permuted view, a shard's slice, a user's custom op, collectives
    as the identity in a world of one), and ops marked in place. An op this process does not know
    counts as one that may."""
    if "in_place" in entry:
        return True
    try:
        opdef = get_op(entry["op"])
    except KeyError:
        return True
    return opdef.may_view


def _viewed_reads(step: Mapping) -> dict[str, list[str]] | None:
    """For each result of a step, the operands of the step it may share memory with; None when any
    result may share any operand's (a collective, a group whose ops do not name their values).
    A generated kernel's results are memory of their own; in a reference group a result follows its
    ops back: an op that cannot return a view ends the chain, so a group whose last op is a matmul
    views nothing even when a reshape feeds it."""
    if step["kind"] != LAUNCH:
        return None
    kernel = step.get("kernel", {})
    if kernel.get("backend") == "triton":
        return {}
    ops = kernel.get("ops", [])
    if not all("inputs" in e and "outputs" in e for e in ops):
        return None if any(_op_may_view(e) for e in ops) else {}
    shares: dict[str, set[str]] = {v: {v} for v in step["inputs"]}
    for entry in ops:
        if isinstance(entry.get("in_place"), int) and 0 <= entry["in_place"] < len(entry["inputs"]):
            # an in-place op writes into one operand: its result is that operand's memory, no other's
            viewed = set(shares.get(entry["inputs"][entry["in_place"]], set()))
        elif _op_may_view(entry):
            viewed = set().union(*(shares.get(v, set()) for v in entry["inputs"]))
        else:
            viewed = set()
        for v in entry["outputs"]:
            shares[v] = viewed
    return {v: sorted(shares.get(v, ())) for v in step.get("outputs", [])}


def rank_buffers(values: Mapping[str, Mapping], outputs: Sequence[str], steps: Sequence[Mapping],
                 bounds: Mapping[str, int], direct_only: bool = False) -> list[Buffer]:
    """The buffers of one rank's steps (plan.json v2 dicts): the planned values with their sizes and
    lifetimes, lifetimes stretched over the values that may view them (module docstring).
    `direct_only`: plan only the results of generated kernels (see `plan_rank_memory`).

    No output can hold arena bytes: a value that an output may view (through reshapes, in-place
    kernels, any chain of unplanned values) is not planned either, so the runtime never has to copy
    an output out of the arena. Leaving one value out can make another a possible view (its result
    may now view an operand), so this repeats until nothing more is left out; each round leaves at
    least one value out, so it ends."""
    unplanned: set[str] = set()
    while True:
        buffers, held_by_outputs = _rank_buffers(values, outputs, steps, bounds, direct_only, unplanned)
        if not held_by_outputs:
            return buffers
        unplanned |= held_by_outputs


def _rank_buffers(values: Mapping[str, Mapping], outputs: Sequence[str], steps: Sequence[Mapping],
                  bounds: Mapping[str, int], direct_only: bool, unplanned: set[str]
                  ) -> tuple[list[Buffer], set[str]]:
    """One round of `rank_buffers` with the values of `unplanned` left to the allocator: the buffers,
    and the planned values that an output may view (to leave out in the next round)."""
    returned = set(outputs)
    made: dict[str, int] = {}
    last: dict[str, int] = {}
    planned: dict[str, int] = {}  # value -> bytes
    holds: dict[str, set[str]] = {}  # an unplanned value -> the planned values it may view
    order: list[str] = []
    view_bases = {step["of"] for step in steps if step["kind"] == VIEW}
    for t, step in enumerate(steps):
        if step["kind"] == ALLOC:  # its value takes its bytes here, before the kernels that write it
            vid = step["value"]
            made[vid] = t
            order.append(vid)
            size = (None if vid in returned or vid in unplanned or "weight" in values[vid]
                    or (direct_only and vid not in view_bases) else max_bytes(values[vid], bounds))
            if size is not None:
                planned[vid] = size
            continue
        if step["kind"] == VIEW:  # a slice of its base: the base stays live as long as the view is read
            vid, base = step["value"], step["of"]
            made[vid] = t
            order.append(vid)
            viewed = {base} if base in planned else holds.get(base, set())
            if viewed:
                holds[vid] = viewed
            continue
        if step["kind"] not in (LAUNCH, COLLECTIVE):
            continue
        reads = _step_reads(step)
        for vid in reads:  # a collective's operands: live to the end of the call (module docstring)
            last[vid] = len(steps) if step["kind"] == COLLECTIVE else t
        sharing = _viewed_reads(step)
        for vid in step.get("outputs", []):
            if vid in made:  # its alloc or view step made it; this kernel writes into that memory
                continue
            made[vid] = t
            order.append(vid)
            size = (None if vid in returned or vid in unplanned or "weight" in values[vid]
                    or (direct_only and not _writes_directly(step)) else max_bytes(values[vid], bounds))
            if size is not None:
                planned[vid] = size
                continue
            viewed = set()
            for r in reads if sharing is None else sharing.get(vid, ()):
                viewed |= {r} if r in planned else holds.get(r, set())
            if viewed:
                holds[vid] = viewed
    end = {vid: last.get(vid, made[vid]) for vid in planned}
    held_by_outputs = {p for vid in returned for p in holds.get(vid, ())}
    for vid, viewed in holds.items():
        until = last.get(vid, made[vid])
        for p in viewed:
            end[p] = max(end[p], until)
    return [Buffer(vid, planned[vid], made[vid], end[vid]) for vid in order if vid in planned], held_by_outputs
