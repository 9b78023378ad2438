"""Running the generated Triton kernels of an artifact (plan.json launches with backend "triton").

The artifact's `kernels/*.py` are the one code the design lets loading execute; they are read and
hash-checked by `base.KernelSources`, whose `entry` executes a source into a fresh namespace and
returns its `@triton.jit` entry; triton compiles it on first launch.

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

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.dialect import symexpr
from sdc.runtime import plan_schema as S
from sdc.runtime.launch import triton_direct
# KernelSources, read_domain: imported from here by the modules that load kernel sources
from sdc.runtime.launch.base import (Autotuner, KernelSources, LaunchConfig, Settled, dense_strides,  # noqa: F401
                                     device_name, inverse, measure, read_domain)

INTERPRET_ENV = "TRITON_INTERPRET"
AUTOTUNE_ENV = "SDC_AUTOTUNE"  # "0": never tune; "1": tune, under the interpreter too; unset: tune on CUDA


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


def tuning_enabled(device: torch.device | None) -> bool:
    setting = os.environ.get(AUTOTUNE_ENV, "").strip().lower()
    if setting in ("0", "false", "off", "no"):
        return False
    if setting in ("1", "true", "on", "yes"):
        return True
    return device is not None and device.type == "cuda" and not interpreting()


def _shape_key(spec: S.TritonKernel, dims: list[int], flags: dict) -> str:
    """The domain sizes, those known only at run time rounded up to a power of 2 (a config tuned
    for 1000 rows serves 600), plus the per-call flags."""
    sizes = [str(d) if static is not None else f"~{1 if d <= 1 else 1 << (d - 1).bit_length()}"
             for d, static in zip(dims, spec.domain)]
    return "x".join(sizes) + "".join(f",{k}={v}" for k, v in sorted(flags.items()))


def _dense(t: torch.Tensor, m: tuple, dims: list[int]) -> bool:
    """Whether `t` is contiguous and indexed in every dim its map names (no size-1 broadcast at run time)."""
    return t.is_contiguous() and all(d is None or t.shape[j] == dims[d] for j, d in enumerate(m))


def _flags_and_strides(spec: S.TritonKernel, tensors: list, dims: list[int]) -> tuple[dict, list[list[int]]]:
    """The per-call constexpr flags and each tensor's strides over the domain (0 where it
    broadcasts), for the kernel's arguments then results: what a launch passes besides pointers and
    sizes, so what triton specializes a compile on. `tensors` need only `shape`, `stride(j)` and
    `is_contiguous()` (the prewarm passes stand-ins, `_Probe`)."""
    maps = [*(a.map for a in spec.args), *(r.map for r in spec.results)]
    flags = {}
    if spec.contiguous_flag is not None:
        flags[spec.contiguous_flag] = int(all(_dense(t, m, dims) for t, m in zip(tensors, maps)))
    strides: list[list[int]] = []
    for t, m in zip(tensors, maps):
        per_dim = [0] * len(dims)
        for j, d in enumerate(m):
            if d is not None and t.shape[j] != 1:
                per_dim[d] = t.stride(j)
        strides.append(per_dim)
    return flags, strides


SETTLED = 16  # signatures a launch remembers (dynamic dims: one per size seen)


@dataclass(frozen=True)
class _Settled:
    """What a call of one signature derives from its operands' shapes and strides: the grid, each
    tensor's strides over the domain, the domain, the constexprs (configuration and flags), and per
    result how its buffer is made (None: the `alloc` step's buffer in its slot; else shape, strides
    and dtype of a fresh one)."""

    grid: tuple[int, ...]
    strides: tuple[tuple[int, ...], ...]
    dims: tuple[int, ...]
    constexprs: dict
    num_warps: int
    results: tuple[tuple | None, ...]
    # per tensors' pointer alignment (triton_direct.alignment): the direct launch, or None where the
    # ordinary one stays (triton_direct.prepare says when)
    direct: dict = field(default_factory=dict, compare=False)


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
    # operand and result-buffer (shape, strides) -> _Settled: everything a call derives from them, so
    # a call of a signature seen before only allocates, packs its arguments and launches (`__call__`)
    settled: Settled = field(default_factory=lambda: Settled(SETTLED))  # signature -> _Settled
    # result slots bound to a slice of a joined buffer (`view` steps): written there or an error, never
    # to a fresh buffer, which the joined buffer's readers would not see
    view_results: frozenset[int] = frozenset()

    def domain(self, tensors: list[torch.Tensor]) -> list[int]:
        static = [d is not None for d in self.spec.domain]

        def differs(arg: S.TensorArg, j: int, size: int, there: int, d: int) -> str:
            what = "the compiled size" if static[d] else "another operand's size"
            return f"{self.where}: value '{arg.value}' has size {size} in dim {j}, {what} there is {there}"

        return read_domain(self.where, self.spec.domain, self.spec.args, tensors, differs, ones_broadcast=True)

    def __call__(self, vals: list, state: Any) -> None:
        tensors = [vals[s] for s in self.arg_slots]
        if self.spec.template == "custom":  # a user's kernel indexes flat: it is promised contiguous tensors
            tensors = [t.contiguous() for t in tensors]
        key = (*((t.shape, t.stride()) for t in tensors),
               *(None if (e := vals[s]) is None else (e.shape, e.stride()) for s in self.result_slots))
        known = self.settled.get(key)
        if known is not None:
            self._launch_settled(known, tensors, vals)
            return
        dims = self.domain(tensors)
        device = tensors[0].device if tensors else self.device
        results = []
        fresh = []  # per result: whether this call made its buffer (else an `alloc` step's buffer)
        for r, dtype, slot in zip(self.spec.results, self.result_dtypes, self.result_slots):
            shape = [dims[d] if d is not None else 1 for d in r.map]
            existing = vals[slot]
            fresh.append(not (existing is not None and list(existing.shape) == shape))
            if fresh[-1] and slot in self.view_results:
                held = None if existing is None else list(existing.shape)
                raise SdcError(f"{self.where}: result '{r.value}' has shape {shape}, its slice of the joined "
                               f"buffer {held}")
            if not fresh[-1]:  # an `alloc` step's buffer
                results.append(existing)
            elif r.layout is not None:
                physical = torch.empty([shape[p] for p in r.layout], dtype=dtype, device=device)
                results.append(physical.permute(inverse(r.layout)))
            else:
                results.append(torch.empty(shape, dtype=dtype, device=device))
        flags, strides = _flags_and_strides(self.spec, [*tensors, *results], dims)
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
            config = self.config(dims, flags, device, tensors, results, launch)
            launch(config, results)
        except SdcError:
            raise
        except Exception as e:
            raise SdcError(f"{self.where}: the Triton kernel '{self.spec.entry}' ({self.spec.source}) failed: "
                           f"{type(e).__name__}: {e}") from e
        for slot, t in zip(self.result_slots, results):
            vals[slot] = t
        final = not self.spec.tune or _shape_key(self.spec, dims, flags) in self.chosen  # not tuned again
        if final:
            recipes = tuple((tuple(r.shape), r.stride(), r.dtype) if made else None for r, made in zip(results, fresh))
            grid = tuple(symexpr.evaluate(g, symbols) for g in config.grid)
            self.settled.remember(key, _Settled(grid, tuple(tuple(st) for st in strides), tuple(dims),
                                                {**config.constexprs, **flags}, config.num_warps, recipes))

    def _launch_settled(self, known: _Settled, tensors: list[torch.Tensor], vals: list) -> None:
        """A call of a signature seen before: the results' buffers, the arguments, the launch."""
        device = tensors[0].device if tensors else self.device
        results = [vals[slot] if recipe is None else torch.empty_strided(recipe[0], recipe[1], dtype=recipe[2],
                                                                          device=device)
                   for slot, recipe in zip(self.result_slots, known.results)]
        if all(g > 0 for g in known.grid):
            operands = [*tensors, *results]
            try:
                aligned = triton_direct.alignment(operands) if operands and operands[0].is_cuda else None
                direct = known.direct.get(aligned)
                if direct is not None:
                    direct(operands, self.stream)
                else:
                    params: list[Any] = []
                    for t, st in zip(operands, known.strides):
                        params.append(t)
                        params += st
                    params += known.dims
                    with torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext():
                        launched = False
                        if aligned is not None and aligned not in known.direct:
                            known.direct[aligned], launched = triton_direct.prepare(
                                self.fn, params, known.constexprs, known.num_warps, known.grid, operands)
                        if not launched:
                            self.fn[known.grid](*params, **known.constexprs, num_warps=known.num_warps)
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
        tuner = Autotuner(self.source_key, device_name(device))
        self.chosen[key] = tuner.choose(key, configs, lambda c: measure(lambda: launch(c, scratch), device))
        return self.chosen[key]


