"""Running the generated Triton kernels of an artifact (plan.json launches with backend "triton").

The artifact's `kernels/*.py` are the one code the design lets loading execute. `KernelSources`
reads such a file only from `kernels/` inside the artifact, only when the manifest lists it, and
only after its bytes match the manifest's SHA-256 (read once, checked, and those same bytes
executed: the file cannot change in between). `load_entry` executes the source into a fresh
namespace and returns its `@triton.jit` entry; triton compiles it on first launch.

`TritonLaunch` is the executor's instruction for one launch: per call it reads the domain sizes off
the input tensors (each argument's `map` says which domain dim each of its dims is), checks they
agree with each other and with the sizes fixed at compile time, allocates the results (torch tensors
on the inputs' device, in a result's `layout` when it has one), computes each tensor's strides over
the domain (0 where it broadcasts), evaluates the grid expressions (sdc.dialect.symexpr) and launches.

Two choices are made per call, not at compile time. A kernel with a `contiguous_flag` gets that
constexpr set to 1 when every tensor is dense in the dims it maps (its fast path: flat offsets). A
kernel with `tune` entries (the matmul template's candidate tiles) is autotuned: the first call of a
shape key times each configuration on the device (into scratch results) and keeps the fastest;
`Autotuner` caches the choice in memory and on disk (`SDC_AUTOTUNE_DIR`, default
`~/.cache/sdc/autotune/`), keyed by the kernel's source hash, the device name and the shape key, so a
second load of the artifact does not tune again. `SDC_AUTOTUNE=0` turns tuning off (the plan's first
configuration runs), `SDC_AUTOTUNE=1` turns it on under the interpreter too (tests).

On the CPU, Triton kernels run only under the interpreter (TRITON_INTERPRET=1), for tests on small
shapes; `check_can_run` says so up front. No MLIR here.
"""

from __future__ import annotations

import hashlib
import json
import linecache
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.dialect import symexpr
from sdc.runtime import plan_schema as S
from sdc.runtime.format import KERNELS_DIR

INTERPRET_ENV = "TRITON_INTERPRET"
AUTOTUNE_ENV = "SDC_AUTOTUNE"  # "0": never tune; "1": tune, under the interpreter too; unset: tune on CUDA
AUTOTUNE_DIR_ENV = "SDC_AUTOTUNE_DIR"  # where tuning results are kept (default ~/.cache/sdc/autotune)


def interpreting() -> bool:
    return os.environ.get(INTERPRET_ENV, "0").strip().lower() in ("1", "true", "on", "yes")


def check_can_run(device: torch.device | None, where: str) -> None:
    """SdcError unless this process can run Triton kernels on `device`."""
    on_cpu = device is None or device.type == "cpu"
    if on_cpu and not interpreting():
        raise SdcError(f"{where} is a generated Triton kernel: on the CPU those run only under the Triton "
                       f"interpreter ({INTERPRET_ENV}=1); run on a GPU (--device cuda) or compile for target cpu")
    try:
        import triton  # noqa: F401
    except ImportError as e:
        raise SdcError(f"{where} is a generated Triton kernel, and triton cannot be imported here ({e})") from None


class KernelSources:
    """The kernel files of one artifact, read and hash-checked on demand."""

    def __init__(self, root: Path, files: dict[str, dict], error: Callable[[str, str], SdcError]):
        self.root = Path(root)
        self.files = files
        self.error = error  # error(file, message)
        self._loaded: dict[tuple[str, str], Any] = {}
        self.tune_keys: dict[tuple[str, str], str] = {}  # (file, entry) -> tuning_key of its source

    def read(self, rel: str) -> tuple[str, str]:
        """(source text, its SHA-256) of kernel file `rel`."""
        from sdc.runtime.artifact import safe_path

        if not rel.startswith(KERNELS_DIR + "/") or rel not in self.files:
            raise self.error(rel, f"is not a kernel file listed in manifest.json (kernels live in {KERNELS_DIR}/)")
        path = safe_path(self.root, rel, rel)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise self.error(rel, f"cannot be read: {e.strerror}") from None
        digest = hashlib.sha256(data).hexdigest()
        if digest != str(self.files[rel].get("sha256", "")).lower():
            raise self.error(rel, "does not match its SHA-256 in manifest.json: the file changed after the "
                                  "artifact was written")
        try:
            return data.decode("utf-8"), digest
        except UnicodeDecodeError:
            raise self.error(rel, "is not UTF-8 text") from None

    def entry(self, rel: str, name: str) -> Any:
        """The `@triton.jit` function `name` of kernel file `rel` (each file executed once)."""
        key = (rel, name)
        if key not in self._loaded:
            text, digest = self.read(rel)
            self._loaded[key] = load_entry(text, rel, name, digest, lambda msg: self.error(rel, msg))
            self.tune_keys[key] = tuning_key(text, name)
        return self._loaded[key]


