"""Time per plan step: an optional hook of the executor, a table of kernel groups, a Chrome trace.

    from sdc.runtime.profile import Profiler
    exe.profiler = Profiler()      # every later call records each launch and collective step
    exe(x); exe(x)
    print(format_profile(exe.profiler.summary()))
    exe.profiler.write_chrome_trace("trace.json")   # open in https://ui.perfetto.dev or chrome://tracing

Why it lives in the runtime and not in a command: a step is the unit the planner chose (one kernel
group, one collective), and only the executor knows where one ends and the next begins. When no
profiler is set the executor runs its ordinary loop, untouched: profiling costs nothing when off.
When one is set, the executor reads the clock before and after each launch or collective step (on
CUDA it synchronizes the device around each step, so a step's time is its own, not the time of what
was queued before it). Steps that only manage memory or events (alloc, free, record, wait) are not
timed. Imports no torch and no MLIR: the records are plain numbers.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class StepInfo:
    """What the profile says about one plan step: its id, what runs it, and the ops it runs."""

    id: str
    kind: str  # "launch" or "collective"
    backend: str  # "reference", "triton", or "collective"
    ops: tuple[str, ...]  # the group's op names, in order
    loc: str  # the location of its first op ("" when the plan has none)
    stream: int = 0
    kernel: str = ""  # the kernel the plan chose for it (plan.json `kernel.runs`; "" for a collective)

    @property
    def label(self) -> str:
        """`k3 conv+add+relu`: the step id and its ops, for the table and the trace."""
        return f"{self.id} {'+'.join(self.ops)}" if self.ops else self.id


@dataclass(frozen=True)
class StepTotal:
    """One row of the profile: a step's time summed over the recorded runs."""

    step: StepInfo
    calls: int
    total_s: float
    share: float  # of the time of all recorded steps, 0..1


@dataclass
class Profiler:
    """Records (step, start, end) for each timed step of each run; times are `time.perf_counter_ns()`.

    `rank` becomes the trace's process id, so the traces of a distributed run's ranks can be merged.
    """

    rank: int = 0
    records: list[tuple[StepInfo, int, int, int]] = field(default_factory=list)  # (step, start, end, run)
    runs: int = 0

    def start_run(self) -> None:
        """Called by the executor at the start of each call."""
        self.runs += 1

    def record(self, step: StepInfo, start_ns: int, end_ns: int) -> None:
        self.records.append((step, start_ns, end_ns, self.runs - 1))

    def clear(self) -> None:
        self.records.clear()
        self.runs = 0

    def summary(self) -> list[StepTotal]:
        """One row per step, slowest first (ties in plan order)."""
        totals: dict[str, list] = {}
        order: list[str] = []
        for step, start, end, _ in self.records:
            if step.id not in totals:
                totals[step.id] = [step, 0, 0]
                order.append(step.id)
            row = totals[step.id]
            row[1] += 1
            row[2] += end - start
        everything = sum(row[2] for row in totals.values()) or 1
        rows = [StepTotal(step, calls, ns / 1e9, ns / everything) for step, calls, ns in totals.values()]
        position = {sid: i for i, sid in enumerate(order)}
        return sorted(rows, key=lambda r: (-r.total_s, position[r.step.id]))

    def chrome_trace(self) -> dict:
        """The records in the Chrome trace event format (what Perfetto and chrome://tracing load):
        one complete ("X") event per step per run, microseconds from the first record."""
        origin = min((start for _, start, _, _ in self.records), default=0)
        events: list[dict] = [
            {"name": "process_name", "ph": "M", "pid": self.rank, "tid": 0, "args": {"name": f"sdc rank {self.rank}"}},
        ]
        for stream in sorted({step.stream for step, *_ in self.records}):
            events.append({"name": "thread_name", "ph": "M", "pid": self.rank, "tid": stream,
                           "args": {"name": f"stream {stream}"}})
        for step, start, end, run in self.records:
            events.append({
                "name": step.label, "cat": step.kind, "ph": "X", "ts": (start - origin) / 1e3,
                "dur": max(end - start, 1) / 1e3, "pid": self.rank, "tid": step.stream,
                "args": {"step": step.id, "backend": step.backend, "kernel": step.kernel, "ops": list(step.ops),
                         "loc": step.loc, "run": run},
            })
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def write_chrome_trace(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.chrome_trace()), encoding="utf-8")
        return path


def format_profile(rows: list[StepTotal], runs: int, limit: int | None = None) -> str:
    """The profile as a text table: per step its mean time per run and its share, slowest first."""
    runs = max(runs, 1)
    shown = rows if limit is None else rows[:limit]
    width = max((len(r.step.id) for r in shown), default=4)
    lines = [f"{'step':<{width}}  {'backend':<10}  {'ms/run':>9}  {'share':>6}  ops  (location of the first op)"]
    for r in shown:
        where = f"  ({r.step.loc})" if r.step.loc else ""
        lines.append(f"{r.step.id:<{width}}  {r.step.backend:<10}  {1e3 * r.total_s / runs:>9.3f}  "
                     f"{100 * r.share:>5.1f}%  {'+'.join(r.step.ops) or '-'}{where}")
    if len(shown) < len(rows):
        rest = rows[len(shown):]
        lines.append(f"... and {len(rest)} more steps, {100 * math.fsum(r.share for r in rest):.1f}% of the time")
    return "\n".join(lines) + "\n"
