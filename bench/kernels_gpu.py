"""The generated Triton kernels on one GPU, configuration by configuration, against torch in one run.

    source .gpu/env.sh && python3 bench/kernels_gpu.py [--out DIR] [--quick] [--budget SECONDS]

bench/gpu.py times whole workloads; this script is for tuning the renderer's choices. Each workload
is compiled once per renderer setting (TritonRenderer class attributes: elementwise blocks and warps,
row warps), checked against torch in float64, and timed two ways, medians of CUDA-event timings:
`call` is one executable call (its host work included, as bench/gpu.py counts it), `gpu` the time
per call of 20 back-to-back calls (host work overlaps the kernels wherever the GPU is the slower
side). torch eager and torch.compile run the same function in the same process, timed the same two
ways. The MLP row also reports the autotuner: the configuration it chose, how long the first call
took (tuning included) and whether a second load tuned again (it must not: the choice is on disk).
The `ew-cuda` row runs the `ew` chain as the renderer's Triton kernel and as a CUDA C++ one
(sdc/codegen/cuda, SDC_CUDA_CPP=elementwise), kernel time against kernel time.

Rows are printed as they finish and written to DIR/kernels_gpu.json; `--budget` stops starting new
workloads after that many seconds, so a time-limited run still returns what it measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sdc  # noqa: E402
import sdc.runtime  # noqa: E402
from sdc.codegen.triton.renderer import TritonRenderer  # noqa: E402
from sdc.runtime.launch import triton as triton_launcher  # noqa: E402
from sdc.runtime.launch.cuda import CudaLaunch  # noqa: E402
sys.path.insert(0, str(ROOT / "bench"))
from sdc.runtime.executor import _straight_line  # noqa: E402
from gpu import elementwise_ir, layernorm_ir, median_ms, mlp_inputs, mlp_ir, mlp_reference, softmax_ir  # noqa: E402

BF16 = torch.bfloat16
F = torch.nn.functional


def timings(fn: Callable[[], object], quick: bool) -> dict:
    return {"call_ms": median_ms(fn, 1, 10 if quick else 30), "gpu_ms": median_ms(fn, 1, 3 if quick else 5, calls=20)}


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double(), want.double()
    return float(torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want).clamp_min(1e-30))


@contextlib.contextmanager
def renderer_settings(**values) -> Iterator[None]:
    old = {k: getattr(TritonRenderer, k) for k in values}
    for k, v in values.items():
        setattr(TritonRenderer, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(TritonRenderer, k, v)


def compile_ir(ir: str, tmp: Path, name: str):
    path = tmp / f"{name}.mlir"
    path.write_text(ir)
    return sdc.compile(path, target="cuda", output=tmp / f"{name}.sdc", device="cuda")


def kernels_of(exe) -> list[dict]:
    plan = json.loads((Path(exe.path) / "plan.json").read_text())
    return [{k: s["kernel"].get(k) for k in ("backend", "template", "constexprs", "num_warps")}
            for s in plan["ranks"][0]["steps"] if s["kind"] == "launch"]


def rate(amount: float, ms: float) -> float:
    return amount / (ms * 1e-3) / 1e12


def kernel_ms(exe, inputs, quick: bool) -> float:
    """The generated kernels' own time per call: a fresh load without CUDA graphs (whose replay copies
    the inputs in and the outputs out) runs once with each generated launch (Triton or CUDA C++)
    recorded, then each launch is timed back to back on the recorded values (it reuses its result
    buffers) and the times are summed."""
    os.environ["SDC_CUDA_GRAPHS"] = "0"
    try:
        fresh = sdc.runtime.load(exe.path, device="cuda")
    finally:
        os.environ.pop("SDC_CUDA_GRAPHS", None)
    program = fresh._executor.program
    recorded = []
    for i, step in enumerate(program):
        if isinstance(step, (triton_launcher.TritonLaunch, CudaLaunch)):
            def spy(vals, state, step=step):
                recorded.append((step, list(vals), state))  # its operands, before later steps free them
                step(vals, state)
            program[i] = spy
    # an unprofiled call runs the straight-line form of `program`: rebuild it with the spies in place
    fresh._executor.fast_program = _straight_line(program, fresh._executor.comm)
    fresh(*inputs)
    if not recorded:
        raise RuntimeError("no generated kernel ran in the recorded call")
    total = 0.0
    for step, vals, state in recorded:
        total += median_ms(lambda: step(vals, state), 1, 3 if quick else 5, calls=20)
    return total


def measure_sdc(exe, inputs, want, amount: float, quick: bool) -> dict:
    (got,) = exe(*inputs)
    row = {"rel_error": rel_error(got, want), **timings(lambda: exe(*inputs), quick),
           "kernel_ms": kernel_ms(exe, inputs, quick)}
    for key in ("call", "gpu", "kernel"):
        row[f"rate_{key}"] = rate(amount, row[f"{key}_ms"])
    return row


def measure_peers(fn, inputs, amount: float, quick: bool) -> dict:
    out = {}
    for label, f in (("eager", fn), ("compile", torch.compile(fn))):
        t = timings(lambda: f(*inputs), quick)
        out[label] = {**t, "rate_call": rate(amount, t["call_ms"]), "rate_gpu": rate(amount, t["gpu_ms"])}
    return out


# ---------------------------------------------------------------- workloads


def elementwise(tmp: Path, quick: bool) -> dict:
    n = (1 << 20) if quick else 64 * (1 << 20)
    ir = elementwise_ir(n)
    inputs = [torch.randn(n, device="cuda", dtype=BF16) for _ in range(3)]
    fn = lambda x, w, b: F.gelu(x * w + b) * 0.5  # noqa: E731
    want = fn(*[t.double() for t in inputs])
    amount = 4 * n * 2
    row = {"work": f"elementwise gelu(x*w+b)*0.5 {n} bf16", "peers": measure_peers(fn, inputs, amount, quick),
           "variants": []}
    os.environ["SDC_AUTOTUNE"] = "0"  # each fixed variant as it is; then the default plan, tuned at first load
    try:
        for block, warps in ((1024, 4), (2048, 4), (2048, 8), (4096, 4), (4096, 8), (8192, 16)):
            with renderer_settings(elementwise_blocks=((1 << 20, block, warps),)):
                exe = compile_ir(ir, tmp, f"ew_{block}_{warps}")
            row["variants"].append({"BLOCK": block, "num_warps": warps,
                                    **measure_sdc(exe, inputs, want, amount, quick)})
    finally:
        os.environ.pop("SDC_AUTOTUNE", None)
    exe = compile_ir(ir, tmp, "ew_tuned")
    row["variants"].append({"autotune": "on", **measure_sdc(exe, inputs, want, amount, quick)})
    return row


def elementwise_cuda(tmp: Path, quick: bool) -> dict:
    """The `ew` chain with the renderer's own configuration, as a Triton kernel and as a CUDA C++ one
    (SDC_CUDA_CPP=elementwise, compiled by NVRTC at load): the measurement that decides whether
    elementwise groups default to CUDA C++ (sdc/codegen/cuda)."""
    n = (1 << 20) if quick else 64 * (1 << 20)
    ir = elementwise_ir(n)
    inputs = [torch.randn(n, device="cuda", dtype=BF16) for _ in range(3)]
    want = F.gelu(inputs[0].double() * inputs[1].double() + inputs[2].double()) * 0.5
    amount = 4 * n * 2
    row = {"work": f"elementwise gelu(x*w+b)*0.5 {n} bf16: Triton vs CUDA C++", "variants": []}
    for backend in ("triton", "cuda"):
        if backend == "cuda":
            os.environ["SDC_CUDA_CPP"] = "elementwise"
        started = time.perf_counter()
        try:
            exe = compile_ir(ir, tmp, f"ew_{backend}")
        finally:
            os.environ.pop("SDC_CUDA_CPP", None)
        compile_load_s = round(time.perf_counter() - started, 2)  # NVRTC's compile at load included
        row["variants"].append({"backend": backend, "kernels": kernels_of(exe), "compile_load_s": compile_load_s,
                                **measure_sdc(exe, inputs, want, amount, quick)})
    return row


def bias_rows(tmp: Path, quick: bool) -> dict:
    """A 2-D elementwise group with a broadcast bias: the contiguous fast path against the general one."""
    rows, cols = (1024, 1024) if quick else (8192, 8192)
    t, v = f"tensor<{rows}x{cols}xbf16>", f"tensor<{cols}xbf16>"
    ir = f"""
