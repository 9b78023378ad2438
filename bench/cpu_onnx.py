"""sdc's CPU path against onnxruntime and IREE's CPU backend, on the light ONNX zoo and on real exported models.

    python bench/cpu_onnx.py [--runs 20] [--seconds 4] [--max-runs 200] [--threads 2]
                             [--models resnet50,bert,...] [--engines ...] [--cache DIR] [--json OUT]

Models:
- the nine light ONNX zoo models (`MODELS`; the files the `onnx` package carries, where
  test/py/test_onnx_frontend.py finds them), each twice: as shipped, and a copy with random weights
  (`<name>-rw`). The shipped files hold their weights as `ConstantOfShape` splats, which IREE folds
  into its kernels; the copy gives every weight random values (seeded, the same file for every
  engine), so no engine can specialize on them;
- the real-model suite of test/py/test_exported_models.py (`EXPORTED`): the same Hugging Face and
  torchvision models from small configs with random weights, exported by the TorchScript exporter
  with the test's own helpers, run at the largest shape that test uses.

Engines: onnxruntime (CPUExecutionProvider), sdc (`sdc.compile`, target cpu) and IREE 3.13
(`iree-import-onnx` on a copy converted to opset 17 by onnx.version_converter, then `iree-compile`
with `IREE_FLAGS`, run on the `local-task` driver). Each engine and model runs in its own worker
process (its peak memory is its own), all with `--threads` threads, OMP_WAIT_POLICY=PASSIVE set before
torch loads (spin-waiting OpenMP threads steal the cores from the others), except sdc's worker: its
OpenMP threads spin `--sdc-spin` iterations (GOMP_SPINCOUNT, default 30000: some tens of microseconds)
before they sleep, as onnxruntime's pool threads spin after each op, and its thread gate
(sdc/runtime/gate.py) sets its limits for that. With the other workers stopped while one is timed
(below), the spin takes no core from another engine. After loading and two
warm-up calls, the runs interleave: one call of each engine in turn, each round starting with the next
engine, so load changes on a shared machine hit every engine alike; the table reports medians. A model
runs at least `--runs` rounds, and more (up to `--max-runs`) until the timed calls of its rounds add up
to `--seconds`: a 0.2 ms transformer gets 200 rounds where a 200 ms VGG gets 20, so a burst of load
moves a fast model's median as little as a slow one's (with 20 rounds the 0.2 ms models moved by
0.3x between full runs; each model's count is the table's last column). While one engine is timed, the other
workers are stopped (SIGSTOP, and SIGCONT before their own turn): onnxruntime's pool threads spin-wait
after each run, and a worker waiting for its next turn beside the timed one made sdc's AlexNet take
30.4 ms instead of the 17.7 ms it takes alone (2 threads, 2026-12-03); onnxruntime's own time did not
change with the others stopped. Every engine gets the same inputs
(random, seeded). An engine that cannot import, compile or run a model gets a `failed: <one line>`
cell; the bench goes on. The load average (as `uptime` prints it) is reported before and after.
Under the table, per model, what ran in sdc: the launch steps per kernel plan.json chose and the op
calls a timed call made in each kernel, fallbacks included (sdc/runtime/counters.py).
IREE's compiled modules are cached in `--cache` (keyed by the model's bytes and the flags).
"""

from __future__ import annotations

import os

# Before anything imports torch (here, in the exporters, or in a worker): see the module docstring. A
# worker given a spin count (sdc's, `engine_env`) spins instead.
if "GOMP_SPINCOUNT" not in os.environ:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import hashlib
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SECONDS = 4.0  # a model's rounds go on until their timed calls add up to this (fast models: more runs)
MAX_RUNS = 200
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
          "squeezenet", "vgg19", "zfnet512"]
EXPORTED = ["gpt2_with_cache", "bert", "distilbert", "clip_text", "t5", "vit", "segmentation"]
ENGINES = ["onnxruntime", "sdc", "iree"]
IREE_FLAGS = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
              "--iree-llvmcpu-target-cpu=host"]
IREE_OPSET = 17  # the lowest opset IREE's ONNX importer takes
ROOT = Path(__file__).resolve().parent.parent
WARMUP = 2
SDC_SPIN = 30000  # sdc's worker: GOMP_SPINCOUNT, OMP_WAIT_POLICY unset (engine_env)


