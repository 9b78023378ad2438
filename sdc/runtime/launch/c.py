"""Running the generated C kernels of a CPU artifact (plan.json launches with backend "c").

The CPU target renders the kernel groups that a template fits as C functions (sdc/codegen/c), all
of one rank in one source file of the artifact. At load the file is compiled once with the host's C
compiler (`$CC`, else `cc`) into a shared library, kept in a cache directory keyed by the source, the
compiler's version and the flags, so a second load, or a second process, compiles nothing. The
library is loaded with `ctypes.PyDLL`: a call holds the GIL (the executor's state is per call, the
kernels are short) and costs about a microsecond.

The kernel ABI (what sdc/codegen/c renders and this module calls):

    int ENTRY(void **p, const int64_t *d);

- `p[i]`, i < len(args): argument i's data pointer; `p[len(args) + j]`: result j's.
- `d[0..R-1]`: the domain sizes d0..d{R-1} (R = len(domain)), each >= 0.
- Every tensor is dense row-major in its own shape, whose dim j has size `d[map[j]]` (1 where
  `map[j]` is None); the kernel derives the strides from `d`. The launcher makes arguments dense,
  checks that each argument's size in a mapped dim equals the domain's there (a size-1 operand
  broadcasting at run time is not indexed by the kernel: that call runs the group's reference ops
  instead), and allocates results dense. A tensor with a `layout` (a physical dim order) is dense
  in that order instead, its map over those dims: the launcher passes its permuted view (dense as a
  channels-last value lies) and makes a result's value the view of its buffer with the order undone.
- Element storage: f64 double, f32 float, i64 int64_t, i32 int32_t, i16 int16_t, i8 int8_t,
  ui8 uint8_t, i1 one byte 0/1 (torch's bool).
- An elementwise kernel over more than `LARGE_ELEMENTS` elements splits its outer loops over OpenMP's
  threads (the library is built with `-fopenmp` where the compiler has it, and links the libgomp
  torch loaded: torch's thread count is its team size); any other kernel is single-threaded. A
  kernel allocates no more than a per-call scratch it frees. It returns
  0, or nonzero when it could not compute the results: a gather index out of range (the element
  reads 0 and the kernel goes on), its scratch not allocated. The launcher then runs the group's
  torch ops, whose reference semantics say what such a call does (an index error names the op).
- After each function the source holds its signature, `const char *const sdc_sig_ENTRY`: the
  template, domain and every tensor's dtype and map the function was compiled for
  (sdc/codegen/c/generate.py). At load the launcher compares it with plan.json's launch and the
  values' dtypes and refuses a launch that differs, since the kernel indexes by what it was compiled
  for: a plan edited after compiling must not make it read or write past a buffer.

`CLaunch` is the executor's instruction for one launch; it keeps the group's reference instructions
as its `fallback` (the ops through torch), which a call runs instead of the kernel when:
- the library could not be built (`CCompileError`: no compiler, or it refused the source): every C
  launch of the executor then runs its fallback, and one warning line says so on stderr;
- `SDC_C_KERNELS=0` was set when the artifact was loaded (for A/B measurements);
- the call's arguments do not fit the kernel (a size-1 operand broadcasting at run time);
- the kernel returned nonzero (above);
- the work is large and torch runs with more than one thread (`LARGE_ELEMENTS`, `LARGE_MACS`), except
  for an elementwise kernel built with OpenMP, which then runs over those threads itself, or
  the executor's tensors are not on the CPU.

One executor's calls run one at a time: each launch fills its own preallocated pointer array.
Runs of consecutive C launches are called as one (sdc/runtime/c_segment.py).

No MLIR here.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import math
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.limits import check_alloc, check_elements
from sdc.runtime import plan_schema as S
from sdc.runtime.switches import C_KERNELS_ENV, c_kernels_enabled  # noqa: F401  (the loader asks here)
# _dense_strides: the name c_segment imports from here
from sdc.runtime.launch.base import Settled, inverse, read_domain
from sdc.runtime.launch.base import dense_strides as _dense_strides

C_CACHE_ENV = "SDC_C_CACHE_DIR"  # where compiled kernel libraries are kept (default ~/.cache/sdc/c)
CFLAGS = ("-O2", "-march=native", "-std=c11", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math")
COMPILE_TIMEOUT_S = 300
OPENMP = ("-fopenmp",)  # the flags that build a library whose OpenMP pragmas run in parallel

_LOADED: dict[str, ctypes.PyDLL] = {}  # library path -> the loaded library, for the process
_VERSIONS: dict[tuple[str, float], str] = {}  # (compiler path, its mtime) -> its `--version` text


class CCompileError(SdcError):
    """The host cannot compile an artifact's C kernels: no compiler, or the compiler refused."""


