"""sdc: compile a model into an artifact, import a model into sdc IR, run and inspect an artifact.

    sdc compile MODEL [-o OUT.sdc] [--target TARGET] [--input-shape NAME=DIMS|SYMBOL=LO..HI ...] [--dump-ir DIR]
                      [--params FILE] [--mesh dp=2,tp=2] [--explain layout|sharding] [--weights none [--weight-seed N]]
    sdc run ARTIFACT [--input NAME=FILE.npy ...] [--output-dir DIR] [--dim NAME=SIZE ...] [--seed N]
                     [--repeat N] [--warmup N] [--profile] [--trace FILE]
    sdc inspect ARTIFACT
    sdc compile MODEL.onnx --train --loss cross_entropy|mse [--optimizer sgd|adam|adamw] [--lr RATE]
                      [--memory-budget BYTES] [--precision bf16|fp16] -o STEP.sdc
    sdc train STEP.sdc --input NAME=FILE.npy ... [--steps N] [--lr RATE] [--no-save]
    sdc import MODEL [-o OUT.mlir] [--input-shape NAME=DIMS ...] [--params OUT.safetensors] [--mesh dp=2]

MODEL is an ONNX file, or an `.mlir` file of sdc IR whose parameters come from `--params`
(.safetensors or .npz). User errors print `error: ...` and exit 1; a bad command line exits
2; `--debug` (or SDC_DEBUG=1) shows tracebacks. `sdc run` and `sdc inspect` need no MLIR.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence, TextIO

from sdc.cli.common import ArgumentParser, UsageError, add_version_flag, run_main, sdc_version_text
from sdc.diagnostics import SdcError
from sdc.fmt import format_bytes
from sdc.target import DEFAULT_TARGET, TARGETS

if TYPE_CHECKING:
    from sdc.options import CompileOptions

_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
BATCH_LIKE = {"b", "n", "bs", "batch", "batch_size", "batchsize", "nbatch"}
DEFAULT_BATCH_SIZE = 1
DEFAULT_DIM_SIZE = 16


# ---------------------------------------------------------------- command-line values


def parse_dims(text: str, what: str) -> list[int | str]:
    """`1,3,224,224` or `B,3,H,W`: ints and symbol names."""
    dims: list[int | str] = []
    for token in (t.strip() for t in text.split(",")):
        if token.isdigit():
            dims.append(int(token))
        elif _SYMBOL.match(token):
            dims.append(token)
        else:
            raise UsageError(f"{what}: '{token}' is not a size or a symbol name (dims look like 1,3,224,224 "
                             "or B,3,H,W)")
    return dims


def split_assignment(text: str, option: str, first: bool = False) -> tuple[str, str]:
    """NAME=VALUE, split at the first '=' (`first`) or the last one."""
    if "=" not in text:
        raise UsageError(f"{option} expects NAME=VALUE, found '{text}'")
    name, value = text.split("=", 1) if first else text.rsplit("=", 1)
    if not name or not value:
        raise UsageError(f"{option} expects NAME=VALUE, found '{text}'")
    return name, value


def safe_file_name(name: str) -> str:
    """An output name as a file name: letters, digits, . _ - only, never hidden, never empty."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")
    return cleaned or "output"


# ---------------------------------------------------------------- progress