func.func @main(%x: {t} {{sdc.name = "x"}}, %b: {v} {{sdc.name = "b"}}) -> {t} {{
  %0 = "sdc.add"(%x, %b) : ({t}, {v}) -> {t}
  %1 = "sdc.gelu"(%0) {{approximate = "tanh"}} : ({t}) -> {t}
  return %1 : {t}
}}"""
    inputs = [torch.randn(rows, cols, device="cuda", dtype=BF16), torch.randn(cols, device="cuda", dtype=BF16)]
    fn = lambda x, b: F.gelu(x + b, approximate="tanh")  # noqa: E731
    want = fn(*[t.double() for t in inputs])
    amount = 2 * rows * cols * 2 + cols * 2
    row = {"work": f"bias + tanh-gelu {rows}x{cols} bf16", "peers": measure_peers(fn, inputs, amount, quick),
           "variants": []}
    exe = compile_ir(ir, tmp, "bias")
    row["kernels"] = kernels_of(exe)
    row["variants"].append({"path": "contiguous", **measure_sdc(exe, inputs, want, amount, quick)})
    dense = triton_launcher._dense
    triton_launcher._dense = lambda *a: False  # the general (div/mod per dim) path on the same kernel
    try:
        row["variants"].append({"path": "general", **measure_sdc(exe, inputs, want, amount, quick)})
    finally:
        triton_launcher._dense = dense
    return row


def row_workloads(tmp: Path, quick: bool) -> list[dict]:
    rows, cols = (1024, 4096) if quick else (32768, 4096)
    softmax, layernorm = softmax_ir(rows, cols), layernorm_ir(rows, cols)
    x = torch.randn(rows, cols, device="cuda", dtype=BF16)
    g, b = torch.randn(cols, device="cuda", dtype=BF16), torch.randn(cols, device="cuda", dtype=BF16)
    amount = 2 * rows * cols * 2
    out = []
    for name, ir, inputs, fn in (
            ("softmax", softmax, [x], lambda x: torch.softmax(x, -1)),
            ("layernorm", layernorm, [x, g, b], lambda x, g, b: F.layer_norm(x, (cols,), g, b, 1e-5))):
        want = fn(*[t.double() for t in inputs])
        row = {"work": f"{name} {rows}x{cols} bf16", "peers": measure_peers(fn, inputs, amount, quick), "variants": []}
        # 4, 8, 16 warps for one 4096 row a program; then two rows a program with 16 warps
        os.environ["SDC_AUTOTUNE"] = "0"  # the fixed variants; then the default plan, tuned at first load
        try:
            for per_thread, elements in ((32, 2048), (16, 2048), (8, 2048), (16, 8192)):
                with renderer_settings(row_values_per_thread=per_thread, row_elements=elements):
                    exe = compile_ir(ir, tmp, f"{name}_{per_thread}_{elements}")
                (k,) = [k for k in kernels_of(exe) if k["backend"] == "triton"]
                row["variants"].append({"num_warps": k["num_warps"], **k["constexprs"],
                                        **measure_sdc(exe, inputs, want, amount, quick)})
        finally:
            os.environ.pop("SDC_AUTOTUNE", None)
        exe = compile_ir(ir, tmp, f"{name}_tuned")
        row["variants"].append({"autotune": "on", **measure_sdc(exe, inputs, want, amount, quick)})
        out.append(row)
    return out


def mlp(tmp: Path, quick: bool) -> dict:
    batch, width, layers = (256, 512, 2) if quick else (8192, 4096, 8)
    ir = mlp_ir(batch, width, layers)
    inputs, fn = mlp_inputs(batch, width, layers), mlp_reference
    want = fn(*[v.double() for v in inputs])
    flops = 2 * batch * width * width * layers
    row = {"work": f"MLP {layers}x{width} batch {batch} bf16", "peers": measure_peers(fn, inputs, flops, quick),
           "variants": []}
    timed = []
    measure = triton_launcher.measure
    triton_launcher.measure = lambda run, device: timed.append(1) or measure(run, device)
    try:
        os.environ["SDC_AUTOTUNE"] = "0"
        exe = compile_ir(ir, tmp, "mlp")
        row["variants"].append({"autotune": "off", **measure_sdc(exe, inputs, want, flops, quick)})
        os.environ["SDC_AUTOTUNE"] = "1"
        tuned = sdc.runtime.load(exe.path, device="cuda")
        started = time.perf_counter()
        tuned(*inputs)
        torch.cuda.synchronize()
        first_s = time.perf_counter() - started
        chosen = [dict(c.constexprs, num_warps=c.num_warps) for step in tuned._executor.program
                  if isinstance(step, triton_launcher.TritonLaunch) for c in step.chosen.values()]
        row["variants"].append({"autotune": "on", "first_call_s": round(first_s, 2), "configs_timed": len(timed),
                                "chosen": chosen[:1], **measure_sdc(tuned, inputs, want, flops, quick)})
        before = len(timed)
        again = sdc.runtime.load(exe.path, device="cuda")
        again(*inputs)
        row["second_load_configs_timed"] = len(timed) - before
    finally:
        triton_launcher.measure = measure
        os.environ.pop("SDC_AUTOTUNE", None)
    return row


class ConvBlock(torch.nn.Module):
    """relu(conv3x3(x) + bias + r): a ResNet bottleneck's convolution with its epilogue."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x, r):
        return torch.relu(self.conv(x) + r)