def tuning_key(text: str, entry: str) -> str:
    """The SHA-256 of a kernel's code without its comments and with its entry renamed: kernels that
    differ only by name and header (the eight layers of an MLP) share one tuning result."""
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    code = re.sub(rf"\bdef {re.escape(entry)}\(", "def kernel(", code)
    return hashlib.sha256(code.encode()).hexdigest()


def load_entry(text: str, rel: str, name: str, digest: str, error: Callable[[str], SdcError]) -> Any:
    """Execute a kernel source and return its function `name`.

    Triton reads a kernel's source through `inspect`, so the text is registered with linecache under
    a name of its own (its hash) instead of being imported from a path someone could swap."""
    filename = f"<sdc-kernel {digest[:16]} {rel}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict[str, Any] = {"__name__": f"sdc_kernel_{digest[:16]}", "__file__": filename}
    try:
        exec(compile(text, filename, "exec"), namespace)  # the generated kernel: the one code loading runs
    except Exception as e:
        raise error(f"cannot load the kernel source: {type(e).__name__}: {e}") from None
    fn = namespace.get(name)
    if fn is None or not hasattr(fn, "__getitem__"):
        raise error(f"has no Triton kernel named '{name}'")
    return fn


def _inverse(perm) -> list[int]:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return out


@dataclass(frozen=True)
class LaunchConfig:
    """What one launch of a kernel is configured by: its constexprs, warps and grid expressions."""

    constexprs: dict
    num_warps: int
    grid: tuple[str, ...]

    def as_json(self) -> dict:
        return {"constexprs": self.constexprs, "num_warps": self.num_warps, "grid": list(self.grid)}


def measure(run: Callable[[], None], device: torch.device | None) -> float:
    """Seconds one call of `run` takes: on CUDA the CUDA-event time of a few back-to-back calls
    after one that compiles; elsewhere (the interpreter) the wall time of one call."""
    run()
    if device is None or device.type != "cuda":
        started = time.perf_counter()
        run()
        return time.perf_counter() - started
    torch.cuda.synchronize(device)
    calls = 10
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def tuning_enabled(device: torch.device | None) -> bool:
    setting = os.environ.get(AUTOTUNE_ENV, "").strip().lower()
    if setting in ("0", "false", "off", "no"):
        return False
    if setting in ("1", "true", "on", "yes"):
        return True
    return device is not None and device.type == "cuda" and not interpreting()


def autotune_dir() -> Path:
    return Path(os.environ.get(AUTOTUNE_DIR_ENV) or Path.home() / ".cache" / "sdc" / "autotune")