class Progress:
    """Compile stages on one rewritten stderr line, only when stderr is a terminal."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.enabled = stream.isatty()
        self.started = time.perf_counter()

    def __call__(self, message: str) -> None:
        if self.enabled:
            self.stream.write(f"\r\x1b[K[{time.perf_counter() - self.started:6.1f}s] {message}")
            self.stream.flush()

    def done(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


# ---------------------------------------------------------------- sdc compile


def parse_input_shape(item: str) -> tuple[str, list[int | str] | int | str]:
    """--input-shape NAME=DIMS (an input's dims), SYMBOL=LO..HI (a range: 1..64, 8.., ..64) or SYMBOL=N."""
    name, value = split_assignment(item, "--input-shape", first=True)
    if ".." in value:
        lo, hi = value.split("..", 1)
        if not (lo.isdigit() or not lo) or not (hi.isdigit() or not hi) or not (lo or hi) or not _SYMBOL.match(name):
            raise UsageError(f"--input-shape {item}: a range is SYMBOL=LO..HI with non-negative integers "
                             "(B=1..64, B=8.., B=..64)")
        if lo and hi and int(lo) > int(hi):
            raise UsageError(f"--input-shape {item}: the range is empty")
        return name, value
    if value.isdigit():
        return name, int(value)
    return name, parse_dims(value, f"--input-shape {name}")


def compile_options(args) -> "CompileOptions":
    """The one CompileOptions of `sdc compile`'s command line (malformed values: UsageError, exit 2;
    values the options refuse, such as an unknown target: SdcError, exit 1)."""
    from sdc.options import CompileOptions

    shapes: dict[str, list[int | str] | int | str] = {}
    for item in args.input_shape:
        name, value = parse_input_shape(item)
        shapes[name] = value
    mesh = parse_mesh(args.mesh) if args.mesh else None
    if args.weight_seed is not None and args.weights != "none":
        raise UsageError("--weight-seed needs --weights none (it seeds the synthesized weights)")
    return CompileOptions(target=args.target, mesh=mesh, input_shapes=shapes, precision=args.precision,
                          weights=args.weights, weight_seed=args.weight_seed or 0,
                          dump_ir=args.dump_ir, explain=args.explain)


def compile_command(args, out: TextIO) -> int:
    options = compile_options(args)
    from sdc.cli.train import check_compile_flags, compile_train_command

    if check_compile_flags(args):  # --train: a training step, saved as a checkpoint (sdc/cli/train.py)
        if options.weights == "none":
            raise SdcError("--weights none is for inference artifacts: a training step's parameters are its "
                           "state, initialized from the model (drop --weights none or --train)")
        return compile_train_command(args, options, out)
    from sdc.compiler import build_artifact, check_compilable, import_model

    check_compilable(options)
    output = Path(args.output) if args.output else Path(Path(args.model).stem + ".sdc")
    progress = Progress(sys.stderr)
    started = time.perf_counter()
    try:
        progress(f"importing {args.model}")
        module, params, provenance = import_model(args.model, input_shapes=options.input_shapes_dict(),
                                                  params_file=args.params, mesh=options.mesh_dict())
        path = build_artifact(module, params, output, options, provenance=provenance, progress=progress)
    finally:
        progress.done()
    from sdc.runtime.artifact import read_artifact

    artifact = read_artifact(path)
    kernels = sum(1 for r in artifact.plan["ranks"] for s in r["steps"] if s.get("kind") == "launch")
    weights = sum(w.nbytes for w in artifact.weights_info(0).values())
    made = artifact.synthesized_info(0)
    synthesized = (f", {len(made)} weights ({format_bytes(sum(w.nbytes for w in made.values()))}) synthesized "
                   f"at load from seed {artifact.weight_seed}") if artifact.weight_seed is not None else ""
    out.write(f"wrote {path} ({kernels} kernels, {format_bytes(weights)} of weights{synthesized}) "
              f"in {time.perf_counter() - started:.2f} s\n")
    if options.explain == "layout":
        from sdc.cli.layout_report import format_layout_report, layout_report

        out.write(f"layout and fusion (target {artifact.manifest['target']})\n")
        out.write(format_layout_report(layout_report(artifact.plan)))
    if options.explain == "sharding":
        from sdc.cli.sharding_report import format_sharding_report

        out.write(format_sharding_report(module, artifact.manifest))
    return 0


def parse_mesh(text: str):
    from sdc.dialect.mesh import Mesh, MeshError

    try:
        return Mesh.parse(text)
    except MeshError as e:
        raise UsageError(f"--mesh {text}: {e}") from None


# ---------------------------------------------------------------- sdc import


def import_command(args, out: TextIO) -> int:
    """Write a model's imported IR (the text sdc-opt and `sdc compile` read), and its weights with --params."""
    shapes: dict[str, list[int | str]] = {}
    for item in args.input_shape:
        name, value = parse_input_shape(item)
        if not isinstance(value, list):
            raise UsageError(f"--input-shape {item}: sdc import takes an input's dims (x=B,3,224,224); a symbol's "
                             "value or range is for sdc compile (or sdc-opt's sdc-shape-constraints pass)")
        shapes[name] = value
    mesh = parse_mesh(args.mesh) if args.mesh else None
    if args.params and Path(args.params).suffix not in (".safetensors", ".npz"):
        raise UsageError(f"--params {args.params}: the parameter file must be .safetensors or .npz")
    from sdc.frontend import import_model
    from sdc.frontend.params import write_params

    module, params, _ = import_model(args.model, input_shapes=shapes or None, mesh=mesh.as_dict() if mesh else None)
    text = module.operation.get_asm(enable_debug_info=args.print_debuginfo)
    if args.output == "-":
        out.write(text)
    else:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as e:
            raise SdcError(f"cannot write '{args.output}': {e.strerror}") from None
    if args.params:
        write_params(params, args.params)
    elif params:
        count = f"{len(params)} parameter{'s' if len(params) != 1 else ''}"
        sys.stderr.write(f"note: the IR names {count} whose values are not written (--params FILE.safetensors "
                         "writes them)\n")
    return 0


# ---------------------------------------------------------------- sdc run


def parse_count(text: str, option: str, minimum: int) -> int:
    """A count option's value (--repeat, --warmup): an integer of at least `minimum`, else a usage error."""
    value = text.strip()
    if not value.isdigit() or int(value) < minimum:
        raise UsageError(f"{option} expects an integer >= {minimum}, found '{text}'")
    return int(value)


def run_command(args, out: TextIO) -> int:
    repeat = parse_count(args.repeat, "--repeat", 1)
    warmup = parse_count(args.warmup, "--warmup", 0)
    files = dict(split_assignment(item, "--input", first=True) for item in args.input)
    dims: dict[str, int] = {}
    for item in args.dim:
        name, size = split_assignment(item, "--dim")
        if not size.isdigit():
            raise UsageError(f"--dim {name}: size must be a non-negative integer, found '{size}'")
        dims[name] = int(size)
    import numpy as np
    import torch

    from sdc.runtime import load

    started = time.perf_counter()
    exe = load(args.artifact, device=args.device)
    load_time = time.perf_counter() - started
    if exe.rank != 0:  # under torchrun every rank runs; rank 0 alone reports and writes the outputs
        import io

        out = io.StringIO()
    out.write(f"loaded {args.artifact} in {format_seconds(load_time)} ({exe.kernel_count} kernels)\n")
    if exe.artifact.weight_seed is not None:
        out.write(f"weights synthesized from seed {exe.artifact.weight_seed} (torch CPU generator, then moved to "
                  f"{exe.device})\n")
    given = {name: read_npy(file, name) for name, file in files.items()}
    symbols = {s for t in exe.inputs for s in t.symbols}
    unknown = sorted(set(dims) - symbols)
    if unknown:
        raise SdcError(f"--dim {unknown[0]}: no input has a symbolic dim named '{unknown[0]}' "
                       f"(symbols: {', '.join(sorted(symbols)) or 'none'})")
    names = {t.name for t in exe.inputs}
    for name in given:
        if name not in names:
            raise SdcError(f"--input {name}: unknown input '{name}' (inputs: {', '.join(sorted(names)) or 'none'})")
    rng = np.random.default_rng(args.seed)
    sizes = symbol_sizes(exe, given, dims)
    inputs: dict[str, torch.Tensor] = {}
    for info in exe.inputs:
        if info.name in given:
            inputs[info.name] = _as_input(given[info.name], info)
            out.write(f"input  {info.name}  {info.dtype}{list(inputs[info.name].shape)}  from {files[info.name]}\n")
        else:
            shape = [_dim_size(d, i, sizes) for i, d in enumerate(info.shape)]
            inputs[info.name] = random_tensor(rng, info.dtype, shape)
            out.write(f"input  {info.name}  {info.dtype}{shape}  random\n")
    if exe.device.type != "cpu":
        inputs = {name: t.to(exe.device) for name, t in inputs.items()}
    profiler = None
    if args.profile or args.trace:
        from sdc.runtime.profile import Profiler

        profiler = Profiler(rank=exe.rank)
    times, outputs = timed_runs(exe, inputs, warmup, repeat, profiler)
    arrays = [(t.float() if t.dtype == torch.bfloat16 else t).cpu().numpy() for t in outputs]
    for info, array in zip(exe.outputs, arrays):
        out.write(f"output {info.name}  {info.dtype}{list(array.shape)}  {summarize(array)}\n")
    if args.output_dir:
        for path, array in zip(write_outputs(Path(args.output_dir), exe.outputs, arrays), arrays):
            out.write(f"wrote {path}\n")
    warmed = f" after {warmup} warm-up run{'s' if warmup != 1 else ''}" if warmup else ""
    if len(times) == 1:
        out.write(f"ran in {format_seconds(times[0])}{warmed}\n")
    else:
        out.write(f"ran {len(times)} times{warmed}: {format_statistics(times)}\n")
    if profiler is not None:
        write_profile(args, out, profiler)
    if args.profile:
        write_counters(args, out, exe)
    return 0


def write_counters(args, out: TextIO, exe) -> None:
    """--profile: what ran, per kernel, and each step that fell back (sdc.runtime.counters); with
    --output-dir also DIR/runs.json, which `sdc inspect --runs` reads."""
    from sdc.runtime.counters import RUNS_FILE, format_counters

    counters = exe.counters
    out.write(format_counters(counters.to_json()))
    if args.output_dir:
        path = Path(args.output_dir) / RUNS_FILE
        try:
            counters.write(path)
        except OSError as e:
            raise SdcError(f"cannot write the run counters '{path}': {e.strerror}") from None
        out.write(f"wrote {path} (sdc inspect ARTIFACT --runs {path})\n")


def timed_runs(exe, inputs: dict, warmup: int, repeat: int, profiler) -> tuple[list[float], list]:
    """`warmup` untimed calls, then `repeat` timed ones (profiled when `profiler` is set): the times
    in seconds and the last call's outputs. A CUDA device is synchronized before each clock read."""
    import torch

    def sync() -> None:
        if exe.device.type == "cuda":
            torch.cuda.synchronize(exe.device)

    outputs: list = []
    for _ in range(warmup):
        outputs = exe(**inputs)
    sync()
    exe.counters.clear()  # (what ran counts the timed calls)
    exe.profiler = profiler
    times = []
    try:
        for _ in range(repeat):
            started = time.perf_counter()
            outputs = exe(**inputs)
            sync()
            times.append(time.perf_counter() - started)
    finally:
        exe.profiler = None
    return times, outputs


def format_statistics(times: list[float]) -> str:
    """mean, median, p90 (nearest rank), standard deviation (sample), min and max of run times."""
    import math
    import statistics

    ordered = sorted(times)
    p90 = ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]
    return (f"mean {format_seconds(statistics.fmean(ordered))}, median {format_seconds(statistics.median(ordered))}, "
            f"p90 {format_seconds(p90)}, stddev {format_seconds(statistics.stdev(ordered))}, "
            f"min {format_seconds(ordered[0])}, max {format_seconds(ordered[-1])}")