def conv_layer(tmp: Path, quick: bool) -> dict:
    """A ResNet-50 layer-3 convolution (3x3, 256 -> 256 at 14x14, batch 64, fp16, channels-last) with bias,
    residual add and relu, through each of sdc's two cuda paths (SDC_CONV_KERNEL: one fused cuDNN call,
    or the Triton implicit-GEMM template, autotuned), against torch eager and torch.compile."""
    import copy

    batch, channels, hw = (8, 64, 14) if quick else (64, 256, 14)
    cpu_block = ConvBlock(channels).half().eval()
    block = copy.deepcopy(cpu_block).cuda().to(memory_format=torch.channels_last)
    cl = torch.channels_last
    inputs = [torch.randn(batch, channels, hw, hw, device="cuda", dtype=torch.float16).to(memory_format=cl)
              for _ in range(2)]
    w, b = block.conv.weight.detach(), block.conv.bias.detach()
    want = torch.relu(F.conv2d(inputs[0].double(), w.double(), b.double(), padding=1) + inputs[1].double())
    flops = 2 * batch * hw * hw * channels * channels * 9

    def fn(x, r):
        with torch.no_grad():
            return block(x, r)

    row = {"work": f"conv3x3 {channels}->{channels} {hw}x{hw} b{batch} fp16 +bias+residual+relu",
           "peers": measure_peers(fn, inputs, flops, quick), "variants": []}
    example = tuple(t.cpu() for t in inputs)
    for path in ("cudnn", "triton"):
        os.environ["SDC_CONV_KERNEL"] = path
        try:
            exe = sdc.compile(cpu_block, example, target="cuda", output=tmp / f"conv_{path}.sdc", device="cuda")
        finally:
            os.environ.pop("SDC_CONV_KERNEL", None)
        kernels = kernels_of(exe)
        if any(k["backend"] == "triton" for k in kernels):
            measured = measure_sdc(exe, inputs, want, flops, quick)
        else:  # no generated kernel to time alone (kernel_ms would be 0)
            (got,) = exe(*inputs)
            measured = {"rel_error": rel_error(got, want), **timings(lambda: exe(*inputs), quick)}
            measured.update({f"rate_{k}": rate(flops, measured[f"{k}_ms"]) for k in ("call", "gpu")})
        fused = [k for k in (getattr(step, "kernel", None) for step in exe._executor.program)
                 if hasattr(k, "cudnn_refused")]  # reference_kernels.fused_conv kernels, and whether cuDNN refused
        measured.update(fused_conv_kernels=len(fused), cudnn_refused=[r[:200] for k in fused for r in k.cudnn_refused])
        row["variants"].append({"path": path, "kernels": kernels, **measured})
    return row