def c_cache_dir() -> Path:
    return Path(os.environ.get(C_CACHE_ENV) or Path.home() / ".cache" / "sdc" / "c")


def compiler() -> str:
    """The C compiler command (`$CC`, else `cc`); CCompileError when there is none on PATH."""
    cc = os.environ.get("CC") or "cc"
    if shutil.which(cc) is None:
        raise CCompileError(f"no C compiler: '{cc}' is not on PATH (set CC)")
    return cc


def _compiler_version(cc: str) -> str:
    """`cc --version`, asked once per process for each compiler binary (it changes when the binary does)."""
    path = shutil.which(cc) or cc
    try:
        key = (path, os.stat(path).st_mtime)
    except OSError:
        key = (path, 0.0)
    if key not in _VERSIONS:
        try:
            proc = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as e:
            raise CCompileError(f"C compiler '{cc}' does not run: {e}") from None
        if proc.returncode != 0:
            raise CCompileError(f"C compiler '{cc}' does not run: '{cc} --version' exited {proc.returncode}")
        _VERSIONS[key] = proc.stdout
    return _VERSIONS[key]


def build_library(text: str, extra_flags: Sequence[str] = ()) -> ctypes.PyDLL:
    """The compiled library of one C source (with `CFLAGS` and `extra_flags`), from the cache when it
    was compiled before (by any process: the library is written under a temporary name and renamed
    into place)."""
    cc = compiler()
    flags = (*CFLAGS, *extra_flags)
    key = hashlib.sha256("\0".join([text, cc, _compiler_version(cc), *flags]).encode()).hexdigest()[:32]
    path = c_cache_dir() / f"{key}.so"
    if str(path) in _LOADED:
        return _LOADED[str(path)]
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            src, out = Path(tmp) / "kernels.c", Path(tmp) / "kernels.so"
            src.write_text(text)
            try:
                proc = subprocess.run([cc, *flags, "-o", str(out), str(src), "-lm"], capture_output=True,
                                      text=True, timeout=COMPILE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise CCompileError(f"C compiler '{cc}' took over {COMPILE_TIMEOUT_S} s") from None
            if proc.returncode != 0:
                lines = [ln for ln in proc.stderr.splitlines() if "error" in ln] or proc.stderr.splitlines()
                first = lines[0].strip() if lines else f"exit {proc.returncode}"
                raise CCompileError(f"C compiler '{cc}' failed: {first}")
            os.replace(out, path)
    lib = ctypes.PyDLL(str(path))
    _LOADED[str(path)] = lib
    return lib


def build_parallel_library(text: str) -> tuple[ctypes.PyDLL, bool]:
    """`build_library` with OpenMP (the library links the libgomp torch loaded: one soname, so torch's
    thread pool and its wait policy), or without where the compiler has no OpenMP (its pragmas are
    then ignored); the library and whether it was built with OpenMP. CCompileError when neither builds."""
    try:
        return build_library(text, OPENMP), True
    except CCompileError:
        return build_library(text), False


def kernel_function(lib: ctypes.PyDLL, entry: str, error: Callable[[str], SdcError]) -> Callable[..., None]:
    """The kernel `entry` of a loaded library, typed as the ABI above."""
    try:
        fn = getattr(lib, entry)
    except AttributeError:
        raise error(f"the compiled C kernels have no function '{entry}'") from None
    fn.argtypes = (ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64))
    fn.restype = ctypes.c_int
    return fn