def prepare_launch(step: S.Launch, slots: dict[str, int], values: dict[str, S.Value], sources: KernelSources | None,
                   device: torch.device | None, stream: Any, error: Callable[[str], SdcError],
                   views: frozenset[int] = frozenset()) -> TritonLaunch:
    """The instruction for a triton launch step (the kernel source loaded, not yet compiled). `views`:
    the slots the plan's `view` steps bind to slices of a joined buffer (a concat written in place)."""
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
        device=device, stream=stream, source_key=sources.tune_keys[(spec.source, spec.entry)],
        view_results=frozenset(slots[r.value] for r in spec.results) & views)


# ---------------------------------------------------------------- compiling the kernels at load

PREWARM_ENV = "SDC_PREWARM"  # "0": each kernel compiles at its first launch (triton's default)


@dataclass(frozen=True)
class _Probe:
    """A stand-in for a tensor the first call will pass: its dtype, shape and (dense) strides."""

    dtype: torch.dtype
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    def stride(self, j: int) -> int:
        return self.strides[j]

    def is_contiguous(self) -> bool:
        return self.strides == dense_strides(self.shape, None)


@dataclass(frozen=True)
class WarmCall:
    """One compile that a launch's first call needs, as `JITFunction.warmup` takes it: the tensors
    as their dtypes (triton's MockTensor: an aligned pointer), the strides and sizes as the call will
    pass them, the constexprs and warps. Equal calls are one compile (`key`)."""

    fn: Any
    params: tuple
    constexprs: tuple[tuple[str, Any], ...]
    num_warps: int
    grid: tuple[int, ...]

    @property
    def key(self) -> tuple:
        return (id(self.fn), tuple(str(p) for p in self.params), self.constexprs, self.num_warps)

    def compile(self) -> Any:
        return self.fn.warmup(*self.params, grid=self.grid, **dict(self.constexprs), num_warps=self.num_warps)