def write_profile(args, out: TextIO, profiler) -> None:
    """--profile: the time per kernel group; --trace FILE (or, with --profile and --output-dir,
    DIR/trace.json): the Chrome trace."""
    from sdc.runtime.profile import format_profile

    rows = profiler.summary()
    if args.profile:
        total = sum(r.total_s for r in rows) / max(profiler.runs, 1)
        out.write(f"profile: {len(rows)} steps, {format_seconds(total)} per run in steps, "
                  f"mean of {profiler.runs} run{'s' if profiler.runs != 1 else ''}\n")
        out.write(format_profile(rows, profiler.runs))
    path = Path(args.trace) if args.trace else Path(args.output_dir) / "trace.json" if args.output_dir else None
    if path is None:
        return
    try:
        if path.parent != Path(""):
            path.parent.mkdir(parents=True, exist_ok=True)
        profiler.write_chrome_trace(path)
    except OSError as e:
        raise SdcError(f"cannot write the trace '{path}': {e.strerror}") from None
    out.write(f"wrote trace {path} (Chrome trace format: open it in https://ui.perfetto.dev)\n")


def symbol_sizes(exe, given: dict, chosen: dict[str, int]) -> dict[str, int]:
    """Sizes for the symbolic dims of random inputs: --dim and the given inputs fix some, the
    defaults fill the rest, then they are adjusted to pass the artifact's guards."""
    from sdc.runtime.signature import fit_to_guards

    sizes = dict(chosen)
    fixed = set(chosen)
    for info in exe.inputs:
        array = given.get(info.name)
        if array is None:
            continue
        for d, dim in enumerate(info.shape):
            if isinstance(dim, str) and dim != "?" and d < getattr(array, "ndim", 0):
                sizes.setdefault(dim, int(array.shape[d]))
                fixed.add(dim)
    for info in exe.inputs:
        for i, d in enumerate(info.shape):
            _dim_size(d, i, sizes)
    return fit_to_guards(sizes, exe.guards, fixed)


