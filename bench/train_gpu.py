"""sdc's compiled training step on one GPU against torch eager and torch.compile, in one process.

    python bench/train_gpu.py [--out results.json] [--only gpt|resnet] [--steps N] [--autotune 0|1]
    OMP_NUM_THREADS=1 python bench/train_gpu.py --smoke        # tiny configs; runs on a CPU-only host too

Rows (the training issue's benchmark, issue 13):
- GPT-2 small (transformers' GPT2LMHeadModel: 12 layers, 12 heads, 768 wide, vocab 50304, 1024
  positions), batch 16 x 1024 tokens, bf16, AdamW(lr 1e-4, weight decay 0.1). The peers are measured
  as shared/bench/peers_gpu.py's `gpt()` measures them: `model(ids, labels=ids).loss` under
  `torch.autocast(bfloat16)`, `backward()`, fused AdamW `step()` and `zero_grad(set_to_none=True)`;
  torch.compile is the same step with the compiled module. MFU counts `6 * params * tokens + 12 *
  layers * width * T * tokens` flops per step against 989 TFLOP/s (the H200's dense bf16 peak).
- ResNet-50 (torchvision, `weights=None, zero_init_residual=True`, train mode), batch 64 at
  224x224, bf16, cross-entropy over 1000 classes, SGD(lr 0.01, momentum 0.9, weight decay 1e-4). The
  peers run it channels-last under autocast. Flops are counted by torch.utils.flop_counter on one
  forward and backward (on the meta device: no memory, no time), against the same peak.

sdc's side is `sdc.compile_train(model, batch, loss=..., optimizer=sdc.optim.*, target="cuda",
precision="bf16", device="cuda")`, one call per step through the public `TrainStep` (which reads the
loss back to the host, so each call ends in a sync); `sdc_program_ms` also times the compiled program
called directly, without that read, as the peers' steps are. Each system starts from the same initial
weights (a CPU copy made once) and trains on the same batch. Reported per system: the median step
time (CUDA events; warm-up steps first), tokens/s or images/s, MFU, the peak of
`torch.cuda.max_memory_allocated` (reset before the system is built, so its weights and optimizer
state count), sdc's compile time (`compile_train`: export, passes, codegen, writing and loading the
artifact) and its first step (Triton compiling, and with `--autotune 1` tuning, every generated kernel),
torch.compile's first step. The check: the first-step loss of sdc and torch.compile against torch
eager's (the same weights and data: only bf16 rounding differs), and the loss after `--steps` steps
(training moves the same way). Caches start cold (fresh Triton, Inductor and sdc-autotune
directories) unless `--warm-caches`.

Progress lines carry the time since the start, flushed, so a run cut off by a time limit still says
where its time went. A row that fails prints its error in the table and the next row runs. The table
is printed last; `--out` writes every number as JSON.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PEAK_FLOPS = 989e12  # H200 SXM dense bf16, the issue's reference for MFU
STARTED = time.perf_counter()


def log(message: str) -> None:
    """A progress line with the seconds since the start, flushed at once: a run killed by its time
    limit still shows which stage it was in and how long the stages before took."""
    print(f"[{time.perf_counter() - STARTED:8.1f}s] {message}", flush=True)


def _define_torchvision_schemas() -> None:
    """PyPI's torchvision is a CUDA build: beside a CPU torch its C++ ops do not load, and importing it
    (transformers does) fails registering fake kernels for `torchvision::nms`/`qnms` unless their
    schemas exist (test/py/conftest.py does the same for the tests). A CUDA torch loads the ops itself,
    and defining them first would abort, hence the guard."""
    if torch.version.cuda is not None:
        return
    for name in ("nms", "qnms"):
        try:
            torch.library.define(f"torchvision::{name}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except RuntimeError:  # already defined (a CPU torchvision build)
            pass


# ---------------------------------------------------------------- timing


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def median_ms(fn: Callable[[], object], device: str, warmup: int, reps: int) -> float:
    """Median over `reps` calls of `fn` after `warmup` calls: CUDA-event time on cuda, wall time
    (after the call returns, which on the CPU is when the work is done) elsewhere."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(reps):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            started = time.perf_counter()
            fn()
            times.append((time.perf_counter() - started) * 1e3)
    times.sort()
    return times[len(times) // 2]


def reset_memory(device: str) -> None:
    """Free what the previous system left (torch.compile's graphs hold their module) and start the
    peak count from what is allocated now."""
    import gc

    torch._dynamo.reset()
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_memory_gib(device: str) -> float | None:
    return torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None


# ---------------------------------------------------------------- the rows


@dataclass
class Row:
    """One benchmark row: how to build the model and its batch (on the CPU, seeded, so every system
    starts from the same weights and data), its loss as sdc sees it, and the optimizers."""

    name: str
    build: Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]  # model (train mode), (input, target)
    sdc_model: Callable[[torch.nn.Module], torch.nn.Module]  # what compile_train traces
    sdc_loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    torch_loss: Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]  # the peers' step loss
    sdc_optimizer: Callable[[], Any]
    torch_optimizer: Callable[[list[torch.nn.Parameter], str], torch.optim.Optimizer]
    channels_last: bool  # the peers' model and images in NHWC
    unit: str  # "tokens/s" or "img/s"
    items: int  # tokens or images per step
    flops: Callable[[torch.nn.Module, tuple[torch.Tensor, ...]], float]  # per training step
    tolerances: tuple[float, float] = (2e-2, 2e-2)  # loss error over eager's first loss: step 1, step --steps