def check_signature(lib: ctypes.PyDLL, spec: S.CKernel, values: dict[str, S.Value],
                    error: Callable[[str], SdcError]) -> None:
    """An error unless the compiled function `spec.entry` was compiled for the template, domain,
    dtypes and maps that plan.json's launch gives (module docstring)."""
    import json

    try:
        raw = ctypes.c_char_p.in_dll(lib, f"sdc_sig_{spec.entry}").value
        sig = json.loads(raw.decode()) if raw else None
    except (ValueError, UnicodeDecodeError):
        sig = None
    if not isinstance(sig, dict):
        raise error(f"the compiled C kernel '{spec.entry}' has no readable signature")
    layouts = {t.value: t.layout for t in (*spec.args, *spec.results) if t.layout is not None}
    expected = {
        "template": spec.template,
        "domain": list(spec.domain),
        "args": [[values[a.value].dtype, list(a.map)] for a in spec.args],
        "results": [[values[r.value].dtype, list(r.map)] for r in spec.results],
        "transposed": list(spec.transposed),
        "layouts": layout_signature(spec.args, spec.results, layouts) if layouts else None,
    }
    for key, want in expected.items():
        got = sig.get(key, [] if key == "transposed" else None)  # (kernels compiled before it took none)
        if got != want:
            raise error(f"plan.json's launch of C kernel '{spec.entry}' does not match the kernel's compiled "
                        f"signature: {key} {want} in the plan, {got} compiled")


def layout_signature(args: Sequence, results: Sequence, layouts: Mapping[str, Sequence[int]]) -> list:
    """[[arg index, layout], ...] and the same for results: what the signature says of `layouts`."""
    return [[[i, list(layouts[t.value])] for i, t in enumerate(ts) if t.value in layouts] for ts in (args, results)]




class CLibraries:
    """The compiled C sources of one executor: each source file built once, for all its launches.
    When one cannot be built, its launches run through torch and one warning line goes to stderr,
    the first time only."""

    def __init__(self) -> None:
        self.enabled = c_kernels_enabled()
        self.built: dict[str, ctypes.PyDLL | None] = {}  # source file -> its library (None: not built)
        self.parallel: dict[str, bool] = {}  # source file -> built with OpenMP (its pragmas split the work)
        self.warned = False

    def library(self, source: str, sources: Any) -> ctypes.PyDLL | None:
        """The library of kernel file `source` (read through `sources`, a base.KernelSources),
        or None when C kernels are off or the host cannot compile it."""
        if not self.enabled:
            return None
        if source not in self.built:
            text, _digest = sources.read(source)
            try:
                self.built[source], self.parallel[source] = build_parallel_library(text)
            except CCompileError as e:
                self.built[source], self.parallel[source] = None, False
                self._warn(f"{sources.root}/{source}" if hasattr(sources, "root") else source, str(e))
        return self.built[source]

    def _warn(self, where: str, reason: str) -> None:
        if self.warned:
            return
        self.warned = True
        sys.stderr.write(f"warning: {where}: C kernels not compiled ({reason}); their groups run through torch\n")
        sys.stderr.flush()


# Above these sizes the group's torch ops beat the single-threaded kernel when torch has two or more
# threads (its kernels then use every core); below them torch's per-op cost (10-35 us) dominates.
# Same scale as the executor's one-thread gate (sdc.runtime.gate: SERIAL_ELEMENTS, SERIAL_MACS).
LARGE_ELEMENTS = 1 << 16  # elementwise / row: elements of the domain (an elementwise one: its results')
LARGE_MACS = 1 << 20  # matmul: multiply-adds, the product of the domain (*batch, M, N, K)
SETTLED = 64  # argument shapes a launch remembers (dynamic dims: one per size seen)
_MISFIT = object()  # settled: these shapes do not fit the kernel, the call runs the fallback