def _dim_size(dim, index: int, chosen: dict[str, int]) -> int:
    if isinstance(dim, int):
        return dim
    if dim in chosen:
        return chosen[dim]
    batch_like = dim.lower() in BATCH_LIKE or "batch" in dim.lower() or (dim == "?" and index == 0)
    size = DEFAULT_BATCH_SIZE if batch_like else DEFAULT_DIM_SIZE
    if dim != "?":
        chosen[dim] = size  # a symbol gets one size everywhere it appears
    return size


def read_npy(file: str, name: str):
    import numpy as np

    try:
        return np.load(file, allow_pickle=False)
    except FileNotFoundError:
        raise SdcError(f"--input {name}: cannot open '{file}': no such file") from None
    except (OSError, ValueError) as e:
        raise SdcError(f"--input {name}: cannot read '{file}' as a .npy array: {e}") from None


def _as_input(array, info):
    import numpy as np
    import torch

    if not isinstance(array, np.ndarray):
        raise SdcError(f"--input {info.name}: expected one array in a .npy file")
    if info.dtype == "bf16" and array.dtype == np.float32:  # numpy has no bf16: .npy files carry f32
        return torch.from_numpy(array).to(torch.bfloat16)
    if not array.flags.writeable:
        array = array.copy()
    return torch.from_numpy(array)