def _gpt_row(smoke: bool, dropout: float) -> Row:
    from transformers import GPT2Config, GPT2LMHeadModel

    layers, heads, width, vocab, positions, batch, seq = (
        (2, 2, 64, 512, 64, 2, 32) if smoke else (12, 12, 768, 50304, 1024, 16, 1024))
    # eager attention: torch.export traces it to matmul/softmax, which sdc differentiates; sdpa
    # decomposes to the same (docs/training.md), eager is the one both frontends take as written
    # dropout 0 by default (GPT-2 pretraining recipes such as nanoGPT's use none): torch's and sdc's
    # masks come from different generators, so with dropout the first-step losses differ by more than
    # bf16 rounding. peers_gpu.py ran transformers' default 0.1: `--dropout 0.1` is that configuration.
    config = GPT2Config(n_layer=layers, n_head=heads, n_embd=width, vocab_size=vocab, n_positions=positions,
                        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout, bos_token_id=0,
                        eos_token_id=0, attn_implementation="eager")

    def build() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
        torch.manual_seed(0)
        model = GPT2LMHeadModel(config).train()
        ids = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(1))
        return model, (ids, ids)

    class Logits(torch.nn.Module):
        """The LM as a function of the token ids alone, returning the logits (no KV cache)."""

        def __init__(self, lm: torch.nn.Module):
            super().__init__()
            self.lm = lm

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.lm(input_ids=ids, use_cache=False).logits

    def next_token_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Hugging Face's causal LM loss with labels = ids: position t predicts token t+1, in f32."""
        return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                                 ids[:, 1:].reshape(-1))

    def gpt_flops(model: torch.nn.Module, batch_: tuple[torch.Tensor, ...]) -> float:
        params = sum(p.numel() for p in model.parameters())  # tied head counted once, as peers_gpu.py
        return 6 * params * batch * seq + 12 * layers * width * seq * batch * seq

    return Row(
        name=f"GPT-2 {'smoke' if smoke else 'small'} ({layers}L {width}w) B{batch}xT{seq} bf16 AdamW"
             + (f" dropout {dropout}" if dropout else ""),
        build=build, sdc_model=Logits, sdc_loss=next_token_loss,
        torch_loss=lambda model, ids, labels: model(ids, labels=labels).loss,
        sdc_optimizer=lambda: _sdc_optim().AdamW(lr=1e-4, weight_decay=0.1),
        torch_optimizer=lambda params, device: torch.optim.AdamW(params, lr=1e-4, weight_decay=0.1,
                                                                 fused=device == "cuda"),
        channels_last=False, unit="tokens/s", items=batch * seq, flops=gpt_flops)