class Autotuner:
    """The tuning results of one kernel source on one device: a JSON file in `autotune_dir()` named
    by the source's tuning key and the device, mapping shape keys to the chosen configuration.
    Written whole to a temporary file and renamed, so a reader never sees half a file."""

    def __init__(self, source_key: str, device_name: str):
        slug = re.sub(r"[^A-Za-z0-9]+", "-", device_name).strip("-") or "device"
        self.path = autotune_dir() / f"{source_key[:32]}-{slug}.json"
        self.device_name = device_name
        self.tunes = 0  # configurations timed by this object (reports and tests read it)

    def lookup(self, shape_key: str) -> dict | None:
        try:
            return json.loads(self.path.read_text()).get("shapes", {}).get(shape_key)
        except (OSError, ValueError, AttributeError):
            return None  # no file yet, or an unreadable one: tune again and rewrite it

    def store(self, shape_key: str, chosen: LaunchConfig, times: list[float]) -> None:
        try:
            data = json.loads(self.path.read_text())
            shapes = data.get("shapes", {}) if isinstance(data, dict) else {}
        except (OSError, ValueError):
            shapes = {}
        shapes[shape_key] = {**chosen.as_json(), "seconds": times}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"device": self.device_name, "shapes": shapes}, indent=1))
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only cache costs a re-tune next time, never a failed call

    def choose(self, shape_key: str, configs: list[LaunchConfig], time_config: Callable[[LaunchConfig], float]
               ) -> LaunchConfig:
        """The cached choice for `shape_key` when it is one of `configs`, else the fastest of them."""
        cached = self.lookup(shape_key)
        for c in configs:
            if cached is not None and c.as_json() == {k: cached.get(k) for k in ("constexprs", "num_warps", "grid")}:
                return c
        times = []
        for c in configs:
            self.tunes += 1
            try:
                times.append(time_config(c))
            except Exception:  # a configuration this device cannot run (too much shared memory): not a choice
                times.append(math.inf)
        if all(math.isinf(t) for t in times):
            return configs[0]  # the launch itself then reports why the plan's configuration fails
        best = configs[min(range(len(configs)), key=times.__getitem__)]
        self.store(shape_key, best, times)
        return best


def _device_name(device: torch.device | None) -> str:
    if device is not None and device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "interpreter"


def _shape_key(spec: S.TritonKernel, dims: list[int], flags: dict) -> str:
    """The domain sizes, those known only at run time rounded up to a power of 2 (a config tuned
    for 1000 rows serves 600), plus the per-call flags."""
    sizes = [str(d) if static is not None else f"~{1 if d <= 1 else 1 << (d - 1).bit_length()}"
             for d, static in zip(dims, spec.domain)]
    return "x".join(sizes) + "".join(f",{k}={v}" for k, v in sorted(flags.items()))


def _dense(t: torch.Tensor, m: tuple, dims: list[int]) -> bool:
    """Whether `t` is contiguous and indexed in every dim its map names (no size-1 broadcast at run time)."""
    return t.is_contiguous() and all(d is None or t.shape[j] == dims[d] for j, d in enumerate(m))