@dataclass(frozen=True)
class _Settled:
    """What a call of one set of argument shapes derives: the domain sizes (as the kernel's `d`),
    per result its shape, dense strides, dtype and `like` (an argument of that shape and dtype, or
    -1), and whether the work is large (`LARGE_ELEMENTS`, `LARGE_MACS`). A fresh result is made by
    `torch.empty_like(the contiguous argument)` where there is one (about 1.5 us), else by
    `torch.empty_strided` (about 3: torch's Python argument parsing, not the allocation). Shapes are
    plain tuples, which torch parses faster than a torch.Size (equal to one)."""

    dims: Any  # ctypes c_int64 array
    results: tuple[tuple[tuple[int, ...], tuple[int, ...], torch.dtype, int], ...]
    large: bool


@dataclass(frozen=True, eq=False)
class CLaunch:
    """One launch of a generated C kernel, ready to run (an executor instruction); `fn` None: every
    call runs `fallback`, the group's reference instructions."""

    where: str  # "rank 0 step 3 (launch k2)"
    spec: S.CKernel
    fn: Callable[..., None] | None  # the entry, untyped: a call passes two ctypes arrays (0.8 us less)
    arg_slots: tuple[int, ...]
    result_slots: tuple[int, ...]
    result_dtypes: tuple[torch.dtype, ...]
    fallback: tuple[Callable[[list, Any], None], ...]
    scratch: tuple[int, ...] = ()  # slots of the group's inner values, which only the fallback fills
    pointers: Any = None  # the ctypes void* array the kernel's `p` points to, filled per call
    settled: Settled = field(default_factory=lambda: Settled(SETTLED))  # argument shapes -> _Settled, or _MISFIT
    # per argument and result, the physical dim order the kernel takes it dense in (its `layout`), or
    # None: row-major (`physical`: any is not None; such a launch is not part of a CSegment)
    arg_layouts: tuple[tuple[int, ...] | None, ...] = ()
    result_layouts: tuple[tuple[int, ...] | None, ...] = ()
    # an elementwise kernel built with OpenMP: large work runs it over torch's threads (the renderer's
    # pragma), not the torch ops
    parallel: bool = False
    physical: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "physical", any(p is not None for p in (*self.arg_layouts, *self.result_layouts)))

    def _settle(self, tensors: list[torch.Tensor]) -> _Settled | object:
        def differs(arg: S.KernelTensor, j: int, size: int, there: int, d: int) -> str:
            return f"{self.where}: value '{arg.value}' has size {size} in dim {j}, the domain {there}"

        try:
            dims = read_domain(self.where, self.spec.domain, self.spec.args, tensors, differs, ones_broadcast=False)
        except SdcError:
            return _MISFIT  # a run-time broadcast (or shapes the kernel does not take): the torch ops decide
        shapes = [tuple(dims[d] if d is not None else 1 for d in r.map) for r in self.spec.results]
        if self.spec.template == "matmul":
            large = math.prod(dims) > LARGE_MACS
        elif self.spec.template == "elementwise":  # the dims past the results' are a gather's table sizes
            large = max((math.prod(s) for s in shapes), default=0) > LARGE_ELEMENTS
        else:
            large = math.prod(dims) > LARGE_ELEMENTS
        def like(shape: tuple[int, ...], dtype: torch.dtype) -> int:
            return next((k for k, t in enumerate(tensors) if tuple(t.shape) == shape and t.dtype == dtype), -1)

        for shape, dtype in zip(shapes, self.result_dtypes):  # before anything is allocated
            check_elements(shape, torch.empty((), dtype=dtype).element_size(),
                           f"{self.where}: a result of C kernel '{self.spec.entry}'")
        results = tuple((shape, _dense_strides(shape), dtype, like(shape, dtype))
                        for shape, dtype in zip(shapes, self.result_dtypes))
        return _Settled((ctypes.c_int64 * max(1, len(dims)))(*dims), results, large)

    def run_fallback(self, vals: list, state: Any) -> None:
        for instruction in self.fallback:
            instruction(vals, state)
        for slot in self.scratch:
            vals[slot] = None

    def __call__(self, vals: list, state: Any) -> None:
        fn = self.fn
        if fn is None:
            return self.run_fallback(vals, state)
        tensors = [vals[s] for s in self.arg_slots]
        if self.physical:  # in the kernel's dim order: a channels-last value is then dense as it lies
            if any(p is not None and t.dim() != len(p) for t, p in zip(tensors, self.arg_layouts)):
                return self.run_fallback(vals, state)  # not the plan's rank: the torch ops say what is wrong
            tensors = [t if p is None else t.permute(p) for t, p in zip(tensors, self.arg_layouts)]
        key = tuple([t.shape for t in tensors])
        known = self.settled.get(key)
        if known is None:
            known = self.settled.remember(key, self._settle(tensors))
        if known is _MISFIT:
            return self.run_fallback(vals, state)
        if known.large and state.threads > 1:
            if state.current != state.threads:  # a small product before set one thread: this work takes all
                torch.set_num_threads(state.threads)
                state.current = state.threads
            if not self.parallel:
                return self.run_fallback(vals, state)
        try:
            copies = self._bind(tensors, vals, known)
        except RuntimeError as e:  # the allocator's (the limit was checked when the shapes settled)
            raise out_of_memory(self.where, f"C kernel '{self.spec.entry}'", e) from None
        if fn(self.pointers, known.dims):
            return self.run_fallback(vals, state)  # the torch ops say what this call does (docstring)
        if copies:
            for existing, fresh in copies:
                existing.copy_(fresh)

    def _bind(self, tensors: list[torch.Tensor], vals: list, known: _Settled) -> list | None:
        """The call's pointers: its arguments (made dense where they are not) and results (the bound
        buffer, or fresh); returns the (bound view, fresh) pairs to copy back after the call."""
        pointers = self.pointers
        i = 0
        for n, t in enumerate(tensors):
            if not t.is_contiguous():
                # a broadcast view is free; its dense copy is not (no allocation over the limit)
                need = t.numel() * t.element_size()
                if need > t.untyped_storage().nbytes():
                    check_alloc(need, f"{self.where}: argument {n} of C kernel '{self.spec.entry}' made dense")
                t = tensors[n] = t.contiguous()  # kept alive in `tensors` until the call returns
            pointers[i] = t.data_ptr()
            i += 1
        copies = None
        # an alloc step's (or the arena's) buffer has the value's dtype: only its shape is checked
        for k, (slot, (shape, strides, dtype, like)) in enumerate(zip(self.result_slots, known.results)):
            existing = vals[slot]
            order = self.result_layouts[k] if self.physical else None
            if order is not None:
                if existing is not None:
                    existing = existing.permute(order)  # the bound buffer as the kernel writes it
                fresh = self._fresh_physical(vals, slot, order, existing, shape, strides, dtype, like, tensors)
                if fresh is not existing and existing is not None and existing.shape == shape:
                    copies = [*(copies or ()), (existing, fresh)]  # a bound buffer not dense that way
                pointers[i] = fresh.data_ptr()
                i += 1
                continue
            if existing is not None and existing.shape == shape:
                if existing.is_contiguous():
                    pointers[i] = existing.data_ptr()
                    i += 1
                    continue
                fresh = torch.empty_strided(shape, strides, dtype=dtype)  # a view step's slice: copied into
                copies = [*(copies or ()), (existing, fresh)]
            elif like >= 0:  # the argument is contiguous by now, so its like is dense
                fresh = vals[slot] = torch.empty_like(tensors[like])
            else:
                fresh = vals[slot] = torch.empty_strided(shape, strides, dtype=dtype)
            pointers[i] = fresh.data_ptr()
            i += 1
        return copies

    @staticmethod
    def _fresh_physical(vals: list, slot: int, order: tuple[int, ...], existing: torch.Tensor | None,
                        shape: tuple[int, ...], strides: tuple[int, ...], dtype: torch.dtype, like: int,
                        tensors: list[torch.Tensor]) -> torch.Tensor:
        """Where a result in physical order `order` is written: the bound buffer (`existing`, already
        permuted) when it is dense that way, else a fresh dense tensor, whose logical view (the
        permutation undone) becomes the slot's value unless a bound buffer takes a copy of it."""
        if existing is not None and existing.shape == shape and existing.is_contiguous():
            return existing
        fresh = torch.empty_like(tensors[like]) if like >= 0 else torch.empty_strided(shape, strides, dtype=dtype)
        if existing is None or existing.shape != shape:
            vals[slot] = fresh.permute(inverse(order))
        return fresh


