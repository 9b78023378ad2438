"""What actually ran, per launch step: the planned kernel, or the fallback the plan allowed, counted.

plan.json names the kernel of every launch (`kernel.runs`) and what it may fall back to at run time
(`kernel.fallback`: a C kernel over its size limit, a call of another layout than sdc's C kernel
library takes; sdc/runtime/kernel_choice.py). The executor counts its calls, and each kernel that
falls back reports it where it does so (`Counters.fell_back`, off the path of the calls that do not),
so the ordinary call pays one integer increment. A step whose kernel this host cannot run at all (no
C compiler, `SDC_C_KERNELS=0` at load) is prepared with its fallback: `loaded` says so, and every
call counts there.

`Counters.ran()` gives, per step, each kernel and how many of the op calls ran there;
`sdc run --profile` prints it (`format_counters`), `--output-dir` also writes it as runs.json,
which `sdc inspect ARTIFACT --runs FILE` reads back beside the plan. Imports no torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

RUNS_FILE = "runs.json"
FORMAT = "sdc-runs"


@dataclass
class StepCount:
    """One launch step: what the plan chose, what load prepared per op, and the calls that fell back."""

    step: str
    planned: str
    fallback: str | None
    loaded: str  # `planned`, or the kernel load prepared instead (the host cannot run the planned one)
    ops: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()  # the kernel load prepared for each op (a generated kernel: one for all)
    fallbacks: dict[tuple[str, str], int] = field(default_factory=dict)  # (prepared, ran instead) -> op calls


class Counters:
    """The counters of one loaded executable (module docstring)."""

    def __init__(self) -> None:
        self.calls = 0
        self.steps: dict[str, StepCount] = {}

    def add_step(self, step: str, planned: str, fallback: str | None, loaded: str, ops: tuple[str, ...],
                 kernels: tuple[str, ...]) -> None:
        self.steps[step] = StepCount(step, planned, fallback, loaded, ops, kernels or (loaded,))

    def fell_back(self, step: str, prepared: str, kernel: str) -> None:
        """One op call of `step` prepared with `prepared` ran `kernel` instead."""
        counts = self.steps[step].fallbacks
        counts[prepared, kernel] = counts.get((prepared, kernel), 0) + 1

    def hook(self, step: str, prepared: str) -> Callable[[str], None]:
        """`fell_back` for one op of a step, as its kernel's fallback path calls it."""
        fell_back = self.fell_back

        def note(kernel: str) -> None:
            fell_back(step, prepared, kernel)

        return note

    def clear(self) -> None:
        self.calls = 0
        for s in self.steps.values():
            s.fallbacks.clear()

    def ran(self) -> dict[str, dict[str, int]]:
        """Per step, each kernel that ran its op calls and how many (a generated kernel: one per call)."""
        out: dict[str, dict[str, int]] = {}
        for sid, s in self.steps.items():
            counts: dict[str, int] = {}
            for kernel in s.kernels:
                counts[kernel] = counts.get(kernel, 0) + self.calls
            for (prepared, kernel), n in s.fallbacks.items():
                if prepared not in s.kernels:  # (loaded as its fallback: those calls are counted there)
                    continue
                counts[prepared] = counts.get(prepared, 0) - n
                counts[kernel] = counts.get(kernel, 0) + n
            out[sid] = {k: n for k, n in counts.items() if n > 0}
        return out

    def fallback_calls(self, step: str) -> int:
        """The op calls of `step` that ran the fallback of a kernel load prepared."""
        s = self.steps[step]
        return sum(n for (prepared, _), n in s.fallbacks.items() if prepared in s.kernels)

    def to_json(self) -> dict[str, Any]:
        ran = self.ran()
        return {"format": FORMAT, "calls": self.calls,
                "steps": {sid: {"planned": s.planned, "fallback": s.fallback, "loaded": s.loaded, "ops": list(s.ops),
                                "ran": ran[sid], "fallbacks": self.fallback_calls(sid)}
                          for sid, s in self.steps.items()}}

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), indent=1), encoding="utf-8")
        return path


def kernel_totals(runs: dict[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    """(steps per planned kernel, op calls per kernel that ran) of a runs.json object."""
    planned: dict[str, int] = {}
    ran: dict[str, int] = {}
    for s in runs["steps"].values():
        planned[s["planned"]] = planned.get(s["planned"], 0) + 1
        for kernel, n in s["ran"].items():
            ran[kernel] = ran.get(kernel, 0) + n
    return planned, ran


def format_counters(runs: dict[str, Any]) -> str:
    """The counters as text: the planned kernels' step counts, the calls each kernel ran, then every
    step that did not run as planned (a fallback at run time, or at load)."""
    planned, ran = kernel_totals(runs)
    calls = runs["calls"]
    lines = [f"kernels planned: {_counts(planned)} (steps)",
             f"kernels ran: {_counts(ran)} (op calls over {calls} call{'s' if calls != 1 else ''})"]
    off = [(sid, s) for sid, s in runs["steps"].items() if s["fallbacks"] or s["loaded"] != s["planned"]]
    for sid, s in off:
        where = (f"loaded as {s['loaded']}" if s["loaded"] != s["planned"]
                 else f"{s['fallbacks']} op call{'s' if s['fallbacks'] != 1 else ''} fell back")
        lines.append(f"  {sid} {'+'.join(s['ops'])}: planned {s['planned']} ({where}), ran "
                     + ", ".join(f"{k} {n}" for k, n in sorted(s["ran"].items())))
    if not off:
        lines.append("  every step ran its planned kernel")
    return "\n".join(lines) + "\n"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"


def read_runs(path: str | Path) -> dict[str, Any]:
    """A runs.json that `sdc run` wrote; ValueError where it is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read the run counters '{path}': {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("steps"), dict):
        raise ValueError(f"'{path}' is not a run counters file ({RUNS_FILE} from sdc run --profile --output-dir)")
    return data
