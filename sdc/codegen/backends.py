"""The codegen backends: plugins over the kernel IR (docs/codegen.md).

One package per backend: `c` (generated C for the CPU), `cuda` (CUDA C++ through NVRTC), `triton`
(generated Triton) and `torch` (the vendor calls through torch ops: oneDNN, cuDNN, cuBLAS, and
sdc's C kernel library on the CPU; the planner's reference launches). Each gives a `Backend`: its
`name` and `generate(group)`, which returns the group's `GeneratedKernel`, raises `LoweringError`
saying why it cannot take the group, or returns None when the group is not its to take (no reason
to record: CUDA C++ for a kernel family the compile option `cuda_cpp` does not select). The options
that choose between backends' kernels reach them once, when the planner makes them (`BackendOptions`). What a backend renders is
its renderer's: "why not" (`why_not`), the source (`render`/`function`) and the primitives of the
scalar formulas (sdc/codegen/kernel/decompose.py).

`Target.backends` (sdc/target.py) lists a target's backends in order; the planner offers each launch
step's group to them in that order (`choose`) and the first that renders it owns the step; `torch`,
last, takes every group as it is (the launch stays a reference launch, with the others' reasons).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from sdc.codegen.kernel.program import GeneratedKernel, LoweringError
from sdc.options import DEFAULT_CONV_KERNEL

TORCH = "torch"


@dataclass(frozen=True)
class BackendOptions:
    """The compile options (sdc/options.py) that choose between the backends' kernels."""

    cuda_cpp: tuple[str, ...] = ()  # the kernel families CUDA C++ renders instead of Triton
    conv_kernel: str = DEFAULT_CONV_KERNEL  # "triton": convolution groups try the Triton template; else cuDNN


@dataclass(frozen=True)
class Group:
    """One launch step's kernel group, as the planner offers it to a backend."""

    ops: Sequence[Mapping]  # plan.json op entries, in order
    inputs: Sequence[str]
    outputs: Sequence[str]
    values: Mapping[str, Mapping]  # the values table
    entry: str  # the kernel's name
    weight: Callable[[str], Any] = lambda vid: None  # a weight's tensor, else None
    precision: str = "f32"  # the compile options' precision (tf32 lets f32 matmuls use tf32)
    transposed: Sequence[str] = ()  # C: 2-d weights passed as a transposed copy made at load
    layouts: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # C: values stored in another order


class Backend(Protocol):
    name: str

    def generate(self, group: Group) -> GeneratedKernel | None: ...


def _c(options: BackendOptions) -> Backend:
    from sdc.codegen.c import CBackend

    return CBackend()


def _cuda(options: BackendOptions) -> Backend:
    from sdc.codegen.cuda import CudaBackend

    return CudaBackend(options.cuda_cpp)


def _triton(options: BackendOptions) -> Backend:
    from sdc.codegen.triton import TritonBackend

    return TritonBackend(options.conv_kernel)


def _torch(options: BackendOptions) -> Backend:
    from sdc.codegen.torch import TorchBackend

    return TorchBackend()


BACKENDS: dict[str, Callable[[BackendOptions], Backend]] = {"c": _c, "cuda": _cuda, "triton": _triton, TORCH: _torch}


def backend(name: str, options: BackendOptions = BackendOptions()) -> Backend:
    """A fresh backend object (a C backend collects the functions of one source file)."""
    return BACKENDS[name](options)


def choose(backends: Sequence[Backend], group: Group) -> tuple[GeneratedKernel | None, str]:
    """The first backend's kernel for `group`, in order, and the reasons of those that refused it
    ('; '-joined). None when none renders it (the torch backend keeps it as it is)."""
    reasons: list[str] = []
    for b in backends:
        try:
            generated = b.generate(group)
        except LoweringError as e:
            reasons.append(str(e))
            continue
        if generated is not None:
            return generated, "; ".join(reasons)
        if b.name == TORCH:
            break
    return None, "; ".join(reasons)
