"""The campaign runner: hands numbered cases to worker processes, enforces the time limit per
case, restarts workers that hang or die, and writes a reproducer directory for every crash.

    python -m test.fuzz --cases 5000 --seed 1 --time-limit 10 --max-alloc 1G --jobs 1
    python -m test.fuzz --replay onnx-struct:1:1234     # one case, in process, traceback shown

A crash is any exception other than SdcError (and the CLIs' clean exits 0/1/2), a traceback or
"internal error" on a CLI's output, a case over its time limit (a hang), a MemoryError under the
address-space cap, or a worker killed by a signal. The summary (text, or JSON with --json) counts
cases per family and outcome and lists the distinct crashes by signature.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from test.fuzz.seeds import ROOT

FAMILY_NAMES = ("onnx-bytes", "onnx-struct", "ir-text", "artifact", "run-inputs")
_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
DEFAULT_MAX_ALLOC = "2G"


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = _SUFFIX.get(text[-1:], 1)
    return int(float(text[:-1] if scale != 1 else text) * scale)


@dataclass
class Summary:
    cases: int = 0
    seconds: float = 0.0
    by_family: dict[str, dict[str, int]] = field(default_factory=dict)
    crashes: list[dict[str, Any]] = field(default_factory=list)

    def add(self, result: dict[str, Any]) -> None:
        self.cases += 1
        counts = self.by_family.setdefault(result["family"], {})
        counts[result["status"]] = counts.get(result["status"], 0) + 1
        if result["status"] in ("crash", "generator-error"):
            self.crashes.append(result)

    def distinct(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for c in self.crashes:
            out.setdefault(c.get("signature", c.get("kind", "?")), []).append(c)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"cases": self.cases, "seconds": round(self.seconds, 1), "by_family": self.by_family,
                "crashes": len(self.crashes),
                "hangs": sum(c.get("kind") == "hang" for c in self.crashes),
                "distinct": {sig: {"count": len(cs), "first": f"{cs[0]['family']}:{cs[0]['seed']}:{cs[0]['index']}",
                                   "message": cs[0].get("message", "")[:300]}
                             for sig, cs in self.distinct().items()}}

    def text(self) -> str:
        lines = [f"{self.cases} cases in {self.seconds:.0f} s, {len(self.crashes)} crashes "
                 f"({len(self.distinct())} distinct)"]
        for family, counts in sorted(self.by_family.items()):
            lines.append(f"  {family:12} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        for sig, cs in self.distinct().items():
            c = cs[0]
            lines.append(f"  CRASH x{len(cs)} {sig}: {c['family']}:{c['seed']}:{c['index']}: "
                         f"{c.get('message', '')[:200]}")
        return "\n".join(lines)


class Worker:
    """A worker process (test/fuzz/worker.py) and the case it is running."""

    def __init__(self, number: int, max_alloc: int, scratch_root: Path):
        self.scratch = scratch_root / f"w{number}"
        env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE", MKL_NUM_THREADS="1",
                   PYTHONHASHSEED="0", SDC_DEBUG="")
        env.pop("SDC_DEBUG")
        self.proc = subprocess.Popen([sys.executable, "-m", "test.fuzz.worker", str(max_alloc), str(self.scratch)],
                                     cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.job: dict[str, Any] | None = None
        self.started = 0.0
        self.ready = False

    def send(self, job: dict[str, Any]) -> None:
        self.job, self.started = job, time.monotonic()
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def log_tail(self) -> str:
        try:
            return (self.scratch.parent / f"{self.scratch.name}.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""


def jobs_for(seed: int, cases: int, families: tuple[str, ...], start: int = 0):
    for index in range(start, start + cases):
        yield {"family": families[index % len(families)], "seed": seed, "index": index}


def campaign(cases: int, seed: int, time_limit: float, max_alloc: int, jobs: int = 1,
             families: tuple[str, ...] = FAMILY_NAMES, out: Path | None = None, start: int = 0,
             deadline: float | None = None, progress: bool = False, startup_limit: float = 120.0) -> Summary:
    """Run cases start..start+cases-1 of `seed` (or until `deadline`, in seconds) and summarize."""
    summary = Summary()
    t0 = time.monotonic()
    scratch_root = Path(tempfile.mkdtemp(prefix="sdc-fuzz-"))
    pending = jobs_for(seed, cases, families, start)
    workers: list[Worker] = []
    selector = selectors.DefaultSelector()

    def spawn(n: int) -> Worker:
        w = Worker(n, max_alloc, scratch_root)
        w.started = time.monotonic()
        selector.register(w.proc.stdout, selectors.EVENT_READ, w)
        return w

    def feed(w: Worker) -> bool:
        if deadline is not None and time.monotonic() - t0 > deadline:
            return False
        job = next(pending, None)
        if job is None:
            return False
        w.send(job)
        return True

    def finish(w: Worker, result: dict[str, Any]) -> None:
        summary.add(result)
        if result["status"] in ("crash", "generator-error") and out is not None:
            write_reproducer(out, w.scratch, result)
        w.job = None
        if progress and summary.cases % 500 == 0:
            print(f"[{time.monotonic() - t0:7.0f} s] {summary.cases} cases, {len(summary.crashes)} crashes",
                  file=sys.stderr, flush=True)

    def replace(w: Worker) -> Worker:
        selector.unregister(w.proc.stdout)
        w.kill()
        fresh = spawn(workers.index(w))
        workers[workers.index(w)] = fresh
        return fresh

    try:
        for n in range(jobs):
            workers.append(spawn(n))
        active = len(workers)
        while active:
            now = time.monotonic()
            waits = [(w.started + (time_limit if w.ready else startup_limit)) - now for w in workers
                     if w.job is not None or not w.ready]
            events = selector.select(timeout=max(0.05, min(waits)) if waits else 0.5)
            for key, _ in events:
                w: Worker = key.data
                line = w.proc.stdout.readline()
                if not line:  # the worker died
                    job = w.job
                    code = w.proc.wait()
                    if job is None and not w.ready:
                        raise RuntimeError(f"a fuzz worker failed to start (exit {code}):\n{w.log_tail()}")
                    if job is not None:
                        finish(w, dict(job, status="crash", kind="signal" if code < 0 else "exit",
                                       type=f"worker exit {code}", signature=f"worker died ({code})",
                                       message=w.log_tail()[-1500:]))
                    fresh = replace(w)
                    continue
                msg = json.loads(line)
                if msg.get("ready"):
                    w.ready = True
                else:
                    finish(w, msg)
                if w.job is None and not feed(w):
                    selector.unregister(w.proc.stdout)
                    w.kill()
                    active -= 1
            now = time.monotonic()
            for w in list(workers):
                if w.job is not None and now - w.started > time_limit:
                    job = w.job
                    finish(w, dict(job, status="crash", kind="hang", type="hang", signature="hang",
                                   message=f"over the time limit of {time_limit} s"))
                    fresh = replace(w)
                elif not w.ready and w.job is None and now - w.started > startup_limit:
                    raise RuntimeError(f"a fuzz worker did not start within {startup_limit} s:\n{w.log_tail()}")
            # a replaced worker gets its next case once it reports ready (above)
    finally:
        for w in workers:
            w.kill()
        shutil.rmtree(scratch_root, ignore_errors=True)
    summary.seconds = time.monotonic() - t0
    return summary


def write_reproducer(out: Path, scratch: Path, result: dict[str, Any]) -> Path:
    """`out/<family>-<seed>-<index>/`: the case's input files and crash.json (with the replay command)."""
    target = out / f"{result['family']}-{result['seed']}-{result['index']}"
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if scratch.exists():
        shutil.copytree(scratch, target / "input", symlinks=True)
    result = dict(result, replay=f"python -m test.fuzz --replay {result['family']}:{result['seed']}:{result['index']}")
    (target / "crash.json").write_text(json.dumps(result, indent=1))
    return target


