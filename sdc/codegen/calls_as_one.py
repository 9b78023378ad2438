"""Which consecutive steps of a CPU plan the runtime calls as one: planned here, recorded in plan.json.

The CPU runtime makes two kinds of run one instruction (docs/runtime.md): a *C segment*
(sdc/runtime/c_segment.py), consecutive generated C kernels with the view ops, splits, concats and
weight-determined ops between them, called through one `sdc_run_kernels`; and a *C run*
(sdc/runtime/c_runs.py), consecutive ops of sdc's C kernel library (convolutions, pooling, ...)
replayed as one `sdc_run_calls`. `plan_calls_as_one` finds them from the plan's steps and the kernel
choices (`kernel.runs`) as those modules find them in the executor's instructions, and returns the
rank's `calls_as_one`: `[{"kind": "c_segment" | "c_run", "steps": [step ids]}]`, so plan.json says
which calls run as one; `sdc inspect` prints them. The executor finds its runs by the same rules
(test_kernel_choice.py checks that they are these).
"""

from __future__ import annotations

from dataclasses import dataclass

from sdc.dialect.opdef import OPS
from sdc.runtime.format import C, C_CONV, FREE, LAUNCH, RECORD, REFERENCE, WAIT

C_SEGMENT = "c_segment"
C_RUN = "c_run"

# what sdc/runtime/c_segment.py and c_runs.py take (their VIEW_OPS and RUN_OPS, and the ops whose C
# kernel joins a C run: a squeeze-excite scaling, a channel concat, a channel shuffle)
SEGMENT_VIEW_OPS = ("reshape", "unsqueeze", "squeeze", "transpose", "broadcast", "slice")
RUN_OPS = ("conv", "global_avg_pool", "max_pool", "avg_pool", "lrn", "resize")
RUN_MEMBER_OPS = ("mul", "concat", "gather")


@dataclass
class _Item:
    """One instruction the executor makes of the plan: an op of a reference group, a C launch, a free."""

    kind: str  # "op", "c", "free", or "other" (anything that ends a run)
    step: str | None = None
    op: dict | None = None
    physical: bool = False  # a C launch that takes a tensor in another order than row-major
    ins: tuple[str, ...] = ()  # a C launch's inputs and outputs
    outs: tuple[str, ...] = ()


def plan_calls_as_one(steps: list[dict], values: dict[str, dict], outputs: list[str]) -> list[dict]:
    """The rank's C segments, then its C runs among the other instructions (module docstring)."""
    items = _items(steps)
    determined = _determined(items, values)
    segments = _runs(items, lambda i: _segment_member(i, determined), lambda i: i.kind == "c")
    taken = {id(i) for run in segments for i in run}
    rest = [i if id(i) not in taken else _Item("other") for i in items]
    runs = _runs(rest, _run_member, lambda i: i.kind == "op")
    out = [{"kind": C_SEGMENT, "steps": _steps(run)} for run in segments]
    out += [{"kind": C_RUN, "steps": _steps(run)} for run in runs]
    return sorted(out, key=lambda g: _position(steps, g["steps"][0]))


def _items(steps: list[dict]) -> list[_Item]:
    items = []
    for step in steps:
        kind = step["kind"]
        if kind == LAUNCH and step["kernel"]["backend"] == REFERENCE:
            items += [_Item("op", step["id"], op) for op in step["kernel"]["ops"]]
        elif kind == LAUNCH and step["kernel"]["backend"] == C:
            kernel = step["kernel"]
            physical = any(t.get("layout") is not None for t in (*kernel.get("args", []), *kernel.get("results", [])))
            items.append(_Item("c", step["id"], physical=physical, ins=tuple(step["inputs"]), outs=tuple(step["outputs"])))
        elif kind == FREE:
            items.append(_Item("free"))
        elif kind not in (RECORD, WAIT):  # (on the CPU those make no instruction)
            items.append(_Item("other", step.get("id")))
    return items


def _plain(op: dict) -> bool:
    """An op the executor runs as a plain instruction (its result type is inferred)."""
    opdef = OPS.get(op["op"])
    return opdef is not None and opdef.shape is not None and opdef.family not in ("collective", "custom")


def _determined(items: list[_Item], values: dict[str, dict]) -> set[str]:
    """The values the weights (and the symbols) alone decide, as c_segment._determined finds them."""
    known = {vid for vid, v in values.items() if "weight" in v}
    for i in items:
        if i.kind == "op" and _plain(i.op) and known.issuperset(i.op["inputs"]) and OPS[i.op["op"]].pure:
            known.update(i.op["outputs"])
        elif i.kind == "c" and known.issuperset(i.ins):
            known.update(i.outs)
    return known


def _segment_member(i: _Item, determined: set[str]) -> bool:
    if i.kind == "free":
        return True
    if i.kind == "c":
        return not i.physical
    if i.kind != "op" or not _plain(i.op):
        return False
    op, ins, outs = i.op["op"], i.op["inputs"], i.op["outputs"]
    return ((op in SEGMENT_VIEW_OPS and len(ins) == 1 and len(outs) == 1) or (op == "split" and len(ins) == 1)
            or (op == "concat" and len(outs) == 1) or (bool(outs) and determined.issuperset(outs)))


def _run_member(i: _Item) -> bool:
    if i.kind == "free":
        return True
    if i.kind != "op" or not _plain(i.op) or len(i.op["outputs"]) != 1 or not i.op["inputs"]:
        return False
    return i.op["op"] in RUN_OPS or (i.op["op"] in RUN_MEMBER_OPS and i.op.get("runs") == C_CONV)


def _runs(items: list[_Item], member, counted, least: int = 2) -> list[list[_Item]]:
    """The maximal runs of consecutive members holding at least `least` counted ones."""
    out, run = [], []
    for i in [*items, _Item("other")]:
        if member(i):
            run.append(i)
            continue
        if sum(1 for m in run if counted(m)) >= least:
            out.append(run)
        run = []
    return out


def _steps(run: list[_Item]) -> list[str]:
    return list(dict.fromkeys(i.step for i in run if i.step is not None))


def _position(steps: list[dict], sid: str) -> int:
    return next(n for n, s in enumerate(steps) if s.get("id") == sid)