def random_tensor(rng, dtype: str, shape: list[int]):
    """Standard normal floats, integers in [0, 10), random booleans."""
    import torch

    from sdc import dtypes

    if dtypes.is_float(dtype):
        t = torch.from_numpy(rng.standard_normal(shape, dtype="float64"))
    elif dtype == "i1":
        t = torch.from_numpy(rng.integers(0, 2, shape).astype("bool"))
    else:
        t = torch.from_numpy(rng.integers(0, 10, shape))
    return t.to(dtypes.to_torch(dtype))


def summarize(array) -> str:
    import numpy as np

    if array.size == 0:
        return "empty"
    if array.dtype == np.bool_:
        return f"{int(array.sum())} of {array.size} true"
    values = array.astype(np.float64)
    finite = values[np.isfinite(values)]
    text = (f"min {finite.min():.6g}  max {finite.max():.6g}  mean {finite.mean():.6g}" if finite.size
            else "no finite values")
    if finite.size != values.size:
        text += f"  ({values.size - finite.size} non-finite)"
    return text


def write_outputs(directory: Path, infos: Sequence, arrays: Sequence) -> list[Path]:
    import numpy as np

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SdcError(f"cannot create the output directory '{directory}': {e.strerror}") from None
    paths, used = [], set()
    for i, (info, array) in enumerate(zip(infos, arrays)):
        stem = safe_file_name(info.name)
        if stem.lower() in used:
            stem = f"{stem}_{i}"
        used.add(stem.lower())
        path = directory / f"{stem}.npy"
        try:
            np.save(path, array, allow_pickle=False)
        except OSError as e:
            raise SdcError(f"cannot write '{path}': {e.strerror}") from None
        paths.append(path)
    return paths


# ---------------------------------------------------------------- sdc inspect