def _resnet_row(smoke: bool, dropout: float) -> Row:
    import torchvision

    batch, size = (2, 32) if smoke else (64, 224)

    def build() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
        torch.manual_seed(0)
        # zero_init_residual (Goyal et al.'s recipe, an option of torchvision's reference training):
        # every block starts as the identity. Without it the random-init activations grow through the
        # 16 blocks and the bf16 loss is ill-conditioned (torch's own autocast loss 1-6% off the
        # float64 one at small sizes), which would make the loss check meaningless.
        model = torchvision.models.resnet50(weights=None, zero_init_residual=True).train()
        gen = torch.Generator().manual_seed(1)
        return model, (torch.randn(batch, 3, size, size, generator=gen), torch.randint(0, 1000, (batch,), generator=gen))

    def counted_flops(model: torch.nn.Module, batch_: tuple[torch.Tensor, ...]) -> float:
        """Forward and backward flops of one step as torch's flop counter sees them (convolutions and
        matmuls, 2 per multiply-add), on meta tensors."""
        from torch.utils.flop_counter import FlopCounterMode

        meta = copy.deepcopy(model).to("meta")
        x, y = (t.to("meta") for t in batch_)
        with FlopCounterMode(display=False) as counter:
            torch.nn.functional.cross_entropy(meta(x), y).backward()
        return float(counter.get_total_flops())

    def sgd(params: list[torch.nn.Parameter], device: str) -> torch.optim.Optimizer:
        try:
            return torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4, fused=device == "cuda")
        except (RuntimeError, TypeError):  # a torch without fused SGD on this device
            return torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4)

    return Row(
        name=f"ResNet-50 b{batch} {size}x{size} bf16 SGD-momentum",
        build=build, sdc_model=lambda m: m, sdc_loss=torch.nn.functional.cross_entropy,
        torch_loss=lambda model, x, y: torch.nn.functional.cross_entropy(model(x), y),
        sdc_optimizer=lambda: _sdc_optim().SGD(lr=0.01, momentum=0.9, weight_decay=1e-4),
        torch_optimizer=sgd, channels_last=True, unit="img/s", items=batch, flops=counted_flops)


def _sdc_optim() -> Any:
    import sdc.optim

    return sdc.optim


# ---------------------------------------------------------------- the systems


def run_sdc(row: Row, model: torch.nn.Module, batch: tuple[torch.Tensor, ...], args: argparse.Namespace,
            tmp: Path) -> dict[str, Any]:
    """Compile the step (timed), take the first step (timed: Triton JIT and tuning), train to
    `--steps`, then time steps."""
    import sdc

    device = args.device
    reset_memory(device)
    log(f"sdc: compile_train (target {args.target}, precision bf16, device {device}) ...")
    started = time.perf_counter()
    step = sdc.compile_train(row.sdc_model(model), batch, loss=row.sdc_loss, optimizer=row.sdc_optimizer(),
                             target=args.target, precision="bf16", device=device,
                             output=tmp / (row.name.split()[0] + ".sdc"))
    out: dict[str, Any] = {"compile_s": time.perf_counter() - started}
    log(f"sdc: compiled in {out['compile_s']:.1f} s; planned arena {step.info()['planned_peak_bytes'] / 2**30:.2f} GiB")
    on_device = tuple(t.to(device) for t in batch)
    log("sdc: first step (Triton compiles the generated kernels"
        + (", autotuning)" if os.environ.get("SDC_AUTOTUNE") != "0" else ")") + " ...")
    started = time.perf_counter()
    losses = [step(*on_device)]
    synchronize(device)
    out["first_step_s"] = time.perf_counter() - started
    log(f"sdc: first step {out['first_step_s']:.1f} s, loss {losses[0]:.5f}")
    losses += [step(*on_device) for _ in range(args.steps - 1)]
    out["losses"] = losses
    log(f"sdc: loss after {args.steps} steps {losses[-1]:.5f}; timing ...")
    out["ms"] = median_ms(lambda: step(*on_device), device, args.warmup, args.reps)
    if device == "cuda":  # elsewhere a call is synchronous anyway: the same number again
        inputs = {"lr": torch.tensor(step.lr, dtype=torch.float32)}
        if step.rng is not None:  # dropout: the program's counter inputs (the same masks each call: timing only)
            inputs.update({name: torch.tensor(0, dtype=torch.int64) for name in ("rng.seed", "rng.offset")})
        out["program_ms"] = median_ms(lambda: step.program(*on_device, **inputs), device, 1, args.reps)
    out["peak_gib"] = peak_memory_gib(device)
    if args.profile and device == "cuda":
        out["profile"] = profile_step(lambda: step(*on_device))
    log(f"sdc: {out['ms']:.2f} ms per step"
        + (f" ({out['program_ms']:.2f} ms without reading the loss back)" if "program_ms" in out else ""))
    return out


