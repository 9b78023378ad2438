"""What every kernel launcher shares (sdc/runtime/launch/: triton.py, cuda.py, c.py): the kernel
sources of an artifact, read and hash-checked once; the domain a launch reads off its tensors; the
autotuner and its on-disk cache; a launch's memory of the call signatures it has settled; and the
index arithmetic of layouts (inverse permutations, dense strides).

`KernelSources` reads a kernel file only from `kernels/` inside the artifact, only when the
manifest lists it, and only after its bytes match the manifest's SHA-256 (read once, checked, and
those same bytes executed or compiled: the file cannot change in between). `load_entry` executes a
Python kernel source (Triton) into a fresh namespace and returns its entry. No MLIR here.
"""

from __future__ import annotations

import hashlib
import json
import linecache
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from sdc.diagnostics import SdcError
from sdc.runtime.format import KERNELS_DIR

AUTOTUNE_DIR_ENV = "SDC_AUTOTUNE_DIR"  # where tuning results are kept (default ~/.cache/sdc/autotune)


class KernelSources:
    """The kernel files of one artifact, read and hash-checked on demand."""

    def __init__(self, root: Path, files: dict[str, dict], error: Callable[[str, str], SdcError]):
        self.root = Path(root)
        self.files = files
        self.error = error  # error(file, message)
        self._loaded: dict[tuple[str, str], Any] = {}
        self.tune_keys: dict[tuple[str, str], str] = {}  # (file, entry) -> tuning_key of its source
        self._by_code: dict[str, Any] = {}  # tuning_key -> the entry loaded for it first
        self.shared = 0  # entries served by an identical kernel loaded before (one compile for both)

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
        """The `@triton.jit` function `name` of kernel file `rel` (each file executed once). Kernels
        whose code is the same but for their names and comments (`tuning_key`) share one function,
        so triton compiles them once."""
        key = (rel, name)
        if key not in self._loaded:
            text, digest = self.read(rel)
            code = tuning_key(text, name)
            if code in self._by_code:  # the same code under another name: its JITFunction, its compiles
                self.shared += 1
                self._loaded[key] = self._by_code[code]
            else:
                self._loaded[key] = self._by_code[code] = load_entry(text, rel, name, digest,
                                                                     lambda msg: self.error(rel, msg))
            self.tune_keys[key] = code
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


def device_name(device: torch.device | None) -> str:
    if device is not None and device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "interpreter"


def read_domain(where: str, domain: tuple, args: tuple, tensors: list[torch.Tensor],
                differs: Callable[[Any, int, int, int, int], str], ones_broadcast: bool) -> list[int]:
    """A generated kernel's domain sizes, read off its tensor arguments through their maps: a dim a
    map leaves out must have size 1; the others set the domain's size or must equal it, where
    `ones_broadcast` lets a size 1 broadcast (a Triton kernel reads it by stride 0; a CUDA C++ kernel
    indexes flat and needs the full size). `differs(arg, j, size, there, d)` words the mismatch."""
    dims: list[int | None] = list(domain)
    for arg, t in zip(args, tensors):
        if t.dim() != len(arg.map):
            raise SdcError(f"{where}: value '{arg.value}' has rank {t.dim()}, the kernel expects {len(arg.map)}")
        for j, d in enumerate(arg.map):
            size = t.shape[j]
            if d is None:
                if size != 1:
                    raise SdcError(f"{where}: value '{arg.value}' has size {size} in dim {j}, the kernel expects 1 "
                                   "(it broadcasts there)")
            elif size == 1 and ones_broadcast:
                continue
            elif dims[d] is None:
                dims[d] = size
            elif dims[d] != size:
                raise SdcError(differs(arg, j, size, dims[d], d))
    return [1 if d is None else d for d in dims]


class Settled(dict):
    """A launch's memory of the call signatures it has settled (argument shapes, strides -> what
    the launcher derived from them: grid, strides, result buffers), at most `limit` of them: a
    dynamic dim brings one signature per size seen. A plain dict to read (`get` is the hot path)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def remember(self, key: Any, value: Any) -> Any:
        """`value` under `key`; when full, the signatures settled so far are forgotten first."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


def inverse(order) -> list[int]:
    """The inverse permutation: the logical dims of a tensor stored in physical `order`."""
    out = [0] * len(order)
    for physical, logical in enumerate(order):
        out[logical] = physical
    return out


def dense_strides(shape: tuple[int, ...], layout: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """The strides of a dense tensor of logical `shape` stored in `layout`'s dim order (the
    permuted view a launcher makes for a result with a layout; row-major without one)."""
    order = list(layout) if layout is not None else list(range(len(shape)))
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= max(int(shape[d]), 1)
    return tuple(strides)
