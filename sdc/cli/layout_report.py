"""What layouts and fusion did to a compiled model, read from its plan (no MLIR).

`sdc compile --explain layout` and `sdc inspect` print it: the layout casts left in the program and
why each is needed (the reason the layout pass recorded), the number of kernel groups, and the
estimated bytes moved through memory with one kernel per op (before fusion) and with the plan's
kernel groups (after). Every kernel reads each value it takes from another kernel, an input or a
weight, and writes each value a later kernel or the caller uses; values inside a group stay out of
memory. A dim not known at compile time (a symbol or "?") counts as DYNAMIC_DIM, as in the passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sdc import dtypes
from sdc.fmt import format_bytes
from sdc.runtime.format import LAUNCH, launch_ops
from sdc.transforms.layout_model import DYNAMIC_DIM


@dataclass
class CastNote:
    kernel: str
    loc: str
    layout: list
    value: str  # "f32[1, 3, 224, 224]"
    reason: str


@dataclass
class LayoutReport:
    target: str
    ops: int = 0
    kernels: int = 0
    fused: int = 0  # kernel groups of two or more ops
    bytes_before: int = 0
    bytes_after: int = 0
    casts: list[CastNote] = field(default_factory=list)


def value_bytes(value: dict) -> int:
    n = 1
    for d in value.get("shape", []):
        n *= d if isinstance(d, int) else DYNAMIC_DIM
    return n * dtypes.itemsize(value["dtype"]) if dtypes.is_known(str(value.get("dtype"))) else 0


def layout_report(plan: dict) -> LayoutReport:
    """The report over every rank of a plan (plan.json as a JSON value)."""
    report = LayoutReport(plan.get("target", "?"))
    for rank in plan.get("ranks", []):
        _add_rank(report, rank)
    return report


def _add_rank(report: LayoutReport, rank: dict) -> None:
    values = rank.get("values", {})
    size = {vid: value_bytes(v) for vid, v in values.items()}
    steps = [s for s in rank.get("steps", []) if s.get("kind") == LAUNCH]
    used_after: dict[str, int] = {}  # value -> index of the last op reading it
    ops = [(i, op) for i, s in enumerate(steps) for op in launch_ops(s, unmerged=True)]
    for n, (_, op) in enumerate(ops):
        for vid in op.get("inputs", []):
            used_after[vid] = n
    returned = set(rank.get("outputs", []))
    report.ops += len(ops)
    report.kernels += len(steps)
    report.fused += sum(1 for s in steps if len(launch_ops(s, unmerged=True)) > 1)
    for n, (_, op) in enumerate(ops):  # one kernel per op
        report.bytes_before += sum(size.get(v, 0) for v in set(op.get("inputs", [])))
        report.bytes_before += sum(size.get(v, 0) for v in set(op.get("outputs", []))
                                   if v in returned or used_after.get(v, -1) > n)
    last_step = {}
    for i, op in ops:
        for vid in op.get("inputs", []):
            last_step[vid] = i
    for i, step in enumerate(steps):
        made = {v for op in launch_ops(step, unmerged=True) for v in op.get("outputs", [])}
        reads = {v for op in launch_ops(step, unmerged=True) for v in op.get("inputs", []) if v not in made}
        writes = {v for v in made if v in returned or last_step.get(v, -1) > i}
        report.bytes_after += sum(size.get(v, 0) for v in reads | writes)
        for op in launch_ops(step):
            if op.get("op") == "layout_cast":
                vid = (op.get("inputs") or ["?"])[0]
                v = values.get(vid, {})
                report.casts.append(CastNote(step.get("id", "?"), op.get("loc", ""),
                                             op.get("attrs", {}).get("layout", []),
                                             f"{v.get('dtype', '?')}{v.get('shape', [])}",
                                             op.get("reason", "")))


def format_layout_report(report: LayoutReport, indent: str = "  ") -> str:
    lines = [f"{indent}layout casts: {len(report.casts)}"]
    for c in report.casts:
        where = f" ({c.loc})" if c.loc else ""
        lines.append(f"{indent}  {c.kernel}{where}: {c.value} -> {c.layout}")
        if c.reason:
            lines.append(f"{indent}    why: {c.reason}")
    single = report.kernels - report.fused
    lines.append(f"{indent}kernel groups: {report.kernels} for {report.ops} ops "
                 f"({report.fused} fused, {single} single op{'s' if single != 1 else ''})")
    share = f" ({100 * report.bytes_after / report.bytes_before:.0f}%)" if report.bytes_before else ""
    lines.append(f"{indent}memory traffic (estimated): {format_bytes(report.bytes_before)} before fusion, "
                 f"{format_bytes(report.bytes_after)} after{share}")
    return "\n".join(lines) + "\n"
