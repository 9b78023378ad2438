"""sdc on one GPU against torch eager and torch.compile, in one process: build, check, time.

    python bench/gpu.py [--out results.json] [--quick]

Each workload is written as sdc IR, compiled for `--target cuda` (Triton kernels where the codegen
has a template, reference kernels otherwise), loaded on `cuda`, checked against torch on fresh
random inputs (relative L2 error against a float64 torch result), and timed with CUDA events around
the whole call (the executable's host work included), median of the repetitions. The peers run the
same function in the same process: torch eager and torch.compile (default mode). The workloads and
sizes are those of the GPU issue's table (shared/bench/peers_gpu.py measured the peers' side on
2026-11-29); bandwidth counts each input read once and each output written once, the MLP's rate
its matmul flops.

The table is printed last; `--out` writes every number as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sdc  # noqa: E402


@dataclass
class Workload:
    name: str
    ir: str  # the entry function, sdc IR text
    make_inputs: Callable[[], list[torch.Tensor]]
    reference: Callable[..., torch.Tensor]  # the same function in torch
    amount: float  # bytes moved (each input read once, each output written once), or flops
    unit: str  # what amount / seconds / 1e12 is: "TB/s" or "TFLOP/s"
    tolerance: float  # on the relative L2 error


def _median_ms(fn: Callable[[], object], warmup: int, reps: int) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double(), want.double()
    return float(torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want).clamp_min(1e-30))


def workloads(quick: bool) -> list[Workload]:
    n = (1 << 20) if quick else 64 * (1 << 20)
    rows, cols = (1024, 4096) if quick else (32768, 4096)
    bf16 = torch.bfloat16

    def randn(*shape):
        return lambda: [torch.randn(*s, device="cuda", dtype=bf16) for s in shape]

    ew = f"""
func.func @main(%x: tensor<{n}xbf16> {{sdc.name = "x"}}, %w: tensor<{n}xbf16> {{sdc.name = "w"}},
                %b: tensor<{n}xbf16> {{sdc.name = "b"}}) -> tensor<{n}xbf16> {{
  %half = "sdc.constant"() {{value = dense<5.000000e-01> : tensor<1xbf16>}} : () -> tensor<1xbf16>
  %0 = "sdc.mul"(%x, %w) : (tensor<{n}xbf16>, tensor<{n}xbf16>) -> tensor<{n}xbf16>
  %1 = "sdc.add"(%0, %b) : (tensor<{n}xbf16>, tensor<{n}xbf16>) -> tensor<{n}xbf16>
  %2 = "sdc.gelu"(%1) {{approximate = "none"}} : (tensor<{n}xbf16>) -> tensor<{n}xbf16>
  %3 = "sdc.mul"(%2, %half) : (tensor<{n}xbf16>, tensor<1xbf16>) -> tensor<{n}xbf16>
  return %3 : tensor<{n}xbf16>
}}"""
    softmax = f"""
func.func @main(%x: tensor<{rows}x{cols}xbf16> {{sdc.name = "x"}}) -> tensor<{rows}x{cols}xbf16> {{
  %0 = "sdc.softmax"(%x) {{axis = -1 : i64}} : (tensor<{rows}x{cols}xbf16>) -> tensor<{rows}x{cols}xbf16>
  return %0 : tensor<{rows}x{cols}xbf16>
}}"""
    layernorm = f"""