def inspect_command(args, out: TextIO) -> int:
    from sdc.runtime.artifact import read_artifact
    from sdc.runtime.signature import format_shape

    a = read_artifact(args.artifact)
    m = a.manifest
    runs = None
    if args.runs:
        from sdc.runtime.counters import read_runs

        try:
            runs = read_runs(args.runs)
        except ValueError as e:
            raise SdcError(str(e)) from None
    mesh = ", ".join(f"{k}={v}" for k, v in m["mesh"].items()) or "none"
    out.write(f"artifact  {a.root}  (format {m['format_version']}, sdc {m['sdc_version']})\n")
    out.write(f"target    {m['target']}  world size {m['world_size']}  mesh {mesh}\n")
    if "shardings" in a.plan:
        out.write(f"split     {format_shardings(a.plan['shardings'], m['entry'])}\n")
    out.write("inputs\n")
    for t in m["entry"]["inputs"]:
        out.write(f"  {t['name']}: {t['dtype']}{format_shape(t['shape'])}\n")
    out.write("outputs\n")
    for t in m["entry"]["outputs"]:
        out.write(f"  {t['name']}: {t['dtype']}{format_shape(t['shape'])}\n")
    guards = m["entry"]["guards"]
    out.write("guards" + ("  none\n" if not guards else "\n"))
    for g in guards:
        out.write(f"  {g['condition']}" + (f"  ({g['message']})" if g.get("message") else "") + "\n")
    out.write("ranks\n")
    from sdc.runtime.format import launch_ops

    for r in sorted(a.plan["ranks"], key=lambda r: r["rank"]):
        weights = a.weights_info(r["rank"])
        kernels = sum(1 for s in r["steps"] if s.get("kind") == "launch")
        ops = sum(len(launch_ops(s)) + (s.get("kind") == "collective") for s in r["steps"])
        total = sum(w.nbytes for w in weights.values())
        made = a.synthesized_info(r["rank"])
        made_text = f" + {len(made)} synthesized ({format_bytes(sum(w.nbytes for w in made.values()))})" if made else ""
        out.write(f"  rank {r['rank']}: {len(r['steps'])} steps, {kernels} kernels, {ops} ops, "
                  f"{len(weights)} weights ({format_bytes(total)}){made_text}\n")
        from sdc.codegen.memory import arena_summary

        out.write(f"    memory plan: arena {arena_summary(r.get('arena'))}\n")
        from sdc.codegen.memory import in_place_concats

        if in_place_concats(r["steps"]):
            out.write(f"    concats written in place by their producers: {', '.join(in_place_concats(r['steps']))}\n")
        from sdc.cli.backend_report import backend_lines, kernel_lines, runs_lines

        for line in backend_lines(r, m["target"]) + kernel_lines(r):
            out.write(f"    {line}\n")
        if runs is not None and r["rank"] == 0:
            out.write("    what ran (" + str(args.runs) + ")\n")
            for line in runs_lines(r, runs):
                out.write(f"    {line}\n")
    from sdc.cli.layout_report import format_layout_report, layout_report

    out.write("layout and fusion\n")
    out.write(format_layout_report(layout_report(a.plan)))
    made = a.synthesized(0)
    if a.weight_seed is not None:
        out.write(f"weights: synthesized from seed {a.weight_seed} ({len(made)} on rank 0, "
                  f"{format_bytes(sum(w.nbytes for w in a.synthesized_info(0).values()))}; the rest in the file)\n")
    infos = {**a.weights_info(0), **a.synthesized_info(0)}
    weights = sorted(infos.values(), key=lambda w: (-w.nbytes, w.name))
    out.write("weights (rank 0)" + ("  none\n" if not weights else "\n"))
    shown = weights if args.all else weights[:20]
    for w in shown:
        rule = f"  synthesized: {_init_text(made[w.name])}" if w.name in made else ""
        out.write(f"  {w.name}  {w.dtype}{list(w.shape)}  {format_bytes(w.nbytes)}{rule}\n")
    if len(shown) < len(weights):
        out.write(f"  ... and {len(weights) - len(shown)} more (--all lists them)\n")
    out.write("files\n")
    out.write(f"  manifest.json  {format_bytes((a.root / 'manifest.json').stat().st_size)}\n")
    for rel, info in sorted(m["files"].items()):
        out.write(f"  {rel}  {format_bytes(info['bytes'])}\n")
    env = m.get("environment") or {}
    if env:
        shown_env = ", ".join(f"{k} {v}" for k, v in env.items() if v and k not in ("platform", "machine"))
        out.write(f"compiled with  {shown_env}\n")
    options = m.get("compile_options") or {}
    if options:
        out.write("options   " + ", ".join(f"{k}={v}" for k, v in options.items() if v is not None) + "\n")
    return 0