def attention_bench_ir(b: int, h: int, s: int, d: int, causal: bool, constant_mask: bool = False) -> str:
    """softmax(q k^T / sqrt(d), masked) v in bf16 as the ONNX export of a BERT (padding mask [B, 1, 1, S]
    under where) or GPT (causal [S, S] mask under where) block writes it: one attention kernel.
    `constant_mask`: the mask is the parameter "m" (a constant buffer, as GPT-2's `bias`), so the
    compiler sees it is causal and skips key blocks; else it is an input."""
    t = lambda *shape, dt="bf16": "tensor<" + "x".join([*map(str, shape), dt]) + ">"  # noqa: E731
    mask = t(s, s, dt="i1") if causal else t(b, 1, 1, s, dt="i1")
    mask_arg = "" if constant_mask else f",\n                %m: {mask} {{sdc.name = \"m\"}}"
    mask_param = f'\n  %m = "sdc.parameter"() {{name = "m"}} : () -> {mask}' if constant_mask else ""
    return f"""
func.func @main(%q: {t(b, h, s, d)} {{sdc.name = "q"}}, %k: {t(b, h, s, d)} {{sdc.name = "k"}},
                %v: {t(b, h, s, d)} {{sdc.name = "v"}}{mask_arg}) -> ({t(b, h, s, d)} {{sdc.name = "o"}}) {{{mask_param}
  %c = "sdc.constant"() {{value = dense<{d ** -0.5!r}> : tensor<bf16>}} : () -> tensor<bf16>
  %fill = "sdc.constant"() {{value = dense<-1.0e9> : tensor<bf16>}} : () -> tensor<bf16>
  %s0 = "sdc.matmul"(%q, %k) {{transpose_lhs = false, transpose_rhs = true}} :
      ({t(b, h, s, d)}, {t(b, h, s, d)}) -> {t(b, h, s, s)}
  %s1 = "sdc.mul"(%s0, %c) : ({t(b, h, s, s)}, tensor<bf16>) -> {t(b, h, s, s)}
  %s2 = "sdc.where"(%m, %fill, %s1) : ({mask}, tensor<bf16>, {t(b, h, s, s)}) -> {t(b, h, s, s)}
  %p = "sdc.softmax"(%s2) {{axis = -1 : i64}} : ({t(b, h, s, s)}) -> {t(b, h, s, s)}
  %o = "sdc.matmul"(%p, %v) : ({t(b, h, s, s)}, {t(b, h, s, d)}) -> {t(b, h, s, d)}
  return %o : {t(b, h, s, d)}
}}
"""