def replay(spec: str, max_alloc: int) -> int:
    """Run one case in this process and print how it ended (the traceback of a crash)."""
    from test.fuzz import worker

    family, seed, index = spec.split(":")
    os.environ["SDC_MAX_ALLOC"] = str(max_alloc)
    scratch = Path(tempfile.mkdtemp(prefix="sdc-fuzz-replay-")) / "case"
    result = worker.run_case(family, int(seed), int(index), scratch)
    print(f"{spec}: {result['status']}: {result.get('description', '')}")
    print(result.get("traceback") or result.get("message", ""))
    print(f"(input files in {scratch})")
    return 1 if result["status"] == "crash" else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m test.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start", type=int, default=0, help="first case index")
    p.add_argument("--time-limit", type=float, default=20.0, help="seconds per case (longer is a hang)")
    p.add_argument("--max-alloc", default=DEFAULT_MAX_ALLOC, help="bytes one allocation may take (K/M/G suffixes)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--families", default=",".join(FAMILY_NAMES))
    p.add_argument("--out", default="fuzz-crashes", help="directory for crash reproducers")
    p.add_argument("--deadline", type=float, default=None, help="stop handing out cases after this many seconds")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--replay", metavar="FAMILY:SEED:INDEX")
    args = p.parse_args(argv)
    max_alloc = parse_size(args.max_alloc)
    if args.replay:
        return replay(args.replay, max_alloc)
    families = tuple(f for f in args.families.split(",") if f)
    unknown = [f for f in families if f not in FAMILY_NAMES]
    if unknown:
        p.error(f"unknown family {unknown[0]} (families: {', '.join(FAMILY_NAMES)})")
    summary = campaign(args.cases, args.seed, args.time_limit, max_alloc, args.jobs, families, Path(args.out),
                       args.start, args.deadline, args.progress)
    print(json.dumps(summary.to_json(), indent=1) if args.json else summary.text())
    return 1 if summary.crashes else 0


if __name__ == "__main__":
    random.seed(0)
    sys.exit(main())
