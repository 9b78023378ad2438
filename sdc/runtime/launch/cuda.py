"""Running the generated CUDA C++ kernels of an artifact (plan.json launches with backend "cuda").

A kernel's source is read from `kernels/` through the same `KernelSources` as a Triton kernel's
(listed in the manifest, SHA-256 checked, those same bytes compiled), then compiled at load, once
per source, by NVRTC through torch (`torch.cuda._compile_kernel`, called with only its two basic
arguments: its other parameters changed between torch releases). Compiled kernels are kept for the
process by the source's SHA-256, the entry and the device's compute capability, so a second load
of the artifact, or two launches of one kernel, compile once.

`CudaLaunch` is the executor's instruction for one launch. Its contract is narrower than a Triton
launch's: the kernel indexes every tensor flat, so each tensor must have exactly the domain's sizes
in the dims its map names (no size-1 broadcasting at run time), arguments that are not contiguous
are made so, and results are dense row-major (written into the `alloc` step's buffer when there is
one, through a copy when that buffer is a strided view). The `scalars` (dim expressions over the
domain) follow the pointers as 32-bit ints, which is what torch's launcher passes for a Python int;
a size that does not fit is refused. Launches go on the step's stream (the current one for stream
0), so CUDA graph capture records them like any other kernel.

A plan with CUDA C++ kernels runs on a CUDA device only: on the CPU `check_can_run` refuses it at
load, naming the step. No MLIR here.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.dialect import symexpr
from sdc.runtime import plan_schema as S
from sdc.runtime.launch.base import Settled, read_domain

INT32_MAX = 2**31 - 1
SETTLED = 64  # argument shapes a launch remembers (dynamic dims: one per size seen)
_COMPILED: dict[tuple[str, str, str], Any] = {}  # (source sha256, entry, compute capability) -> kernel


def check_can_run(device: torch.device | None, where: str) -> None:
    """SdcError unless this process can run a CUDA C++ kernel on `device`."""
    if device is None or device.type != "cuda":
        raise SdcError(f"{where}: a CUDA C++ kernel needs a CUDA device (this load is on "
                       f"{device.type if device is not None else 'cpu'}); run with --device cuda, or compile "
                       "without SDC_CUDA_CPP")
    if not hasattr(torch.cuda, "_compile_kernel"):
        raise SdcError(f"{where}: a CUDA C++ kernel needs NVRTC through torch.cuda._compile_kernel, which torch "
                       f"{torch.__version__} does not have")


def compile_source(text: str, digest: str, entry: str, device: torch.device,
                   error: Callable[[str], SdcError]) -> Any:
    """The NVRTC-compiled kernel `entry` of a source, from the process's cache when compiled before."""
    major, minor = torch.cuda.get_device_capability(device)
    key = (digest, entry, f"{major}{minor}")
    if key not in _COMPILED:
        try:
            with torch.cuda.device(device), _cuda_home_for_headerless_sources():
                _COMPILED[key] = torch.cuda._compile_kernel(text, entry)
        except Exception as e:
            first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
            raise error(f"NVRTC cannot compile CUDA C++ kernel '{entry}': {first.strip()}") from e
    return _COMPILED[key]


@contextlib.contextmanager
def _cuda_home_for_headerless_sources():
    """torch's NVRTC wrapper adds the CUDA toolkit's include dir to the options and raises when it
    finds no toolkit (`CUDA_HOME` unset, no nvcc), as on a host with pip's CUDA libraries alone. The
    generated sources include no header (sdc/codegen/cuda/renderer.py), so any existing directory
    serves: torch's own include dir stands in for the toolkit's for the one call, then is put back."""
    try:
        from torch.utils import cpp_extension
    except Exception:
        yield
        return
    if getattr(cpp_extension, "CUDA_HOME", "") is not None:
        yield
        return
    cpp_extension.CUDA_HOME = str(torch.__path__[0])
    try:
        yield
    finally:
        cpp_extension.CUDA_HOME = None


@dataclass(frozen=True)
class _Settled:
    """What a call of one set of argument shapes derives: the domain, grid and scalars."""

    dims: tuple[int, ...]
    grid: tuple[int, int, int]
    scalars: tuple[int, ...]
    shapes: tuple[tuple[int, ...], ...]  # each result's shape