def warm_calls(launch: TritonLaunch, values: dict[str, S.Value], layouts: dict[str, tuple[int, ...] | None]
               ) -> list[WarmCall]:
    """The compiles `launch`'s first call will need, predicted from the plan: every configuration
    it may run (its own and, when it tunes, each candidate), for tensors that are dense in the
    layouts the plan gives them. Empty where the domain has a size known only at run time. A wrong
    prediction costs one more compile at the first call, never a wrong result: triton compiles
    whatever the real arguments specialize to."""
    spec = launch.spec
    if any(d is None for d in spec.domain) or spec.template == "custom":
        return []
    dims = [int(d) for d in spec.domain]
    probes: list[_Probe] = []
    for a in spec.args:
        shape = values[a.value].shape
        if not all(isinstance(d, int) for d in shape):
            return []
        probes.append(_Probe(dtypes.to_torch(values[a.value].dtype), tuple(shape),
                             dense_strides(tuple(shape), layouts.get(a.value))))
    for r, dtype in zip(spec.results, launch.result_dtypes):
        shape = tuple(dims[d] if d is not None else 1 for d in r.map)
        probes.append(_Probe(dtype, shape, dense_strides(shape, r.layout)))
    flags, strides = _flags_and_strides(spec, probes, dims)
    params: list[Any] = []
    for probe, st in zip(probes, strides):
        params += [probe.dtype, *st]
    params += dims
    symbols = {f"d{i}": d for i, d in enumerate(dims)}
    configs = [LaunchConfig(spec.constexprs, spec.num_warps, spec.grid)]
    if spec.tune and tuning_enabled(launch.device):
        candidates = configs + [LaunchConfig(t.constexprs, t.num_warps, t.grid) for t in spec.tune]
        cached = Autotuner(launch.source_key, device_name(launch.device)).lookup(_shape_key(spec, dims, flags))
        chosen = [c for c in candidates if cached is not None
                  and c.as_json() == {k: cached.get(k) for k in ("constexprs", "num_warps", "grid")}]
        configs = chosen[:1] or candidates  # tuned before: the first call runs only the cached choice
    return [WarmCall(launch.fn, tuple(params), tuple(sorted({**c.constexprs, **flags}.items())), c.num_warps,
                     tuple(symexpr.evaluate(g, symbols) for g in c.grid)) for c in configs]