@dataclass(frozen=True, eq=False)
class TritonLaunch:
    """One launch of a generated kernel, ready to run (an executor instruction)."""

    where: str  # "rank 0 step 3 (launch k2)"
    spec: S.TritonKernel
    fn: Any  # the @triton.jit entry
    arg_slots: tuple[int, ...]
    result_slots: tuple[int, ...]
    result_dtypes: tuple[torch.dtype, ...]
    device: torch.device | None
    stream: Any = None
    source_key: str = ""  # tuning_key of the kernel's source
    chosen: dict = field(default_factory=dict)  # shape key -> LaunchConfig, once tuned or read from the cache

    def domain(self, tensors: list[torch.Tensor]) -> list[int]:
        dims: list[int | None] = list(self.spec.domain)
        static = [d is not None for d in dims]
        for arg, t in zip(self.spec.args, tensors):
            if t.dim() != len(arg.map):
                raise SdcError(f"{self.where}: value '{arg.value}' has rank {t.dim()}, the kernel expects "
                               f"{len(arg.map)}")
            for j, d in enumerate(arg.map):
                size = t.shape[j]
                if d is None:
                    if size != 1:
                        raise SdcError(f"{self.where}: value '{arg.value}' has size {size} in dim {j}, the kernel "
                                       "expects 1 (it broadcasts there)")
                    continue
                if size == 1:
                    continue
                if dims[d] is None:
                    dims[d] = size
                elif dims[d] != size:
                    what = "the compiled size" if static[d] else "another operand's size"
                    raise SdcError(f"{self.where}: value '{arg.value}' has size {size} in dim {j}, {what} "
                                   f"there is {dims[d]}")
        return [1 if d is None else d for d in dims]

    def __call__(self, vals: list, state: Any) -> None:
        tensors = [vals[s] for s in self.arg_slots]
        if self.spec.template == "custom":  # a user's kernel indexes flat: it is promised contiguous tensors
            tensors = [t.contiguous() for t in tensors]
        dims = self.domain(tensors)
        device = tensors[0].device if tensors else self.device
        results = []
        for r, dtype, slot in zip(self.spec.results, self.result_dtypes, self.result_slots):
            shape = [dims[d] if d is not None else 1 for d in r.map]
            existing = vals[slot]
            if existing is not None and list(existing.shape) == shape:  # an `alloc` step's buffer
                results.append(existing)
            elif r.layout is not None:
                physical = torch.empty([shape[p] for p in r.layout], dtype=dtype, device=device)
                results.append(physical.permute(_inverse(r.layout)))
            else:
                results.append(torch.empty(shape, dtype=dtype, device=device))
        maps = [*(a.map for a in self.spec.args), *(r.map for r in self.spec.results)]
        flags = {}
        if self.spec.contiguous_flag is not None:
            flags[self.spec.contiguous_flag] = int(all(_dense(t, m, dims) for t, m in zip([*tensors, *results], maps)))
        strides: list[int] = []
        for t, m in zip([*tensors, *results], maps):
            per_dim = [0] * len(dims)
            for j, d in enumerate(m):
                if d is not None and t.shape[j] != 1:
                    per_dim[d] = t.stride(j)
            strides.append(per_dim)
        symbols = {f"d{i}": d for i, d in enumerate(dims)}

        def launch(config: LaunchConfig, outputs: list[torch.Tensor]) -> None:
            grid = tuple(symexpr.evaluate(g, symbols) for g in config.grid)
            if not all(g > 0 for g in grid):
                return
            params: list[Any] = []
            for t, st in zip([*tensors, *outputs], strides):
                params += [t, *st]
            params += dims
            constexprs = {**config.constexprs, **flags}
            if self.stream is None:
                self.fn[grid](*params, **constexprs, num_warps=config.num_warps)
            else:
                with torch.cuda.stream(self.stream):
                    self.fn[grid](*params, **constexprs, num_warps=config.num_warps)

        try:
            launch(self.config(dims, flags, device, tensors, results, launch), results)
        except SdcError:
            raise
        except Exception as e:
            raise SdcError(f"{self.where}: the Triton kernel '{self.spec.entry}' ({self.spec.source}) failed: "
                           f"{type(e).__name__}: {e}") from e
        for slot, t in zip(self.result_slots, results):
            vals[slot] = t

    def config(self, dims: list[int], flags: dict, device: torch.device | None, tensors: list[torch.Tensor],
               results: list[torch.Tensor], launch: Callable[[LaunchConfig, list[torch.Tensor]], None]
               ) -> LaunchConfig:
        """The configuration of this call: the plan's own, or the tuned one when the kernel has candidates."""
        spec = self.spec
        default = LaunchConfig(spec.constexprs, spec.num_warps, spec.grid)
        if not spec.tune:
            return default
        key = _shape_key(spec, dims, flags)
        if key in self.chosen:
            return self.chosen[key]
        capturing = device is not None and device.type == "cuda" and torch.cuda.is_current_stream_capturing()
        if capturing or not tuning_enabled(device):
            return default  # not remembered: a later uncaptured call may still tune
        configs = [default, *(LaunchConfig(t.constexprs, t.num_warps, t.grid) for t in spec.tune)]
        scratch = [torch.empty_strided(r.shape, r.stride(), dtype=r.dtype, device=r.device) for r in results]
        tuner = Autotuner(self.source_key, _device_name(device))
        self.chosen[key] = tuner.choose(key, configs, lambda c: measure(lambda: launch(c, scratch), device))
        return self.chosen[key]


def prepare_launch(step: S.Launch, slots: dict[str, int], values: dict[str, S.Value], sources: KernelSources | None,
                   device: torch.device | None, stream: Any, error: Callable[[str], SdcError]) -> TritonLaunch:
    """The instruction for a triton launch step (the kernel source loaded, not yet compiled)."""
    spec = step.triton
    assert spec is not None
    if sources is None:
        raise error(f"{step.where}: a generated Triton kernel, but the executor has no artifact to read it from")
    check_can_run(device, step.where)
    fn = sources.entry(spec.source, spec.entry)
    return TritonLaunch(
        where=step.where, spec=spec, fn=fn, arg_slots=tuple(slots[a.value] for a in spec.args),
        result_slots=tuple(slots[r.value] for r in spec.results),
        result_dtypes=tuple(dtypes.to_torch(values[r.value].dtype) for r in spec.results),
        device=device, stream=stream, source_key=sources.tune_keys[(spec.source, spec.entry)])
