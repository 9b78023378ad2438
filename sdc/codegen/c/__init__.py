"""C codegen for the CPU target: kernel groups rendered as C functions, compiled at load.

On the CPU target torch costs 10-35 us per op; a kernel group that a template fits runs instead as one
generated C function. The planner lowers the group to the shared kernel IR
(`sdc.codegen.kernel.lower_group`, with `CRenderer.elementwise_ops()` as its op set), so every
backend computes the same `KernelProgram`; `CRenderer` (renderer.py: the elementwise and row
templates; matmul.py: the matmul template) renders it as `int ENTRY(void **p, const int64_t *d)`,
and all functions of a rank go into one source file of the artifact (`kernels/cpu.c`, generate.py).
`CBackend` is the planner's side (sdc/codegen/backends.py). The runtime compiles that file once
with the host's C compiler and calls each function through ctypes; the kernel ABI (argument and result pointers, domain sizes, dense row-major tensors,
storage types) is written in sdc/runtime/launch/c.py. A program the renderer cannot take
(`CRenderer.why_not`) keeps its group on torch.
"""

from __future__ import annotations

from sdc.codegen.c.generate import C_SOURCE, c_kernel
from sdc.codegen.c.renderer import CRenderer
from sdc.codegen.kernel.program import CONV, GeneratedKernel
from sdc.codegen.kernel.templates import template_of
from sdc.dialect.hooks import OpKind
from sdc.dialect.opdef import all_ops
from sdc.runtime.format import C

__all__ = ["C", "CBackend", "CRenderer", "C_SOURCE"]


class CBackend:
    """The C backend (sdc/codegen/backends.py): each group it takes is one function of the rank's
    one source file, `file()` (the groups' functions, in order, with the helpers they use)."""

    name = C

    def __init__(self) -> None:
        self.renderer = CRenderer()
        self.functions: list[str] = []

    def generate(self, group) -> GeneratedKernel | None:
        if template_of(group.ops).name == CONV or any(_is_custom(e["op"]) for e in group.ops):
            return None  # convolutions: oneDNN or sdc's conv kernels; custom ops: the user's own reference
        generated = c_kernel(self.renderer, group.ops, group.inputs, group.outputs, group.values, group.entry,
                             group.weight, group.transposed, group.layouts)
        self.functions.append(generated.source)
        return generated

    def file(self) -> str:
        return self.renderer.file(self.functions)


def _is_custom(name: str) -> bool:
    op = all_ops().get(name)
    return op is not None and op.kind == OpKind.CUSTOM