def attention(tmp: Path, quick: bool) -> list[dict]:
    """The attention template (one flash-style kernel) against torch eager's and torch.compile's
    scaled_dot_product_attention: BERT-base-sized bf16 with a padding mask, and GPT-sized causal.
    FLOP/s count both products in full (4 B H S^2 D), the causal row too."""
    out = []
    for b, h, s, d, causal in ((32, 12, 128, 64, False), (16, 12, 1024, 64, True)):
        if quick:
            b = max(1, b // 8)
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=BF16) for _ in range(3))
        if causal:
            mask = torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1)
        else:
            mask = torch.zeros(b, 1, 1, s, dtype=torch.bool, device="cuda")
            mask[::2, ..., s // 2:] = True  # every other sequence is half padding
        inputs = [q, k, v, mask]
        want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=~mask)
        flops = 4 * b * h * s * s * d

        def fn(q, k, v, m, causal=causal):
            if causal:
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=~m)

        exe = compile_ir(attention_bench_ir(b, h, s, d, causal), tmp, f"attention_{s}")
        row = {"work": f"attention B{b} H{h} S{s} D{d} bf16 {'causal' if causal else 'padding mask'}",
               "peers": measure_peers(fn, inputs, flops, quick),
               "variants": [{"kernels": kernels_of(exe), **measure_sdc(exe, inputs, want, flops, quick)}]}
        if causal:  # the mask as a constant: the causal kernel (block skipping, no mask read)
            from sdc.compiler import compile_module
            from sdc.ir_text import parse_module
            from sdc.options import CompileOptions

            exe = compile_module(parse_module(attention_bench_ir(b, h, s, d, causal, constant_mask=True)),
                                 {"m": mask.cpu()}, CompileOptions(target="cuda"),
                                 output=tmp / f"attention_{s}_constant.sdc", device="cuda")
            row["variants"].append({"mask": "constant", "kernels": kernels_of(exe),
                                    **measure_sdc(exe, inputs[:3], want, flops, quick)})
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for kernels_gpu.json")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--budget", type=float, default=170.0, help="start no workload after this many seconds")
    parser.add_argument("--only", default="", help="comma-separated workloads: ew,ew-cuda,bias,rows,mlp,conv,attn")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: bench/kernels_gpu.py needs a CUDA GPU", file=sys.stderr)
        return 1
    import triton

    started = time.perf_counter()
    meta = {"date": time.strftime("%Y-%m-%d"), "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": triton.__version__}
    print(meta, flush=True)
    results: dict = {"meta": meta, "rows": []}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    chosen = set(filter(None, args.only.split(","))) or {"ew", "ew-cuda", "bias", "rows", "mlp", "conv", "attn"}
    with tempfile.TemporaryDirectory(prefix="sdc-kernels-") as tmp:
        os.environ.setdefault("SDC_AUTOTUNE_DIR", str(Path(tmp) / "autotune"))
        for name, work in (("ew", elementwise), ("ew-cuda", elementwise_cuda), ("bias", bias_rows),
                           ("rows", row_workloads), ("mlp", mlp), ("conv", conv_layer), ("attn", attention)):
            if name not in chosen:
                continue
            if time.perf_counter() - started > args.budget:
                print(f"skipped {name}: past the budget", flush=True)
                continue
            try:
                got = work(Path(tmp), args.quick)
            except Exception as e:  # one failing workload must not hide the others' numbers
                got = {"work": name, "failed": f"{type(e).__name__}: {e}"[:500]}
            for row in got if isinstance(got, list) else [got]:
                results["rows"].append(row)
                print(json.dumps(row), flush=True)
            (out / "kernels_gpu.json").write_text(json.dumps(results, indent=1))
    print(f"done in {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
