"""CUDA C++ codegen: kernel groups rendered as CUDA C++ beside the Triton ones (docs/codegen.md).

The GPU issue allows CUDA C++ kernels, compiled at load with NVRTC, for what Triton expresses badly,
where a measurement shows they pay. Which kernel families render as CUDA C++ is chosen at compile
time by the compile option `cuda_cpp` (a list of `FAMILIES`, default from `SDC_CUDA_CPP`; empty: every
generated kernel is Triton, sdc/options.py) until the H200 measurement (bench/kernels_gpu.py, `ew-cuda` row) says otherwise.

A group reaches here lowered to the kernel IR (`sdc.codegen.kernel`): the same `KernelProgram`, so
both backends compute the same program. `cuda_kernel` renders it when the options select its family
and `CudaRenderer` takes it, and returns plan.json's launch `kernel` object (backend
"cuda", sdc/runtime/plan_schema.py `CudaKernel`) with the source; otherwise None, and the group keeps
its Triton kernel. The runtime compiles the source once at load (sdc/runtime/launch/cuda.py).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from sdc.codegen.cuda.renderer import CudaRenderer
from sdc.codegen.kernel import LoweringError, lower_group
from sdc.codegen.kernel.program import GeneratedKernel, KernelProgram
from sdc.options import CUDA_CPP_ENV, CUDA_CPP_FAMILIES
from sdc.runtime.format import CUDA

__all__ = ["CUDA_CPP_ENV", "FAMILIES", "CudaBackend", "CudaRenderer", "cuda_kernel"]

FAMILIES = CUDA_CPP_FAMILIES  # the kernel families (KernelProgram templates) CUDA C++ can render


def cuda_kernel(program: KernelProgram, ops: Sequence[Mapping], entry: str, families: Sequence[str],
                renderer: CudaRenderer | None = None) -> GeneratedKernel | None:
    """The CUDA C++ kernel of a lowered group when `families` (the compile option `cuda_cpp`)
    selects its family and the renderer takes it; None otherwise (the group stays Triton)."""
    if program.template not in families:
        return None
    renderer = renderer or CudaRenderer()
    if renderer.why_not(program) is not None:
        return None
    kernel = {
        "backend": CUDA,
        "entry": entry,
        "template": program.template,
        "domain": list(program.domain),
        "args": [{"value": a.value, "map": list(a.map)} for a in program.args],
        "results": [{"value": r.value, "map": list(r.map)} for r, _ in program.results],
        "grid": renderer.grid(program),
        "block": [renderer.threads],
        "shared_mem": 0,
        "scalars": [renderer.numel(program)],
        "ops": [dict(e) for e in ops],
    }
    return GeneratedKernel(program, renderer.render(program, entry), kernel)


class CudaBackend:
    """The CUDA C++ backend (sdc/codegen/backends.py): a group of a family the compile option
    `cuda_cpp` selects that the renderer takes; any other is not its to take (None: the next backend,
    Triton, renders it)."""

    name = CUDA

    def __init__(self, families: Sequence[str] = ()):
        self.families = tuple(families)

    def generate(self, group) -> GeneratedKernel | None:
        if not self.families:
            return None
        try:
            program = lower_group(group.ops, group.inputs, group.outputs, group.values, CudaRenderer.elementwise_ops(),
                                  group.weight)
        except LoweringError:
            return None  # the Triton backend says why, where it cannot take the group either
        return cuda_kernel(program, group.ops, group.entry, self.families)