def _kernel_kind(name: str) -> str:
    """A CUDA kernel's kind by its name: sdc's generated Triton kernels are named k<N> (or their
    shared entry `kernel`), cuBLAS/CUTLASS GEMMs carry gemm/cutlass/sm90 in theirs, torch's own
    elementwise, reduction and copy kernels are at::native ones."""
    lowered = name.lower()
    if lowered.startswith("k") and (lowered[1:].split("_")[0].isdigit() or lowered == "kernel"):
        return "sdc triton"
    if any(word in lowered for word in ("gemm", "cutlass", "sm90_xmma", "cublas", "nvjet")):
        return "cuBLAS matmul"
    if "memcpy" in lowered or "copy" in lowered:
        return "copies"
    if "reduce" in lowered:
        return "torch reductions"
    if "elementwise" in lowered or "vectorized" in lowered:
        return "torch elementwise"
    if "index" in lowered or "scatter" in lowered or "gather" in lowered:
        return "torch gather/scatter"
    return "other"


def profile_step(fn: Callable[[], object]) -> dict[str, Any]:
    """One step under torch.profiler: CUDA time by kernel kind and the ten longest kernels, printed
    and returned (where a step's time goes, for the "why" of a row below goal)."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels: dict[str, list[float]] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            kernels.setdefault(event.name, []).append(event.device_time / 1e3)
    by_kind: dict[str, list[float]] = {}
    for name, times in kernels.items():
        entry = by_kind.setdefault(_kernel_kind(name), [0.0, 0])
        entry[0] += sum(times)
        entry[1] += len(times)
    total = sum(t for t, _ in by_kind.values())
    log(f"profile: {total:.2f} ms of CUDA kernels, {sum(n for _, n in by_kind.values())} launches")
    for kind, (ms, count) in sorted(by_kind.items(), key=lambda kv: -kv[1][0]):
        log(f"  {kind:22s} {ms:8.2f} ms  {count:5d} launches")
    top = sorted(((sum(t), len(t), name) for name, t in kernels.items()), reverse=True)[:10]
    for ms, count, name in top:
        log(f"  {ms:8.2f} ms x{count:<4d} {name[:90]}")
    return {"total_ms": total, "by_kind": {k: {"ms": v[0], "launches": v[1]} for k, v in by_kind.items()},
            "top": [{"ms": ms, "count": count, "name": name[:200]} for ms, count, name in top]}


def run_torch(row: Row, model: torch.nn.Module, batch: tuple[torch.Tensor, ...], args: argparse.Namespace,
              compiled: bool) -> dict[str, Any]:
    """torch eager or torch.compile: autocast bf16, backward, the optimizer's step, grads set to None."""
    device, label = args.device, "torch.compile" if compiled else "eager"
    reset_memory(device)
    net = copy.deepcopy(model).to(device)
    x, y = (t.to(device) for t in batch)
    if row.channels_last:
        net = net.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    optimizer = row.torch_optimizer(list(net.parameters()), device)
    if compiled:
        torch._dynamo.reset()
        net = torch.compile(net)

    def step() -> torch.Tensor:
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = row.torch_loss(net, x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    log(f"{label}: first step ...")
    started = time.perf_counter()
    losses = [step()]
    synchronize(device)
    out: dict[str, Any] = {"first_step_s": time.perf_counter() - started}
    losses += [step() for _ in range(args.steps - 1)]
    out["losses"] = [float(v) for v in losses]
    log(f"{label}: first step {out['first_step_s']:.1f} s, loss {out['losses'][0]:.5f}, after {args.steps} steps "
        f"{out['losses'][-1]:.5f}; timing ...")
    out["ms"] = median_ms(step, device, args.warmup, args.reps)
    out["peak_gib"] = peak_memory_gib(device)
    log(f"{label}: {out['ms']:.2f} ms per step")
    return out


def reference_loss(row: Row, model: torch.nn.Module, batch: tuple[torch.Tensor, ...], device: str) -> float:
    """The first-step loss in float64 (forward only): what the bf16 systems' first losses approximate."""
    net = copy.deepcopy(model).double().to(device)
    x, y = (t.to(device).double() if t.is_floating_point() else t.to(device) for t in batch)
    with torch.no_grad():
        return float(row.torch_loss(net, x, y))


def check(row: Row, results: dict[str, dict[str, Any]], exact: float | None) -> dict[str, Any]:
    """Each system's first-step loss against the float64 loss and its loss after --steps against torch
    eager's, and the loss went down. Errors are relative to the float64 loss (the loss's scale: a
    tiny smoke batch is memorized, its loss near 0). Where bf16 rounding alone moves the loss more
    (an ill-conditioned init), each bound is twice torch eager's own first-step error instead."""
    want = results.get("eager", {}).get("losses")
    verdict: dict[str, Any] = {}
    if not want or exact is None:
        return verdict
    scale = max(abs(exact), 1e-6)
    eager_error = abs(want[0] - exact) / scale
    bounds = (max(row.tolerances[0], 2 * eager_error), max(row.tolerances[1], 2 * eager_error))
    for system in ("sdc", "compile"):
        got = results.get(system, {}).get("losses")
        if not got:
            continue
        first = abs(got[0] - exact) / scale
        last = abs(got[-1] - want[-1]) / scale
        verdict[system] = {"first_err": first, "last_err": last, "eager_first_err": eager_error, "bounds": bounds,
                           "decreased": got[-1] < got[0],
                           "ok": first <= bounds[0] and last <= bounds[1] and got[-1] < got[0]}
    return verdict


def run_row(row: Row, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Every system on one row; a system that fails is recorded and the others still run."""
    log(f"== {row.name}")
    model, batch = row.build()
    flops = row.flops(model, batch)
    log(f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, {flops / 1e9:.3g} GFLOP per step")
    results: dict[str, Any] = {"work": row.name, "unit": row.unit, "flops": flops, "systems": {}}
    try:
        results["exact_loss"] = reference_loss(row, model, batch, args.device)
        log(f"first-step loss in float64: {results['exact_loss']:.5f}")
    except Exception as e:  # no reference, no check; the timings still stand
        log(f"float64 reference failed: {type(e).__name__}: {e}")
        results["exact_loss"] = None
    reset_memory(args.device)
    systems: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("eager", lambda: run_torch(row, model, batch, args, compiled=False)),
        ("sdc", lambda: run_sdc(row, model, batch, args, tmp)),
        ("compile", lambda: run_torch(row, model, batch, args, compiled=True)),
    ]
    for system, run in systems:
        if system not in args.systems:
            continue
        try:
            out = run()
            out["rate"] = row.items / (out["ms"] * 1e-3)
            out["mfu"] = flops / (out["ms"] * 1e-3) / PEAK_FLOPS
        except Exception as e:  # one failing system must not hide the others' numbers
            log(f"{system} failed:\n{traceback.format_exc()}")
            out = {"failed": f"{type(e).__name__}: {e}".replace("\n", " ")[:300]}
        results["systems"][system] = out
    results["check"] = check(row, results["systems"], results["exact_loss"])
    return results


# ---------------------------------------------------------------- the table


def _fmt(value: Any, spec: str) -> str:
    return "" if value is None else format(value, spec)


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| work | system | step ms | rate | MFU | peak GiB | compile s | first step s | loss 1 | loss N | check |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['work']} | failed: {r['failed'][:160]} |")
            continue
        for system, out in r["systems"].items():
            label = {"sdc": "sdc", "eager": "torch eager", "compile": "torch.compile"}[system]
            if "failed" in out:
                lines.append(f"| {r['work']} | {label} | failed: {out['failed'][:160]} |")
                continue
            ms = f"{out['ms']:.2f}" + (f" ({out['program_ms']:.2f})" if "program_ms" in out else "")
            compile_s = out.get("compile_s") if system == "sdc" else (out["first_step_s"] if system == "compile" else None)
            verdict = r["check"].get(system)
            versus = "" if verdict is None else (
                f"{verdict['first_err']:.1e} / {verdict['last_err']:.1e}" + ("" if verdict["ok"] else " FAIL"))
            lines.append(f"| {r['work']} | {label} | {ms} | {out['rate']:,.0f} {r['unit']} | {out['mfu'] * 100:.3g}% | "
                         f"{_fmt(out['peak_gib'], '.2f')} | {_fmt(compile_s, '.1f')} | "
                         f"{out['first_step_s']:.1f} | {out['losses'][0]:.4f} | {out['losses'][-1]:.4f} | {versus} |")
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="tiny configs (GPT-2 2 layers 64 wide B2 T32, ResNet-50 at 32x32 b2): runs on a CPU too")
    parser.add_argument("--only", choices=("gpt", "resnet"), action="append", help="run only this row (repeatable)")
    parser.add_argument("--systems", default="eager,sdc,compile",
                        help="comma-separated systems to run (eager,sdc,compile); eager is the check's reference")
    parser.add_argument("--dropout", type=float, default=0.0,
                        help="GPT-2's dropout (default 0: a deterministic check; peers_gpu.py used 0.1)")
    parser.add_argument("--steps", type=int, default=5, help="steps before timing; the loss after them is checked")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps before timing (default 3; smoke 0)")
    parser.add_argument("--reps", type=int, default=None, help="timed steps, the median reported (default 10; smoke 1)")
    parser.add_argument("--autotune", choices=("0", "1"), default=None,
                        help="SDC_AUTOTUNE for sdc's first step: 1 tunes each matmul (part of the first-step time), "
                             "0 runs the plan's configuration (default: 1 on a GPU, 0 under the interpreter)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when there is a GPU")
    parser.add_argument("--target", choices=("cuda", "cpu"), default=None,
                        help="sdc's target (default cuda; without a GPU, cuda kernels run under TRITON_INTERPRET=1)")
    parser.add_argument("--warm-caches", action="store_true",
                        help="keep Triton's, Inductor's and sdc's on-disk caches (default: fresh ones, cold compiles)")
    parser.add_argument("--profile", action="store_true",
                        help="after timing, one sdc step under torch.profiler: CUDA time by kernel kind")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the first-step loss and a later one are compared)")
    # under the Triton interpreter a smoke step takes tens of seconds: time few of them
    args.warmup = (0 if args.smoke else 3) if args.warmup is None else args.warmup
    args.reps = (1 if args.smoke else 10) if args.reps is None else args.reps
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if unknown := set(args.systems) - {"eager", "sdc", "compile"}:
        parser.error(f"--systems: unknown {sorted(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    gpu = torch.cuda.is_available()
    args.device = args.device or ("cuda" if gpu else "cpu")
    args.target = args.target or "cuda"
    if args.device == "cuda" and not gpu:
        print("error: --device cuda needs a CUDA GPU", file=sys.stderr)
        return 1
    if args.target == "cuda" and not gpu:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: generated kernels run on numpy
    os.environ["SDC_AUTOTUNE"] = args.autotune or ("1" if gpu else "0")
    if not args.warm_caches:  # compile times measured cold: no kernel or tuning result from an earlier run
        cold = Path(tempfile.mkdtemp(prefix="sdc-train-bench-cold-"))
        for var in ("TRITON_CACHE_DIR", "SDC_AUTOTUNE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
            os.environ[var] = str(cold / var.lower())
    _define_torchvision_schemas()
    import sdc

    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "device": torch.cuda.get_device_name() if gpu else "cpu",
            "torch": torch.__version__, "python": platform.python_version(), "sdc": sdc.__version__,
            "target": args.target, "autotune": os.environ["SDC_AUTOTUNE"], "smoke": args.smoke,
            "interpreter": os.environ.get("TRITON_INTERPRET") == "1", "steps": args.steps, "reps": args.reps}
    log(str(meta))
    makers = {"gpt": _gpt_row, "resnet": _resnet_row}
    rows = []
    with tempfile.TemporaryDirectory(prefix="sdc-train-bench-") as tmp:
        for key in args.only or ("gpt", "resnet"):
            try:
                rows.append(run_row(makers[key](args.smoke, args.dropout), args, Path(tmp)))
            except Exception as e:  # a row that cannot even be built: reported, the next row runs
                log(f"{key} failed:\n{traceback.format_exc()}")
                rows.append({"work": key, "failed": f"{type(e).__name__}: {e}".replace("\n", " ")[:300]})
            reset_memory(args.device)
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
    print()
    print(f"{meta['device']}, torch {meta['torch']}, sdc target {args.target}, autotune {meta['autotune']}; step ms "
          f"median of {args.reps} (sdc: through TrainStep, in parentheses the program alone); MFU vs "
          f"{PEAK_FLOPS / 1e12:.0f} TFLOP/s; compile s: sdc's compile_train, torch.compile's first step; "
          f"check: step-1 loss error vs float64 / step-{args.steps} loss vs eager, over the float64 loss")
    for r in rows:
        for system, v in r.get("check", {}).items():
            print(f"  {r['work']}, {system}: eager's own step-1 error {v['eager_first_err']:.1e}; bounds "
                  f"{v['bounds'][0]:.1e} / {v['bounds'][1]:.1e}; loss went down: {v['decreased']}")
    print("\n".join(table(rows)))
    failed = any("failed" in r or any("failed" in s for s in r["systems"].values())
                 or not all(v["ok"] for v in r["check"].values()) for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