def plan_layouts(program: S.RankProgram) -> dict[str, tuple[int, ...] | None]:
    """Each value's physical dim order where the plan says one: a weight's, a generated kernel's
    result layout, a reference group's `layout_cast` result."""
    layouts: dict[str, tuple[int, ...] | None] = {vid: v.layout for vid, v in program.values.items() if v.layout}
    for step in program.steps:
        if not isinstance(step, S.Launch):
            continue
        if step.triton is not None:
            layouts.update({r.value: r.layout for r in step.triton.results if r.layout is not None})
        for op in step.ops:
            if op.op == "layout_cast" and op.attrs.get("layout") is not None:
                layouts[op.outputs[0]] = tuple(op.attrs["layout"])
    return layouts


def prewarm_enabled(device: torch.device | None) -> bool:
    setting = os.environ.get(PREWARM_ENV, "").strip().lower()
    if setting in ("0", "false", "off", "no"):
        return False
    return device is not None and device.type == "cuda" and not interpreting()


def compile_in_parallel(calls: list[WarmCall], workers: int | None = None) -> None:
    """Compile every call at once on a thread pool, through triton's AsyncCompileMode where this
    triton has it (each compile's key goes in the kernel's cache, so the first launch finds it);
    a compile that fails is left for the launch, which reports it with its step."""
    if not calls:
        return
    from concurrent.futures import ThreadPoolExecutor

    workers = workers or max(1, min(len(calls), os.cpu_count() or 1, 16))
    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:
        AsyncCompileMode = None  # noqa: N806 (an older triton: plain threads, each running one warmup)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sdc-triton-compile") as pool:
        if AsyncCompileMode is not None:
            try:
                mode = AsyncCompileMode(pool, ignore_errors=True)
            except TypeError:  # a triton whose mode has no ignore_errors: its exit raises the first failure
                mode = AsyncCompileMode(pool)
            try:
                with mode:  # leaving it waits for every compile and puts each kernel in its cache
                    for call in calls:
                        try:
                            call.compile()
                        except Exception:
                            pass  # the launch compiles again and says why it fails, with its step
            except Exception:
                pass  # likewise: a failed compile is the launch's to report
        else:
            current = torch.cuda.current_device() if torch.cuda.is_available() else None

            def on_device(call: WarmCall) -> Any:  # a new thread's current device is cuda:0
                if current is None:
                    return call.compile()
                with torch.cuda.device(current):
                    return call.compile()

            for future in [pool.submit(on_device, call) for call in calls]:
                try:
                    future.result()
                except Exception:
                    pass


def prewarm(instructions: list, program: S.RankProgram, device: torch.device | None,
            compile_all: Callable[[list[WarmCall]], None] | None = None) -> int:
    """Compile the generated kernels of a loaded program now, all at once, instead of one by one
    inside the first call; returns how many distinct compiles were started (launches of one kernel
    function with equal arguments share one). `compile_all` runs them (default
    `compile_in_parallel`; tests pass their own). Only on cuda, and off with SDC_PREWARM=0."""
    if compile_all is None and not prewarm_enabled(device):
        return 0
    layouts = plan_layouts(program)
    unique: dict[tuple, WarmCall] = {}
    for launch in instructions:
        if not isinstance(launch, TritonLaunch):
            continue
        try:
            calls = warm_calls(launch, program.values, layouts)
        except Exception:  # a prediction is an optimization: the launch itself still compiles and checks
            continue
        for call in calls:
            unique.setdefault(call.key, call)
    (compile_all or compile_in_parallel)(list(unique.values()))
    return len(unique)