func.func @main(%x: tensor<{rows}x{cols}xbf16> {{sdc.name = "x"}}, %g: tensor<{cols}xbf16> {{sdc.name = "g"}},
                %b: tensor<{cols}xbf16> {{sdc.name = "b"}}) -> tensor<{rows}x{cols}xbf16> {{
  %0 = "sdc.layer_norm"(%x, %g, %b) {{axis = -1 : i64, epsilon = 1.000000e-05 : f64}}
      : (tensor<{rows}x{cols}xbf16>, tensor<{cols}xbf16>, tensor<{cols}xbf16>) -> tensor<{rows}x{cols}xbf16>
  return %0 : tensor<{rows}x{cols}xbf16>
}}"""
    F = torch.nn.functional
    batch, width, layers = (256, 512, 2) if quick else (8192, 4096, 8)
    mlp_args = [f'%x: tensor<{batch}x{width}xbf16> {{sdc.name = "x"}}'] + [
        f'%w{i}: tensor<{width}x{width}xbf16> {{sdc.name = "w{i}"}}, %b{i}: tensor<{width}xbf16> {{sdc.name = "b{i}"}}'
        for i in range(layers)]
    act, t = "%x", f"tensor<{batch}x{width}xbf16>"
    body = []
    for i in range(layers):
        body += [f'  %m{i} = "sdc.matmul"({act}, %w{i}) : ({t}, tensor<{width}x{width}xbf16>) -> {t}',
                 f'  %a{i} = "sdc.add"(%m{i}, %b{i}) : ({t}, tensor<{width}xbf16>) -> {t}',
                 f'  %g{i} = "sdc.gelu"(%a{i}) {{approximate = "tanh"}} : ({t}) -> {t}']
        act = f"%g{i}"
    mlp = (f"func.func @main({', '.join(mlp_args)}) -> {t} {{\n" + "\n".join(body) + f"\n  return {act} : {t}\n}}")

    def mlp_inputs():
        scale = width ** -0.5
        return [torch.randn(batch, width, device="cuda", dtype=bf16)] + [
            t for _ in range(layers) for t in (torch.randn(width, width, device="cuda", dtype=bf16) * scale,
                                               torch.randn(width, device="cuda", dtype=bf16) * 0.1)]

    def mlp_reference(x, *wb):
        for w, b in zip(wb[0::2], wb[1::2]):
            x = F.gelu(x @ w + b, approximate="tanh")
        return x

    return [
        Workload(f"MLP {layers}x{width} batch {batch}", mlp, mlp_inputs, mlp_reference,
                 2 * batch * width * width * layers, "TFLOP/s", 3e-2),
        Workload("elementwise gelu(x*w+b)*0.5", ew, randn((n,), (n,), (n,)),
                 lambda x, w, b: F.gelu(x * w + b) * 0.5, 4 * n * 2, "TB/s", 2e-2),
        Workload(f"softmax {rows}x{cols}", softmax, randn((rows, cols)),
                 lambda x: torch.softmax(x, -1), 2 * rows * cols * 2, "TB/s", 2e-2),
        Workload(f"layernorm {rows}x{cols}", layernorm, randn((rows, cols), (cols,), (cols,)),
                 lambda x, g, b: F.layer_norm(x, (cols,), g, b, 1e-5), 2 * rows * cols * 2, "TB/s", 2e-2),
    ]


def run(work: Workload, tmp: Path, warmup: int, reps: int) -> dict:
    path = tmp / (work.name.split()[0] + ".mlir")
    path.write_text(work.ir)
    started = time.perf_counter()
    exe = sdc.compile(path, target="cuda", output=tmp / (path.stem + ".sdc"), device="cuda")
    compile_s = time.perf_counter() - started
    plan = json.loads((Path(exe.path) / "plan.json").read_text())
    backends = [s["kernel"]["backend"] for s in plan["ranks"][0]["steps"] if s["kind"] == "launch"]

    inputs = work.make_inputs()
    (got,) = exe(*inputs)
    want = work.reference(*[t.double() for t in inputs])
    error = _relative_error(got, want)

    compiled = torch.compile(work.reference)
    row = {
        "work": work.name,
        "compile_s": round(compile_s, 2),
        "rel_error": error,
        "ok": error <= work.tolerance,
        "backends": backends,
        "sdc_ms": _median_ms(lambda: exe(*inputs), warmup, reps),
        "eager_ms": _median_ms(lambda: work.reference(*inputs), warmup, reps),
        "compile_ms": _median_ms(lambda: compiled(*inputs), warmup, reps),
    }
    for key in ("sdc", "eager", "compile"):
        row[f"{key}_rate"] = work.amount / (row[f"{key}_ms"] * 1e-3) / 1e12
    row["unit"] = work.unit
    return row


# ---------------------------------------------------------------- host overhead per call (CUDA graphs)


def host_overhead(calls: int = 200, batch: int = 1, seq: int = 16) -> dict:
    """Host time per call of the example encoder (examples/models/encoder.onnx, static shapes) on
    CUDA, eager against CUDA-graph replay (sdc/runtime/cuda_graphs.py; the issue's goal: under 50 us
    with graphs). The clock reads the wall time of `calls` back-to-back calls, the device synchronized
    once at the end, so a call's time is its host work wherever the GPU keeps up; `gpu_ms` is the
    CUDA-event time of one call for comparison. Returns {"eager_us", "graph_us", "gpu_ms", "graph"}."""
    import os

    import sdc.runtime

    model = ROOT / "examples" / "models" / "encoder.onnx"
    shapes = {"input_ids": [batch, seq], "attention_mask": [batch, seq]}
    ids = torch.randint(0, 1000, (batch, seq), device="cuda")
    mask = torch.ones(batch, seq, dtype=torch.long, device="cuda")
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="sdc-host-") as tmp:
        path = Path(tmp) / "encoder.sdc"
        sdc.compile(str(model), output=str(path), input_shapes=shapes, target="cuda")
        for label, setting in (("eager", "0"), ("graph", "1")):
            os.environ["SDC_CUDA_GRAPHS"] = setting
            try:
                exe = sdc.runtime.load(path, device="cuda")
            finally:
                os.environ.pop("SDC_CUDA_GRAPHS", None)
            for _ in range(5):
                exe(ids, mask)
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(calls):
                exe(ids, mask)
            torch.cuda.synchronize()
            out[f"{label}_us"] = (time.perf_counter() - start) / calls * 1e6
            if label == "graph":
                g = exe._executor.graphs
                out["graph"] = ({"captures": g.captures, "replays": g.replays, "skipped": g.skipped} if g is not None
                                else {"skipped": exe._executor.graph_reason})
                out["gpu_ms"] = _median_ms(lambda: exe(ids, mask), warmup=3, reps=20)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: bench/gpu.py needs a CUDA GPU", file=sys.stderr)
        return 1
    import triton

    meta = {"date": time.strftime("%Y-%m-%d"), "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": triton.__version__, "python": platform.python_version(), "sdc": sdc.__version__}
    print(meta, flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="sdc-bench-") as tmp:
        for work in workloads(args.quick):
            try:
                rows.append(run(work, Path(tmp), warmup=5, reps=args.reps))
            except Exception as e:  # one failing workload must not hide the others' numbers
                rows.append({"work": work.name, "failed": f"{type(e).__name__}: {e}"[:300]})
            print(rows[-1], flush=True)
    try:
        host = host_overhead()
    except Exception as e:  # reported, not fatal: the kernel rows above stand on their own
        host = {"failed": f"{type(e).__name__}: {e}"[:300]}
    print("host overhead", host, flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows, "host_overhead": host}, indent=1))
    print()
    print("| work | sdc ms | eager ms | torch.compile ms | sdc rate | torch.compile rate | sdc/compile time | rel err |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "failed" in r:
            print(f"| {r['work']} | failed: {r['failed'][:80]} |")
            continue
        print(f"| {r['work']} | {r['sdc_ms']:.3f} | {r['eager_ms']:.3f} | {r['compile_ms']:.3f} | "
              f"{r['sdc_rate']:.2f} {r['unit']} | {r['compile_rate']:.2f} {r['unit']} | {r['sdc_ms'] / r['compile_ms']:.2f}x | "
              f"{r['rel_error']:.1e}{'' if r['ok'] else ' FAIL'} |")
    if "failed" not in host:
        print(f"\nencoder b1 s16 host time per call: eager {host['eager_us']:.0f} us, CUDA graph {host['graph_us']:.0f} us "
              f"(goal < 50 us), GPU {host['gpu_ms']:.3f} ms; graphs: {host['graph']}")
    return 0 if all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