# ---------------------------------------------------------------- the models


@dataclass
class Model:
    name: str
    path: Path  # the ONNX file every engine loads
    feeds: Path  # .npz of the inputs every engine runs on


def light_zoo_dir() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _light_feeds(model, out: Path) -> None:
    import numpy as np
    from onnx.backend.test.runner import Runner

    inits = {i.name for i in model.graph.initializer}
    feeds = {x.name: Runner.generate_dummy_data(x, seed=0, random=True)
             for x in model.graph.input if x.name not in inits}
    np.savez(out, **feeds)


def random_weights(model, seed: int = 0):
    """A copy of `model` whose `ConstantOfShape` weights are random initializers. Scaled so activations
    stay finite through fifty layers: 1/sqrt(fan-in) for a matrix or filter, (0.5, 1.5) for a vector
    (a bias, a batch-norm scale, mean or variance: positive, so a variance stays one)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    rng = np.random.default_rng(seed)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    consts = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    keep = []
    for node in graph.node:
        shape = consts.get(node.input[0]) if node.op_type == "ConstantOfShape" and node.input else None
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        dtype = numpy_helper.to_array(value).dtype if value is not None else np.float32
        if shape is None or dtype != np.float32:
            keep.append(node)
            continue
        dims = [int(d) for d in shape.reshape(-1)]
        if len(dims) >= 2:
            w = rng.standard_normal(dims) / np.sqrt(max(1, int(np.prod(dims[1:]))))
        else:
            w = rng.uniform(0.5, 1.5, dims)
        graph.initializer.append(numpy_helper.from_array(w.astype(np.float32), node.output[0]))
    del graph.node[:]
    graph.node.extend(keep)
    copy.ir_version = max(copy.ir_version, 4)  # IR 3 wants every initializer listed as a graph input too
    return copy


def light_models(names: list[str], work: Path) -> list[Model]:
    import onnx

    out = []
    for name in names:
        path = light_zoo_dir() / f"light_{name}.onnx"
        model = onnx.load(str(path))
        feeds = work / f"{name}.npz"
        _light_feeds(model, feeds)
        out.append(Model(name, path, feeds))
        rw = work / f"{name}-rw.onnx"
        onnx.save(random_weights(model), str(rw))
        out.append(Model(f"{name}-rw", rw, feeds))
    return out


def exported_models(names: list[str], work: Path) -> list[Model]:
    """The real-model suite, exported with test/py/test_exported_models.py's own cases and exporter."""
    import numpy as np
    import torch

    sys.path.insert(0, str(ROOT / "test" / "py"))
    import conftest  # noqa: F401  (torchvision's op schemas, before transformers imports torchvision)
    import test_exported_models as suite

    out = []
    for name in names:
        torch.manual_seed(0)
        suite.RNG = np.random.default_rng(0)
        case = suite.MODELS[name]()
        path = work / f"{name}.onnx"
        suite._export(case, "torchscript", path)
        feeds = work / f"{name}.npz"
        np.savez(feeds, **case.make(**case.sizes[-1]))
        out.append(Model(name, path, feeds))
    return out


# ---------------------------------------------------------------- one engine on one model (a worker process)


def _status_kb(field: str) -> int:
    """A /proc/self/status memory figure: `VmRSS` (resident now) or `VmHWM` (its peak). Not ru_maxrss,
    which a worker inherits from the parent that forked it (the parent holds torch and the exporters)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _iree_module(path: Path, cache: Path):
    """Compile (or take from the cache) the model for IREE's CPU backend; returns the vmfb path."""
    import onnx
    from onnx import version_converter

    digest = hashlib.sha256(path.read_bytes() + " ".join(IREE_FLAGS).encode()).hexdigest()[:24]
    vmfb = cache / f"{path.stem}-{digest}.vmfb"
    if vmfb.exists():
        return vmfb
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model = onnx.load(str(path))
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), IREE_OPSET)
        if opset < IREE_OPSET:
            model = version_converter.convert_version(model, IREE_OPSET)
        converted, mlir = Path(tmp) / "model.onnx", Path(tmp) / "model.mlir"
        onnx.save(model, str(converted))
        bin_dir = Path(sys.executable).parent
        for cmd in ([str(bin_dir / "iree-import-onnx"), str(converted), "-o", str(mlir)],
                    [str(bin_dir / "iree-compile"), str(mlir), "-o", str(vmfb) + ".part", *IREE_FLAGS]):
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if "error" in ln.lower()]
                raise RuntimeError(f"{Path(cmd[0]).name}: " + (lines[0] if lines else f"exit {proc.returncode}"))
    os.replace(str(vmfb) + ".part", vmfb)
    return vmfb


