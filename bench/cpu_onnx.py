"""sdc's CPU path against onnxruntime on the light ONNX model zoo, in one run.

    python bench/cpu_onnx.py [--runs 20] [--models resnet50,vgg19] [--threads N]

Each (engine, model) pair runs in its own subprocess so peak memory is its own: the model
is loaded/compiled, run twice to warm up, then timed `--runs` times. Reports the median
latency, sdc/onnxruntime ratio, and the peak resident memory added by loading and running
the model (ru_maxrss after minus resident memory before loading). Both engines use the same
number of threads. The last lines are a short table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
          "squeezenet", "vgg19", "zfnet512"]

CHILD = r"""
import json, os, resource, statistics, sys, time
engine, path, runs, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
import numpy as np, onnx, torch
torch.set_num_threads(threads)
from onnx.backend.test.runner import Runner
model = onnx.load(path)
inits = {i.name for i in model.graph.initializer}
feeds = {x.name: Runner.generate_dummy_data(x, seed=0, random=True) for x in model.graph.input if x.name not in inits}

def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

import onnxruntime as ort
import sdc, sdc.runtime
base = rss_kb()
t0 = time.perf_counter()
if engine == "onnxruntime":
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    run = lambda: sess.run(None, feeds)
else:
    exe = sdc.compile(path)
    run = lambda: exe(**feeds)
prepare = time.perf_counter() - t0
for _ in range(2):
    run()
times = []
for _ in range(runs):
    t = time.perf_counter()
    run()
    times.append(time.perf_counter() - t)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"median_ms": 1e3 * statistics.median(times), "prepare_s": prepare,
                  "peak_mb": (peak - base) / 1024}))
"""


def measure(engine: str, path: Path, runs: int, threads: int) -> dict:
    # Idle OpenMP threads that spin-wait steal the cores from the other engine and from other work on a
    # shared machine (the 2-thread ratios swung 0.9x-40x with the load): passive, unless set already.
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    proc = subprocess.run([sys.executable, "-c", CHILD, engine, str(path), str(runs), str(threads)],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    import onnx

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    rows = []
    for name in args.models.split(","):
        path = light / f"light_{name}.onnx"
        ort_r = measure("onnxruntime", path, args.runs, args.threads)
        sdc_r = measure("sdc", path, args.runs, args.threads)
        rows.append((name, ort_r, sdc_r))
        print(f"{name}: onnxruntime {ort_r} sdc {sdc_r}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({n: {"onnxruntime": o, "sdc": s} for n, o, s in rows}, indent=1))
    print()
    print(f"CPU, {args.threads} threads, median of {args.runs} runs")
    print(f"| model | onnxruntime ms | sdc ms | sdc/ort | ort peak MB | sdc peak MB |")
    print(f"|---|---|---|---|---|---|")
    for name, o, s in rows:
        if "error" in o or "error" in s:
            print(f"| {name} | {o.get('median_ms', o.get('error'))} | {s.get('median_ms', s.get('error'))} | - | - | - |")
            continue
        print(f"| {name} | {o['median_ms']:.1f} | {s['median_ms']:.1f} | {s['median_ms'] / o['median_ms']:.2f}x "
              f"| {o['peak_mb']:.0f} | {s['peak_mb']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