@dataclass(frozen=True, eq=False)
class CudaLaunch:
    """One launch of a generated CUDA C++ kernel, compiled and ready to run (an executor instruction)."""

    where: str  # "rank 0 step 3 (launch k2)"
    spec: S.CudaKernel
    kernel: Any  # torch's compiled kernel: kernel(grid=, block=, args=, shared_mem=, stream=)
    arg_slots: tuple[int, ...]
    result_slots: tuple[int, ...]
    result_dtypes: tuple[torch.dtype, ...]
    device: torch.device
    stream: Any = None  # the CUDA stream, or None for the current one
    settled: Settled = field(default_factory=lambda: Settled(SETTLED))  # argument shapes -> _Settled

    def domain(self, tensors: list[torch.Tensor]) -> list[int]:
        """The domain sizes, read off the arguments: each dim a map names must equal the domain's."""
        def differs(arg: S.TensorArg, j: int, size: int, there: int, d: int) -> str:
            return (f"{self.where}: value '{arg.value}' has size {size} in dim {j}, the CUDA C++ kernel indexes it "
                    f"flat over a domain of size {there} there")

        return read_domain(self.where, self.spec.domain, self.spec.args, tensors, differs, ones_broadcast=False)

    def _settle(self, tensors: list[torch.Tensor]) -> _Settled:
        dims = self.domain(tensors)
        symbols = {f"d{i}": d for i, d in enumerate(dims)}
        scalars = tuple(symexpr.evaluate(x, symbols) for x in self.spec.scalars)
        for expr, value in zip(self.spec.scalars, scalars):
            if not 0 <= value <= INT32_MAX:
                raise SdcError(f"{self.where}: the CUDA C++ kernel's size argument {expr} = {value} does not fit "
                               "a 32-bit int")
        grid = [symexpr.evaluate(g, symbols) for g in self.spec.grid]
        grid3 = (*grid, *([1] * (3 - len(grid))))
        shapes = tuple(tuple(dims[d] if d is not None else 1 for d in r.map) for r in self.spec.results)
        return _Settled(tuple(dims), grid3, scalars, shapes)

    def __call__(self, vals: list, state: Any) -> None:
        tensors = [vals[s] for s in self.arg_slots]
        key = tuple(t.shape for t in tensors)
        known = self.settled.get(key)
        if known is None:
            known = self._settle(tensors)
            self.settled.remember(key, known)
        tensors = [t if t.is_contiguous() else t.contiguous() for t in tensors]
        device = tensors[0].device if tensors else self.device
        results, copies = [], []
        for slot, shape, dtype in zip(self.result_slots, known.shapes, self.result_dtypes):
            existing = vals[slot]
            if existing is not None and tuple(existing.shape) == shape and existing.is_contiguous():
                results.append(existing)
                continue
            fresh = torch.empty(shape, dtype=dtype, device=device)
            if existing is not None and tuple(existing.shape) == shape:  # an alloc step's strided buffer
                copies.append((existing, fresh))
            results.append(fresh)
        if all(g > 0 for g in known.grid):
            block = (*self.spec.block, *([1] * (3 - len(self.spec.block))))
            try:
                self.kernel(grid=known.grid, block=block, args=[*tensors, *results, *known.scalars],
                            shared_mem=self.spec.shared_mem, stream=self.stream)
            except Exception as e:
                raise SdcError(f"{self.where}: the CUDA C++ kernel '{self.spec.entry}' ({self.spec.source}) failed: "
                               f"{type(e).__name__}: {e}") from e
        for existing, fresh in copies:
            existing.copy_(fresh)  # the slot keeps its buffer
        copied = {id(fresh) for _, fresh in copies}
        for slot, t in zip(self.result_slots, results):
            if id(t) not in copied:
                vals[slot] = t


def prepare_cuda_launch(step: S.Launch, slots: dict[str, int], values: dict[str, S.Value], sources: Any,
                        device: torch.device | None, stream: Any, error: Callable[[str], SdcError]) -> CudaLaunch:
    """The instruction for a cuda launch step: its source read and hash-checked (`sources`, a
    base.KernelSources), the device checked, the kernel compiled."""
    spec = step.cuda
    assert spec is not None
    if sources is None:
        raise error(f"{step.where}: a generated CUDA C++ kernel, but the executor has no artifact to read it from")
    text, digest = sources.read(spec.source)
    check_can_run(device, step.where)
    kernel = compile_source(text, digest, spec.entry, device, lambda msg: sources.error(spec.source, msg))
    return CudaLaunch(
        where=step.where, spec=spec, kernel=kernel, arg_slots=tuple(slots[a.value] for a in spec.args),
        result_slots=tuple(slots[r.value] for r in spec.results),
        result_dtypes=tuple(dtypes.to_torch(values[r.value].dtype) for r in spec.results), device=device,
        stream=stream)
