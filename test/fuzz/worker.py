"""One fuzzing worker process: reads case numbers (JSON lines) on stdin, runs each case in
process, answers one JSON line per case on its original stdout.

Its own stdout and stderr go to a log file (MLIR and torch print at the C level, and nothing may
corrupt the protocol). After the imports it caps its address space (RLIMIT_AS) at what it uses
plus the allocation limit, and sets SDC_MAX_ALLOC to that limit, so sdc's own checks refuse a
declared allocation first and, should one be missed, the allocation fails here with MemoryError
(a crash) instead of taking the machine.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any

HEADROOM = 1 << 30  # address space for the worker's own growth (caches, MLIR contexts), beyond the limit


def outcome_of(exc: BaseException | None) -> dict[str, Any]:
    """How a case ended: "ok", "clean" (an SdcError or a clean CLI exit) or "crash"."""
    from sdc.diagnostics import SdcError

    from test.fuzz.families import CliExit

    if exc is None:
        return {"status": "ok"}
    if isinstance(exc, SdcError):
        return {"status": "clean", "message": str(exc)[:300]}
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    kind = "memory" if isinstance(exc, MemoryError) else "exit" if isinstance(exc, CliExit) else "exception"
    return {"status": "crash", "kind": kind, "type": type(exc).__name__, "message": str(exc)[:2000],
            "traceback": tb[-20000:], "signature": signature(exc)}


def signature(exc: BaseException) -> str:
    """Type and innermost frame inside sdc (or the innermost frame at all): the crash's identity."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/sdc/" in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
    return f"{type(exc).__name__} at {where}"


def run_case(family: str, seed: int, index: int, scratch: Path) -> dict[str, Any]:
    """Generate case `index` of `seed` into `scratch` and run it."""
    from test.fuzz.families import FAMILIES

    if scratch.exists():
        shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    rng = random.Random(f"{family}:{seed}:{index}")
    try:
        case = FAMILIES[family](rng, scratch)
    except Exception as e:  # the generator itself broke: a fuzzer bug, reported as such
        result = outcome_of(e)
        result["status"] = "generator-error"
        return result
    (scratch / "case.txt").write_text(f"{family}:{seed}:{index}\n{case.description}\n", encoding="utf-8",
                                      errors="backslashreplace")
    try:
        case.run()
    except BaseException as e:  # noqa: BLE001: judging every way a case can end is the point
        if isinstance(e, KeyboardInterrupt):
            raise
        result = outcome_of(e)
    else:
        result = outcome_of(None)
    result["description"] = case.description[:500]
    return result


def limit_memory(max_alloc: int) -> None:
    os.environ["SDC_MAX_ALLOC"] = str(max_alloc)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    cap = used + max_alloc + HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def main() -> int:
    max_alloc, scratch = int(sys.argv[1]), Path(sys.argv[2])
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    log = os.open(scratch.parent / f"{scratch.name}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    import sdc.cli.main  # noqa: F401  (the imports happen before the memory cap)
    import sdc.cli.opt  # noqa: F401
    import sdc.frontend.onnx  # noqa: F401
    import sdc.runtime  # noqa: F401
    import torch  # noqa: F401

    import test.fuzz.families as families

    families.pristine_artifact()
    limit_memory(max_alloc)
    protocol.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        job = json.loads(line)
        result = run_case(job["family"], job["seed"], job["index"], scratch)
        result.update(job)
        protocol.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