def _load(engine: str, path: Path, feeds: dict, threads: int, cache: Path):
    """Load `path` for `engine`; returns a function that runs one call to completion."""
    if engine == "onnxruntime":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        return lambda: sess.run(None, feeds)
    if engine == "sdc":
        import torch

        torch.set_num_threads(threads)
        import sdc

        exe = sdc.compile(str(path))

        def call():
            exe(**feeds)

        call.counters = exe.counters  # what ran (sdc/runtime/counters.py): the table's footer
        return call
    if engine == "iree":
        import onnx
        import iree.runtime as rt

        vmfb = _iree_module(path, cache)
        # One worker per thread, exactly (the default counts physical cores, capped by a max_group_count).
        rt.flags.parse_flags(f"--task_topology_group_count={threads}")
        module = rt.load_vm_flatbuffer_file(str(vmfb), driver="local-task")
        entry = next(n for n in module.vm_module.function_names if not n.startswith("__") and "$" not in n)
        function = getattr(module, entry)
        graph = onnx.load(str(path), load_external_data=False).graph
        inits = {i.name for i in graph.initializer}
        args = [feeds[i.name] for i in graph.input if i.name not in inits]

        def run():
            out = function(*args)
            for o in out if isinstance(out, (tuple, list)) else [out]:
                o.to_host()  # wait for the results, as the other engines do

        return run
    raise ValueError(f"unknown engine {engine!r}")


def _load_engine(engine: str) -> None:
    """Load the engine's libraries (sdc's compiler loads most of its modules on its first model): one tiny
    model through onnxruntime and sdc."""
    if engine == "iree":
        import iree.runtime  # noqa: F401
        return
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    tiny = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "tiny", [x], [y]),
                             opset_imports=[helper.make_opsetid("", 17)])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tiny.onnx"
        onnx.save(tiny, str(path))
        _load(engine, path, {"x": np.ones((1, 4), np.float32)}, 1, Path(tmp))()