def out_of_memory(where: str, what: str, e: Exception) -> SdcError:
    """The one-line error for an allocation the host refused (torch's allocator raises RuntimeError)."""
    detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return SdcError(f"{where}: out of memory for {what} ({detail})")


def prepare_c_launch(step: S.Launch, slots: dict[str, int], values: dict[str, S.Value], sources: Any,
                     error: Callable[[str], SdcError], fallback: list[Callable[[list, Any], None]],
                     libraries: CLibraries | None = None, device: torch.device | None = None,
                     initial: list | None = None) -> CLaunch:
    """The instruction for a c launch step: its source read and hash-checked (`sources`, a
    base.KernelSources), built into a library once per executor (`libraries`, shared by
    the executor's launches), its entry looked up. `fallback`: the group's reference instructions,
    what a call runs where the kernel does not (module docstring); they alone run on a device other
    than the CPU. `initial`: the executor's slots before a call (its weights); a weight the kernel
    reads transposed (`spec.transposed`) gets a slot of its own appended there, holding its [K, N]
    copy, and its own slot a transposed view of that copy (the same values, one copy of the bytes)."""
    spec = step.c
    assert spec is not None
    if sources is None:
        raise error(f"{step.where}: a generated C kernel, but the executor has no artifact to read it from")
    libraries = libraries if libraries is not None else CLibraries()
    lib = libraries.library(spec.source, sources) if device is None or device.type == "cpu" else None
    fn = None
    if lib is not None:
        kernel_function(lib, spec.entry, lambda msg: sources.error(spec.source, msg))  # it exists
        check_signature(lib, spec, values, lambda msg: sources.error(spec.source, msg))
        fn = lib[spec.entry]  # a function object of its own, without argtypes (CLaunch.fn)
        fn.restype = ctypes.c_int
    results = {r.value for r in spec.results}
    scratch = tuple(dict.fromkeys(slots[v] for e in step.ops for v in e.outputs if v not in results))
    arg_slots = [slots[a.value] for a in spec.args]
    for i in spec.transposed if fn is not None else ():
        weight = initial[arg_slots[i]] if initial is not None else None
        if weight is None or weight.dim() != 2:
            raise error(f"{step.where}: C kernel '{spec.entry}' reads value '{spec.args[i].value}' as a transposed "
                        "weight, but it is not a 2-d weight")
        copy = weight.t().contiguous()
        initial[arg_slots[i]] = copy.t()
        initial.append(copy)
        arg_slots[i] = len(initial) - 1
    return CLaunch(
        where=step.where, spec=spec, fn=fn, arg_slots=tuple(arg_slots),
        arg_layouts=tuple(a.layout for a in spec.args), result_layouts=tuple(r.layout for r in spec.results),
        result_slots=tuple(slots[r.value] for r in spec.results),
        result_dtypes=tuple(dtypes.to_torch(values[r.value].dtype) for r in spec.results),
        fallback=tuple(fallback), scratch=scratch,
        parallel=fn is not None and spec.template == "elementwise" and libraries.parallel.get(spec.source, False),
        pointers=(ctypes.c_void_p * max(1, len(spec.args) + len(spec.results)))())