def _init_text(spec: dict) -> str:
    """`normal(0.0, 0.02)`, `uniform(-0.1, 0.1)`, `ones`, `zeros`: a synthesized weight's init rule."""
    if spec["init"] == "normal":
        return f"normal({spec['mean']}, {spec['std']})"
    if spec["init"] == "uniform":
        return f"uniform(-{spec['bound']}, {spec['bound']})"
    return spec["init"]


def format_shardings(table: dict, entry: dict) -> str:
    """`x [dp, -] -> y [dp, -]`: how a partitioned artifact splits its inputs and outputs."""
    from sdc.dialect.mesh import MeshError, from_json

    def one(tensors, shardings) -> str:
        items = []
        for t, s in zip(tensors, shardings):
            try:
                items.append(f"{t['name']} {from_json(s) if s is not None else '(whole)'}")
            except MeshError:
                items.append(f"{t['name']} ?")
        return ", ".join(items) or "none"

    return f"{one(entry['inputs'], table.get('inputs', []))} -> {one(entry['outputs'], table.get('outputs', []))}"


def format_seconds(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.3f} s"


# ---------------------------------------------------------------- driver


def make_parser() -> ArgumentParser:
    from sdc.cli.train import add_compile_flags as add_train_compile_flags, add_train_parser

    p = ArgumentParser(prog="sdc", description="Compile models into artifacts, run and inspect artifacts.")
    p.add_argument("--debug", action="store_true", help="show Python tracebacks")
    add_version_flag(p, sdc_version_text)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    c = sub.add_parser("compile", help="compile a model into an artifact directory")
    c.add_argument("model", help="an ONNX file, an .mlir file of sdc IR or StableHLO, or a .jaxexport file "
                                 "(jax.export's serialize() bytes)")
    c.add_argument("-o", "--output", help="the artifact directory (default: MODEL's stem + .sdc, here)")
    c.add_argument("--target", default=DEFAULT_TARGET, metavar="TARGET",
                   help=f"what to compile for: {', '.join(TARGETS)} (default {DEFAULT_TARGET}; docs/targets.md)")
    c.add_argument("--input-shape", action="append", default=[], metavar="NAME=DIMS",
                   help="an input's dims (x=B,3,224,224), a symbol's range (B=1..64, B=8..) or value (B=8); "
                        "repeatable")
    c.add_argument("--dump-ir", metavar="DIR", help="write the IR after import and after each pass to DIR; for "
                                                  "targets with generated kernels also the kernel sources "
                                                  "(NN-kernels/) and the launch plan (MM-plan.json, MM-plan.txt)")
    c.add_argument("--weights", choices=["included", "none"], default="included",
                   help="'none': leave the large floating-point weights out of the artifact; they are "
                        "synthesized from --weight-seed when it is loaded (docs/artifact.md)")
    c.add_argument("--weight-seed", type=int, default=None, metavar="N",
                   help="the seed of the synthesized weights (with --weights none; default 0)")
    c.add_argument("--params", metavar="FILE", help="parameter values for an .mlir model (.safetensors or .npz)")
    c.add_argument("--mesh", metavar="AXIS=N,...",
                   help="compile for a device mesh of named axes, e.g. dp=2,tp=2: one process per device "
                        "(run it with torchrun --nproc-per-node=4 --no-python sdc run ...)")
    c.add_argument("--precision", default=None, metavar="PRECISION",
                   help="the dtype floating-point math computes in: f32 (fp32), tf32, bf16, f16 (fp16); "
                        "bf16/f16 keep softmax, norms and reductions in f32 (default: the target's, f32)")
    c.add_argument("--explain", choices=["layout", "sharding"],
                   help="after compiling, report on the result: 'layout' lists the layout casts left and why, "
                        "the kernel groups, and the memory traffic before and after fusion; 'sharding' lists "
                        "the shardings chosen and every collective inserted, with the op that needed it, the "
                        "tensor, the bytes per step and why")
    add_train_compile_flags(c)
    c.add_argument("--debug", action="store_true", help="show Python tracebacks")

    m = sub.add_parser("import", help="import a model into sdc IR, the text sdc-opt and sdc compile read")
    m.add_argument("model", help="an ONNX file (or an .mlir file, printed again)")
    m.add_argument("-o", "--output", default="-", help="the IR file (default stdout)")
    m.add_argument("--input-shape", action="append", default=[], metavar="NAME=DIMS",
                   help="an input's dims (x=B,3,224,224): ints fix a dim, names name it; repeatable")
    m.add_argument("--params", metavar="FILE",
                   help="write the parameter values to FILE (.safetensors or .npz), for sdc compile --params")
    m.add_argument("--mesh", metavar="AXIS=N,...", help="read the model's multi-device sharding annotations "
                                                      "for this device mesh, e.g. dp=2,tp=2")
    m.add_argument("--print-debuginfo", action="store_true",
                   help="print locations (the ONNX node name and index of every op)")
    m.add_argument("--debug", action="store_true", help="show Python tracebacks")

    r = sub.add_parser("run", help="run an artifact on given or random inputs")
    r.add_argument("artifact", help="the artifact directory")
    r.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input from a .npy file (repeatable); inputs not given are random")
    r.add_argument("--output-dir", metavar="DIR", help="write each output as DIR/<name>.npy")
    r.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE",
                   help=f"size of a symbolic dim for random inputs (default {DEFAULT_BATCH_SIZE} for batch-like "
                        f"names, {DEFAULT_DIM_SIZE} otherwise)")
    r.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    r.add_argument("--repeat", default="1", metavar="N",
                   help="time N runs and report mean, median, p90, stddev, min and max (default 1)")
    r.add_argument("--warmup", default="0", metavar="N",
                   help="run N times first, untimed (default 0: the first call includes one-time set-up)")
    r.add_argument("--profile", action="store_true",
                   help="time each kernel group (launch step) and collective of the timed runs and print them, "
                        "slowest first; with --output-dir also writes DIR/trace.json")
    r.add_argument("--trace", metavar="FILE",
                   help="write a Chrome trace (JSON; Perfetto, chrome://tracing) of the timed runs' steps to FILE")
    r.add_argument("--device", default=None, metavar="cpu|cuda",
                   help="where the ops run (default cpu; cuda: the process's GPU, cuda:LOCAL_RANK under torchrun)")
    r.add_argument("--debug", action="store_true", help="show Python tracebacks")

    i = sub.add_parser("inspect", help="describe an artifact: signature, ranks, kernels, layouts and fusion, "
                                       "weights, files")
    i.add_argument("artifact", help="the artifact directory")
    i.add_argument("--all", action="store_true", help="list every weight (default: the 20 largest)")
    i.add_argument("--runs", metavar="FILE",
                   help="also show what ran, from the counters `sdc run --profile --output-dir DIR` wrote "
                        "(DIR/runs.json): per kernel the op calls, and each step that fell back")
    i.add_argument("--debug", action="store_true", help="show Python tracebacks")
    add_train_parser(sub)
    return p


def train_command(args, out: TextIO) -> int:
    from sdc.cli.train import train_command as run_train

    return run_train(args, out)


COMMANDS = {"compile": compile_command, "import": import_command, "run": run_command, "inspect": inspect_command,
            "train": train_command}


def sdc_main(argv: list[str]) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_usage(sys.stderr)
        raise UsageError(f"no command (commands: {', '.join(COMMANDS)})")
    return COMMANDS[args.command](args, sys.stdout)


def main(argv: list[str] | None = None) -> int:
    return run_main(sdc_main, argv)


if __name__ == "__main__":
    sys.exit(main())