def worker(engine: str, path: str, feeds_path: str, threads: int, cache: str) -> int:
    """Load, warm up, print `ready`; then one timed call per `run` line on stdin; `quit` prints the peak."""
    import numpy as np

    def say(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    feeds = dict(np.load(feeds_path))
    _load_engine(engine)
    base = _status_kb("VmRSS")  # after the engine's own libraries: the peak is what the model adds
    try:
        t0 = time.perf_counter()
        run = _load(engine, Path(path), feeds, threads, Path(cache))
        prepare = time.perf_counter() - t0
        for _ in range(WARMUP):
            run()
        counters = getattr(run, "counters", None)
        if counters is not None:
            counters.clear()  # (the timed calls' kernels)
    except Exception as e:  # the cell says why; the bench goes on
        say({"error": (f"{type(e).__name__}: {e}".strip().splitlines() or ["failed"])[0][:160]})
        return 0
    say({"ready": True, "prepare_s": prepare})
    for line in sys.stdin:
        if line.strip() != "run":
            break
        t = time.perf_counter()
        run()
        say({"ms": 1e3 * (time.perf_counter() - t)})
    done = {"peak_mb": (_status_kb("VmHWM") - base) / 1024}
    if counters is not None and counters.calls:
        from sdc.runtime.counters import kernel_totals

        runs = counters.to_json()
        planned, ran = kernel_totals(runs)
        done["kernels"] = {"planned": planned, "ran_per_call": {k: round(n / runs["calls"], 2) for k, n in ran.items()},
                           "fallback_steps": sorted(sid for sid, st in runs["steps"].items()
                                                    if st["fallbacks"] or st["loaded"] != st["planned"])}
    say(done)
    return 0


# ---------------------------------------------------------------- the parent: interleaved runs


@dataclass
class Worker:
    engine: str
    proc: subprocess.Popen | None = None
    stderr: Any = None  # a temporary file: a pipe nobody reads would block a worker that logs much
    result: dict = field(default_factory=dict)
    times: list[float] = field(default_factory=list)

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.stderr.seek(0)
            err = self.stderr.read().decode(errors="replace").strip().splitlines()
            return {"error": (err[-1] if err else f"worker exited {self.proc.wait()}")[:160]}
        return json.loads(line)

    def send(self, word: str) -> None:
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()

    def pause(self) -> None:
        """Stop the whole worker process (SIGSTOP): none of its threads can take a core."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)


def engine_env(engine: str, sdc_spin: int) -> dict[str, str]:
    """The environment of an engine's worker: this process's (OMP_WAIT_POLICY=PASSIVE, module
    docstring), except sdc's with `sdc_spin` > 0: the policy unset and GOMP_SPINCOUNT=`sdc_spin`, so
    torch's OpenMP threads spin that long before they sleep (sdc/runtime/gate.py measures both)."""
    env = dict(os.environ)
    if engine == "sdc" and sdc_spin > 0:
        env.pop("OMP_WAIT_POLICY", None)
        env["GOMP_SPINCOUNT"] = str(sdc_spin)
    return env


def measure(model: Model, engines: list[str], runs: int, threads: int, cache: Path,
            sdc_spin: int = 0, seconds: float = 0.0, max_runs: int = 0) -> dict[str, dict]:
    """Each engine's result on `model`: median_ms, runs, prepare_s, peak_mb, or an error. At least `runs`
    rounds; more, up to `max_runs`, until the timed calls of the round add up to `seconds` (module
    docstring). Round r starts with engine r mod n, so no engine always runs right after another."""
    workers = [Worker(e) for e in engines]
    for w in workers:  # loaded one after the other, so their compiles do not compete
        w.stderr = tempfile.TemporaryFile()
        w.proc = subprocess.Popen([sys.executable, __file__, "--worker", w.engine, str(model.path), str(model.feeds),
                                   str(threads), str(cache)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=w.stderr, text=True, env=engine_env(w.engine, sdc_spin))
        w.result = w.read()
        if "error" in w.result:
            w.proc.kill()
    live = [w for w in workers if "error" not in w.result]
    for w in live:
        w.pause()
    rounds, timed = 0, 0.0
    while rounds < runs or (rounds < max_runs and timed < seconds):
        k = rounds % len(workers)
        rounds += 1
        for w in workers[k:] + workers[:k]:
            if "error" in w.result:
                continue
            w.resume()  # the others stay stopped while it is timed (module docstring)
            w.send("run")
            reply = w.read()
            w.pause()
            if "ms" in reply:
                w.times.append(reply["ms"])
                timed += reply["ms"] / 1e3
            else:
                w.result = reply
    for w in live:
        w.resume()
    for w in workers:
        if "error" not in w.result:
            w.send("quit")
            w.result.update(w.read())
            w.result["median_ms"] = statistics.median(w.times)
            w.result["runs"] = len(w.times)
        w.proc.wait()
        w.stderr.close()
    return {w.engine: w.result for w in workers}


def _load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _cell(r: dict) -> str:
    if "error" in r:
        return f"failed: {r['error'][:90]}"
    return f"{r['median_ms']:.1f}"


def _ratio(a: dict, b: dict) -> str:
    if "error" in a or "error" in b:
        return "-"
    return f"{a['median_ms'] / b['median_ms']:.2f}x"


def table(rows: list[tuple[str, dict[str, dict]]], engines: list[str]) -> list[str]:
    short = {"onnxruntime": "ort", "sdc": "sdc", "iree": "iree"}
    head = ["model", *(f"{short[e]} ms" for e in engines)]
    ratios = [(f"sdc/{short[e]}", e) for e in engines if e != "sdc"] if "sdc" in engines else []
    head += [name for name, _ in ratios]
    head.append("peak MB " + "/".join(short[e] for e in engines))
    head.append("runs")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, res in rows:
        cells = [name, *(_cell(res[e]) for e in engines), *(_ratio(res["sdc"], res[e]) for _, e in ratios)]
        cells.append("/".join(f"{res[e]['peak_mb']:.0f}" if "peak_mb" in res[e] else "-" for e in engines))
        cells.append(str(max((r.get("runs", 0) for r in res.values()), default=0)))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def kernel_footer(rows: list[tuple[str, dict[str, dict]]]) -> list[str]:
    """Per model, what ran in sdc (plan.json's kernel choices and the counters of the timed calls):
    the launch steps per planned kernel, the op calls per call per kernel that ran, and the steps that
    fell back (sdc/runtime/counters.py)."""
    lines = []
    for name, res in rows:
        kernels = (res.get("sdc") or {}).get("kernels")
        if not kernels:
            continue
        planned = ", ".join(f"{k} {n}" for k, n in sorted(kernels["planned"].items(), key=lambda kv: -kv[1]))
        ran = ", ".join(f"{k} {n:g}" for k, n in sorted(kernels["ran_per_call"].items(), key=lambda kv: -kv[1]))
        fell = kernels["fallback_steps"]
        lines.append(f"- {name}: steps {planned}; op calls a call {ran}; "
                     + (f"fell back: {', '.join(fell[:8])}{' ...' if len(fell) > 8 else ''}" if fell else "no fallbacks"))
    return ["", "sdc kernels (planned steps; op calls a call that ran in each):", *lines] if lines else []


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        engine, path, feeds, threads, cache = argv[1:6]
        return worker(engine, path, feeds, int(threads), cache)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="timed calls per engine and model, at least (default 20)")
    parser.add_argument("--seconds", type=float, default=SECONDS,
                        help=f"more rounds until a model's timed calls add up to this (default {SECONDS})")
    parser.add_argument("--max-runs", type=int, default=MAX_RUNS, help=f"rounds per model at most (default {MAX_RUNS})")
    parser.add_argument("--threads", type=int, default=2, help="threads per engine (default 2)")
    parser.add_argument("--models", default=",".join(MODELS + EXPORTED),
                        help="comma-separated: light zoo names (each also runs as <name>-rw) and real-model names")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "sdc-bench"),
                        help="where IREE's compiled modules are kept between runs")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--sdc-spin", type=int, default=SDC_SPIN,
                        help=f"GOMP_SPINCOUNT of sdc's worker, with OMP_WAIT_POLICY unset there (default {SDC_SPIN}; "
                             "0: PASSIVE, as the other engines)")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    engines = [e for e in args.engines.split(",") if e]
    unknown = [n for n in names if n not in MODELS and n not in EXPORTED] + [e for e in engines if e not in ENGINES]
    if unknown or args.runs < 1 or args.threads < 1 or args.sdc_spin < 0 or args.seconds < 0:
        parser.error(f"unknown model or engine {unknown}" if unknown
                     else "--runs and --threads must be >= 1, --sdc-spin and --seconds >= 0")
    before = _load_average()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        models = light_models([n for n in names if n in MODELS], work)
        models += exported_models([n for n in names if n in EXPORTED], work)
        for model in models:
            res = measure(model, engines, args.runs, args.threads, Path(args.cache), args.sdc_spin, args.seconds,
                          max(args.runs, args.max_runs))
            rows.append((model.name, res))
            print(f"{model.name}: " + "  ".join(f"{e} {json.dumps(r)}" for e, r in res.items()), flush=True)
    after = _load_average()
    if args.json:
        Path(args.json).write_text(json.dumps({"started": started, "threads": args.threads, "runs": args.runs,
                                               "seconds": args.seconds, "max_runs": args.max_runs,
                                               "sdc_spin": args.sdc_spin,
                                               "load_before": before, "load_after": after,
                                               "results": dict(rows)}, indent=1))
    print()
    print(f"CPU ({os.cpu_count()} cores), {args.threads} threads per engine, medians of interleaved runs (at least "
          f"{args.runs}, up to {args.max_runs} until {args.seconds:g} s of calls), "
          f"{started}; sdc's OpenMP {'spin ' + str(args.sdc_spin) if args.sdc_spin else 'PASSIVE'}; load average (1, 5, 15 min) before: {before}, after: {after}")
    for line in table(rows, engines) + kernel_footer(rows):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
